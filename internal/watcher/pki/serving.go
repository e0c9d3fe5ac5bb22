package pki

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"
)

// ServingCertificate hands out a serving certificate issued by the CA and
// issues a new one when the current one is due for renewal, so that a
// long-running server (the listener) never serves an expired certificate.
type ServingCertificate struct {
	ca    *CA
	req   Request
	renew float64
	mu    sync.Mutex
	cert  *tls.Certificate
	dueAt time.Time
}

// NewServingCertificate returns a source of serving certificates for req
// (req.Usage is set to ServerAuth).
func NewServingCertificate(ca *CA, req Request, renewFraction float64) *ServingCertificate {
	req.Usage = ServerAuth
	return &ServingCertificate{ca: ca, req: req, renew: renewFraction}
}

// GetCertificate fits tls.Config.GetCertificate.
func (s *ServingCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil && time.Now().Before(s.dueAt) {
		return s.cert, nil
	}
	kp, err := s.ca.Issue(s.req)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the issued serving certificate: %w", err)
	}
	s.cert, s.dueAt = &cert, RenewAt(cert.Leaf, s.renew)
	return s.cert, nil
}
