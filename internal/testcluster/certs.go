package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity outlives any test run or dev session, so that nothing has to rotate.
const certValidity = 7 * 24 * time.Hour

// clusterCerts is the PKI of one cluster: its own CA, so that a client configured for one
// cluster can never talk to another one by accident, the API server's serving certificate,
// an admin client certificate and the service-account signing key.
type clusterCerts struct {
	caCert []byte // PEM, embedded into kubeconfigs

	adminCert []byte // PEM, CN=admin O=system:masters
	adminKey  []byte // PEM

	// Files the kube-apiserver reads.
	caCertFile       string
	servingCertFile  string
	servingKeyFile   string
	saPublicKeyFile  string
	saSigningKeyFile string
}

// writeCerts generates the cluster's PKI into dir. ECDSA P-256 keys keep generation in the
// millisecond range, which matters when many clusters start in one test binary.
func writeCerts(dir string) (*clusterCerts, error) {
	caDER, caKey, err := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "testcluster-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	servingDER, servingKey, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
	}, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the API server serving certificate: %w", err)
	}
	adminDER, adminKey, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the admin client certificate: %w", err)
	}
	saKey, err := newKey()
	if err != nil {
		return nil, err
	}

	c := &clusterCerts{
		caCert:           pemBlock("CERTIFICATE", caDER),
		adminCert:        pemBlock("CERTIFICATE", adminDER),
		caCertFile:       filepath.Join(dir, "ca.crt"),
		servingCertFile:  filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:   filepath.Join(dir, "apiserver.key"),
		saPublicKeyFile:  filepath.Join(dir, "sa.pub"),
		saSigningKeyFile: filepath.Join(dir, "sa.key"),
	}
	if c.adminKey, err = keyPEM(adminKey); err != nil {
		return nil, err
	}
	return c, c.writeFiles(servingDER, servingKey, saKey)
}

// issue makes a key and a certificate for it from template, signed by
// parent (self-signed when parent is nil).
func issue(template, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	der, err := sign(template, key, parent, parentKey)
	return der, key, err
}

// writeFiles writes what the kube-apiserver reads: the CA, its serving
// certificate and key, and the service-account key pair.
func (c *clusterCerts) writeFiles(servingDER []byte, servingKey, saKey *ecdsa.PrivateKey) error {
	servingKeyPEM, err := keyPEM(servingKey)
	if err != nil {
		return err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("encoding the service-account public key: %w", err)
	}
	files := map[string][]byte{
		c.caCertFile:       c.caCert,
		c.servingCertFile:  pemBlock("CERTIFICATE", servingDER),
		c.servingKeyFile:   servingKeyPEM,
		c.saPublicKeyFile:  pemBlock("PUBLIC KEY", saPubDER),
		c.saSigningKeyFile: saKeyPEM,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return key, nil
}

// sign issues template for key, signed by parent; a nil parent makes it self-signed.
func sign(template *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	template.SerialNumber = serial
	// Backdated a little so that a clock step between processes does not make it "not yet valid".
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(certValidity)
	if parent == nil {
		parent, parentKey = template, key
	}
	return x509.CreateCertificate(rand.Reader, template, parent, key.Public(), parentKey)
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
