package incluster

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

// TestValidateSaysWhatToFix: each bad combination of flags is refused with
// the flag to fix; the defaults pass.
func TestValidateSaysWhatToFix(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string // "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "--namespace"},
		{"certificate without key", func(o *Options) { o.TLSCertFile = "tls.crt" }, "--tls-key-file"},
		{"key without certificate", func(o *Options) { o.TLSKeyFile = "tls.key" }, "--tls-cert-file"},
		{"no access cache", func(o *Options) { o.AccessTTL = 0 }, "--access-cache-ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			err := o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestSelfSignedCertificateCoversItsNames: without certificate files the
// console serves a certificate for its Service's name, localhost and the
// loopback IP (port-forward), or for the names given.
func TestSelfSignedCertificateCoversItsNames(t *testing.T) {
	for _, tt := range []struct {
		names []string
		hosts []string
	}{
		{nil, []string{"lifecycle-manager-console.fleet.svc", "localhost", "127.0.0.1"}},
		{[]string{"console.example.com", "10.0.0.7"}, []string{"console.example.com", "10.0.0.7"}},
	} {
		o := DefaultOptions()
		o.Namespace, o.TLSNames = "fleet", tt.names
		pair, err := o.certificate()
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, host := range tt.hosts {
			if err := cert.VerifyHostname(host); err != nil {
				t.Errorf("names %v: %v", tt.names, err)
			}
		}
		if cert.VerifyHostname("192.0.2.1") == nil {
			t.Errorf("names %v: the certificate covers an address it was not made for", tt.names)
		}
		if !cert.NotAfter.After(time.Now().Add(300 * 24 * time.Hour)) {
			t.Errorf("the self-signed certificate expires at %s, within a year", cert.NotAfter)
		}
	}
}
