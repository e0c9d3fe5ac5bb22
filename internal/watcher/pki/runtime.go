package pki

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"
)

// Keys of the data of a runtime's credentials, in the control-plane Secret
// that is their record and in the Secrets written into the runtime.
const (
	// CAKey holds the watcher CA's certificate: agents verify the listener
	// with it.
	CAKey = "ca.crt"
	// ClientCertKey and ClientKeyKey are the runtime's client certificate
	// (subject CN = runtime id) and key, with which the agent reports.
	ClientCertKey = "client.crt"
	ClientKeyKey  = "client.key"
	// ServingCACertKey and ServingCAKeyKey are the runtime's own serving CA.
	// The webhook's caBundle is its certificate; its key never leaves the
	// control plane.
	ServingCACertKey = "serving-ca.crt"
	ServingCAKeyKey  = "serving-ca.key"
	// ServingCertKey and ServingKeyKey are the agent's serving certificate and
	// key, which the runtime's API server verifies when it calls the webhook.
	ServingCertKey = "serving.crt"
	ServingKeyKey  = "serving.key"
)

// RuntimePolicy says what a runtime's certificates look like and when they
// are renewed.
type RuntimePolicy struct {
	// Validity is the lifetime of each issued certificate.
	Validity time.Duration
	// ServingCAValidity is the lifetime of the runtime's serving CA. It is
	// long: a new serving CA changes the webhook's caBundle, and calls in the
	// moment until the agent has the matching certificate fail open.
	ServingCAValidity time.Duration
	// RenewFraction renews a certificate when less than this fraction of its
	// lifetime is left (0 means DefaultRenewFraction).
	RenewFraction float64
	// ServingDNSNames and ServingIPs are the names the runtime's API server
	// reaches the agent by.
	ServingDNSNames []string
	ServingIPs      []net.IP
}

// DefaultServingCAValidity is the lifetime of a runtime's serving CA.
const DefaultServingCAValidity = 10 * 365 * 24 * time.Hour

// RuntimeCredentials is the result of EnsureRuntime.
type RuntimeCredentials struct {
	// Data holds the certificates and keys under the keys above.
	Data map[string][]byte
	// Reissued names what was issued anew and why (empty when nothing was),
	// for logs and events; it never contains key material.
	Reissued []string
	// RenewAt is the earliest time a certificate is due for renewal; look
	// again then.
	RenewAt time.Time
}

// EnsureRuntime returns the credentials of the runtime runtimeID: the
// existing ones where they are still good, newly issued ones where they are
// missing, issued by another CA, for another runtime id or other names,
// expired or due for renewal. It reads nothing but its arguments.
//
// The serving certificate is issued by a CA of the runtime's own, not by the
// watcher CA: every agent's serving certificate carries the same Service
// names, so with one issuer for all, one runtime's serving key would be
// trusted by every other runtime's API server.
func (ca *CA) EnsureRuntime(existing map[string][]byte, runtimeID string, p RuntimePolicy, now time.Time) (RuntimeCredentials, error) {
	out := RuntimeCredentials{Data: map[string][]byte{CAKey: ca.CertPEM()}}
	note := func(what, why string) { out.Reissued = append(out.Reissued, what+": "+why) }
	due := func(cert *x509.Certificate) {
		if at := RenewAt(cert, p.RenewFraction); out.RenewAt.IsZero() || at.Before(out.RenewAt) {
			out.RenewAt = at
		}
	}

	servingCA, why := usableCA(existing[ServingCACertKey], existing[ServingCAKeyKey], p.RenewFraction, now)
	if why != "" {
		var err error
		validity := p.ServingCAValidity
		if validity <= 0 {
			validity = DefaultServingCAValidity
		}
		if servingCA, err = newCA("runtime-watcher-serving-ca", validity, now); err != nil {
			return RuntimeCredentials{}, err
		}
		note("serving CA", why)
	}
	keyBytes, err := servingCA.KeyPEM()
	if err != nil {
		return RuntimeCredentials{}, err
	}
	out.Data[ServingCACertKey], out.Data[ServingCAKeyKey] = servingCA.CertPEM(), keyBytes
	due(servingCA.cert)

	pairs := []struct {
		name          string
		issuer        *CA
		certKey, kKey string
		req           Request
		matches       func(*x509.Certificate) string
	}{
		{
			name: "client certificate", issuer: ca, certKey: ClientCertKey, kKey: ClientKeyKey,
			req: Request{CommonName: runtimeID, Usage: ClientAuth, Validity: p.Validity},
			matches: func(c *x509.Certificate) string {
				if c.Subject.CommonName != runtimeID {
					return "issued for another runtime id"
				}
				return ""
			},
		},
		{
			name: "serving certificate", issuer: servingCA, certKey: ServingCertKey, kKey: ServingKeyKey,
			req: Request{CommonName: "runtime-watcher", DNSNames: p.ServingDNSNames, IPs: p.ServingIPs, Usage: ServerAuth, Validity: p.Validity},
			matches: func(c *x509.Certificate) string {
				if !slices.Equal(c.DNSNames, p.ServingDNSNames) || !slices.EqualFunc(c.IPAddresses, p.ServingIPs, net.IP.Equal) {
					return "issued for other names"
				}
				return ""
			},
		},
	}
	for _, pair := range pairs {
		certPEM, keyPEM := existing[pair.certKey], existing[pair.kKey]
		if why := pair.issuer.problem(certPEM, keyPEM, pair.req.Usage, p.RenewFraction, now, pair.matches); why != "" {
			kp, err := pair.issuer.issue(pair.req, now)
			if err != nil {
				return RuntimeCredentials{}, err
			}
			certPEM, keyPEM = kp.CertPEM, kp.KeyPEM
			note(pair.name, why)
		}
		out.Data[pair.certKey], out.Data[pair.kKey] = certPEM, keyPEM
		cert, err := ParseCertificate(certPEM)
		if err != nil {
			return RuntimeCredentials{}, err
		}
		due(cert)
	}
	if !bytes.Equal(existing[CAKey], out.Data[CAKey]) && len(out.Reissued) == 0 {
		note("CA certificate", "changed")
	}
	return out, nil
}

// usableCA loads a runtime's serving CA and says why it cannot be kept, if
// it cannot.
func usableCA(certPEM, keyPEM []byte, fraction float64, now time.Time) (*CA, string) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, "missing"
	}
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, "unreadable"
	}
	if !now.Before(RenewAt(ca.cert, fraction)) || now.Before(ca.cert.NotBefore) {
		return nil, fmt.Sprintf("due for renewal (expires %s)", ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ca, ""
}

// problem says why an existing key pair cannot be kept, or "" when it can.
func (ca *CA) problem(certPEM, keyPEM []byte, usage Usage, fraction float64, now time.Time, matches func(*x509.Certificate) string) string {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return "missing"
	}
	cert, err := ca.Verify(certPEM, usage, now)
	if err != nil {
		return "not valid for its CA now"
	}
	if !keyMatches(cert, keyPEM) {
		return "key does not match"
	}
	if reason := matches(cert); reason != "" {
		return reason
	}
	if !now.Before(RenewAt(cert, fraction)) {
		return fmt.Sprintf("due for renewal (expires %s)", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

func keyMatches(cert *x509.Certificate, keyPEM []byte) bool {
	_, err := x509KeyPair(cert, keyPEM)
	return err == nil
}
