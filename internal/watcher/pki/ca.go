// Package pki is the watcher's certificate authority: a CA kept in a
// protected control-plane namespace, per-runtime client certificates whose
// subject common name is the runtime id, serving certificates for the
// listener and the runtime agents, and the rule that says when a certificate
// is renewed (SPEC R9).
//
// It is small on purpose: ECDSA P-256 keys, one CA, no intermediate, no
// revocation list. A certificate is worthless without the Kyma that carries
// its runtime id (the listener looks the id up for every report), so deleting
// a Kyma revokes its runtime's certificate in effect; lifetimes are short
// enough that rotation, not revocation, limits what a stolen key is good for.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Usage says what a certificate may be used for. The listener accepts only
// client certificates and agents accept only server certificates, so a
// runtime's serving key cannot be used to report, nor its client key to pose
// as the listener.
type Usage int

// The usages a certificate is issued for.
const (
	ClientAuth Usage = iota
	ServerAuth
)

// maxSkew bounds how far back NotBefore is set, so that a runtime whose clock
// is a little behind the control plane's accepts a fresh certificate.
const maxSkew = 5 * time.Minute

// CA signs the watcher's certificates.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// Request describes a certificate to issue.
type Request struct {
	// CommonName is the subject; for a runtime's client certificate it is the
	// runtime id, the identity the listener checks.
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	Usage      Usage
	// Validity is how long the certificate is valid from now.
	Validity time.Duration
}

// KeyPair is a PEM-encoded certificate and its private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed CA valid for validity from now.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	return newCA(commonName, validity, time.Now())
}

func newCA(commonName string, validity time.Duration, now time.Time) (*CA, error) {
	if validity <= 0 {
		return nil, errors.New("creating a CA: validity must be positive")
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := sign(template, key.Public(), nil, key, validity, now)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// ParseCA loads a CA from PEM. It refuses a certificate that is not a CA or
// a key that does not belong to it, so that a damaged Secret is noticed at
// start rather than when the first runtime fails to connect.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("the CA certificate is not a CA")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("the CA key is not PEM")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA key: %w", err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the CA key is a %T, want ECDSA", parsed)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("the CA key does not match the CA certificate")
	}
	return &CA{cert: cert, key: key, certPEM: certPEM}, nil
}

// CertPEM is the CA certificate; it is public and goes wherever a peer must
// be verified (webhook caBundle, agent trust, listener client CAs).
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// KeyPEM is the CA's private key, for storing it; never log it.
func (ca *CA) KeyPEM() ([]byte, error) {
	key, ok := ca.key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the CA key is a %T, want ECDSA", ca.key)
	}
	return keyPEM(key)
}

// Certificate is the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Issue creates a key and a certificate for req, signed by the CA.
func (ca *CA) Issue(req Request) (KeyPair, error) {
	return ca.issue(req, time.Now())
}

func (ca *CA) issue(req Request, now time.Time) (KeyPair, error) {
	if req.CommonName == "" {
		return KeyPair{}, errors.New("issuing a certificate: empty common name")
	}
	if req.Validity <= 0 {
		return KeyPair{}, errors.New("issuing a certificate: validity must be positive")
	}
	key, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: req.CommonName},
		DNSNames:    req.DNSNames,
		IPAddresses: req.IPs,
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	switch req.Usage {
	case ClientAuth:
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	case ServerAuth:
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	default:
		return KeyPair{}, fmt.Errorf("issuing a certificate: unknown usage %d", req.Usage)
	}
	der, err := sign(template, key.Public(), ca.cert, ca.key, req.Validity, now)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issuing a certificate for %q: %w", req.CommonName, err)
	}
	keyBytes, err := keyPEM(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: keyBytes}, nil
}

// Verify checks that certPEM was issued by this CA for usage and is valid at
// now.
func (ca *CA) Verify(certPEM []byte, usage Usage, now time.Time) (*x509.Certificate, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	ext := x509.ExtKeyUsageClientAuth
	if usage == ServerAuth {
		ext = x509.ExtKeyUsageServerAuth
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{ext}}); err != nil {
		return nil, fmt.Errorf("verifying the certificate of %q: %w", cert.Subject.CommonName, err)
	}
	return cert, nil
}

// ParseCertificate parses the first PEM certificate in data.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate found")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing a certificate: %w", err)
	}
	return cert, nil
}

// RenewAt is when a certificate should be replaced: once less than fraction
// of its lifetime remains. Renewing early keeps an agent's old certificate
// valid while the new one travels to it, so no report is refused in between.
func RenewAt(cert *x509.Certificate, fraction float64) time.Time {
	if fraction <= 0 || fraction >= 1 {
		fraction = DefaultRenewFraction
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-time.Duration(fraction * float64(lifetime)))
}

// DefaultRenewFraction renews a certificate when a third of its lifetime is
// left.
const DefaultRenewFraction = 1.0 / 3

func sign(template *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, parentKey crypto.Signer, validity time.Duration, now time.Time) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	template.SerialNumber = serial
	template.NotBefore = now.Add(-min(maxSkew, validity/10))
	template.NotAfter = now.Add(validity)
	if parent == nil {
		parent = template
	} else if template.NotAfter.After(parent.NotAfter) {
		// A certificate cannot outlive its issuer.
		template.NotAfter = parent.NotAfter
	}
	return x509.CreateCertificate(rand.Reader, template, parent, pub, parentKey)
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return key, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
