package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

var policy = pki.RuntimePolicy{
	Validity:        time.Hour,
	ServingDNSNames: []string{"runtime-watcher.kyma-system.svc"},
	ServingIPs:      []net.IP{net.IPv4(127, 0, 0, 1)},
}

func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("test-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func ensure(t *testing.T, ca *pki.CA, existing map[string][]byte, id string, p pki.RuntimePolicy, now time.Time) pki.RuntimeCredentials {
	t.Helper()
	creds, err := ca.EnsureRuntime(existing, id, p, now)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func TestEnsureRuntimeIssuesKeepsAndRenews(t *testing.T) {
	ca := newCA(t)
	now := time.Now()
	first := ensure(t, ca, nil, "runtime-a", policy, now)
	otherCA := ensure(t, newCA(t), nil, "runtime-a", policy, now)

	withKey := func(key string, value []byte) map[string][]byte {
		data := map[string][]byte{}
		for k, v := range first.Data {
			data[k] = v
		}
		data[key] = value
		return data
	}
	otherNames := policy
	otherNames.ServingDNSNames = []string{"runtime-watcher.other.svc"}
	shortServingCA := policy
	shortServingCA.ServingCAValidity = 2 * time.Hour
	firstShort := ensure(t, ca, nil, "runtime-a", shortServingCA, now)

	const (
		servingCA = "serving CA"
		client    = "client certificate"
		serving   = "serving certificate"
	)
	tests := []struct {
		name     string
		existing map[string][]byte
		id       string
		policy   pki.RuntimePolicy
		now      time.Time
		reissued []string
	}{
		{name: "nothing yet", existing: nil, id: "runtime-a", policy: policy, now: now, reissued: []string{servingCA, client, serving}},
		{name: "still good", existing: first.Data, id: "runtime-a", policy: policy, now: now},
		{name: "runtime id changed", existing: first.Data, id: "runtime-b", policy: policy, now: now, reissued: []string{client}},
		{name: "serving names changed", existing: first.Data, id: "runtime-a", policy: otherNames, now: now, reissued: []string{serving}},
		{name: "due for renewal", existing: first.Data, id: "runtime-a", policy: policy, now: now.Add(45 * time.Minute), reissued: []string{client, serving}},
		{name: "expired", existing: first.Data, id: "runtime-a", policy: policy, now: now.Add(2 * time.Hour), reissued: []string{client, serving}},
		// The serving CA is the runtime's own, whoever made it; the client
		// certificate must come from this watcher CA.
		{name: "client certificate of another CA", existing: otherCA.Data, id: "runtime-a", policy: policy, now: now, reissued: []string{client}},
		{name: "key of another certificate", existing: withKey(pki.ClientKeyKey, first.Data[pki.ServingKeyKey]), id: "runtime-a", policy: policy, now: now, reissued: []string{client}},
		{name: "client key missing", existing: withKey(pki.ClientKeyKey, nil), id: "runtime-a", policy: policy, now: now, reissued: []string{client}},
		{name: "serving CA due, and what it issued with it", existing: firstShort.Data, id: "runtime-a", policy: shortServingCA, now: now.Add(100 * time.Minute), reissued: []string{servingCA, client, serving}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ensure(t, ca, tt.existing, tt.id, tt.policy, tt.now)
			var reissued []string
			for _, r := range got.Reissued {
				what, _, _ := strings.Cut(r, ":")
				reissued = append(reissued, what)
			}
			if strings.Join(reissued, ",") != strings.Join(tt.reissued, ",") {
				t.Fatalf("reissued %q, want %q", got.Reissued, tt.reissued)
			}
			for key, what := range map[string]string{pki.ClientCertKey: client, pki.ServingCertKey: serving, pki.ServingCACertKey: servingCA} {
				kept := string(got.Data[key]) == string(tt.existing[key])
				if kept == slices.Contains(tt.reissued, what) {
					t.Fatalf("%s kept=%v, but reissued %q", key, kept, tt.reissued)
				}
			}
			client, err := ca.Verify(got.Data[pki.ClientCertKey], pki.ClientAuth, tt.now)
			if err != nil {
				t.Fatalf("client certificate: %v", err)
			}
			if client.Subject.CommonName != tt.id {
				t.Fatalf("client certificate CN %q, want %q", client.Subject.CommonName, tt.id)
			}
			if _, err := tls.X509KeyPair(got.Data[pki.ClientCertKey], got.Data[pki.ClientKeyKey]); err != nil {
				t.Fatalf("client key pair: %v", err)
			}
			runtimeCA, err := pki.ParseCA(got.Data[pki.ServingCACertKey], got.Data[pki.ServingCAKeyKey])
			if err != nil {
				t.Fatalf("serving CA: %v", err)
			}
			serving, err := runtimeCA.Verify(got.Data[pki.ServingCertKey], pki.ServerAuth, tt.now)
			if err != nil {
				t.Fatalf("serving certificate: %v", err)
			}
			if err := serving.VerifyHostname("127.0.0.1"); err != nil {
				t.Fatal(err)
			}
			if _, err := ca.Verify(got.Data[pki.ServingCertKey], pki.ServerAuth, tt.now); err == nil {
				t.Fatal("the watcher CA vouches for a runtime's serving certificate")
			}
			if string(got.Data[pki.CAKey]) != string(ca.CertPEM()) {
				t.Fatal("credentials do not carry the CA certificate")
			}
			if !got.RenewAt.After(tt.now) {
				t.Fatalf("RenewAt %s is not after now %s", got.RenewAt, tt.now)
			}
		})
	}
}

// Two runtimes' agents carry the same Service names; neither's serving
// certificate is trusted by the other's webhook configuration.
func TestServingCertificatesDoNotCrossRuntimes(t *testing.T) {
	ca := newCA(t)
	a := ensure(t, ca, nil, "runtime-a", policy, time.Now())
	b := ensure(t, ca, nil, "runtime-b", policy, time.Now())
	caA, err := pki.ParseCA(a.Data[pki.ServingCACertKey], a.Data[pki.ServingCAKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caA.Verify(b.Data[pki.ServingCertKey], pki.ServerAuth, time.Now()); err == nil {
		t.Fatal("runtime a's caBundle trusts runtime b's agent")
	}
}

func TestUsagesAreSeparate(t *testing.T) {
	ca := newCA(t)
	serving, err := ca.Issue(pki.Request{CommonName: "s", Usage: pki.ServerAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(pki.Request{CommonName: "c", Usage: pki.ClientAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Verify(serving.CertPEM, pki.ClientAuth, time.Now()); err == nil {
		t.Fatal("a serving certificate verified as a client certificate")
	}
	if _, err := ca.Verify(client.CertPEM, pki.ServerAuth, time.Now()); err == nil {
		t.Fatal("a client certificate verified as a serving certificate")
	}
}

func TestRenewAtLeavesTheFractionOfLifetime(t *testing.T) {
	ca := newCA(t)
	for _, validity := range []time.Duration{30 * time.Second, time.Hour, 90 * 24 * time.Hour} {
		kp, err := ca.Issue(pki.Request{CommonName: "x", Usage: pki.ClientAuth, Validity: validity})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := pki.ParseCertificate(kp.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		lifetime := cert.NotAfter.Sub(cert.NotBefore)
		left := cert.NotAfter.Sub(pki.RenewAt(cert, 0.25))
		if left != lifetime/4 {
			t.Fatalf("validity %s: %s left at renewal, want %s", validity, left, lifetime/4)
		}
		// A fresh certificate is never due at once, whatever its lifetime.
		if !pki.RenewAt(cert, pki.DefaultRenewFraction).After(time.Now()) {
			t.Fatalf("validity %s: a fresh certificate is already due", validity)
		}
	}
}

func TestParseCARoundTripAndRefusesMismatch(t *testing.T) {
	ca := newCA(t)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := pki.ParseCA(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := loaded.Issue(pki.Request{CommonName: "x", Usage: pki.ClientAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Verify(kp.CertPEM, pki.ClientAuth, time.Now()); err != nil {
		t.Fatalf("a certificate issued by the loaded CA does not verify with the original: %v", err)
	}
	otherKey, err := newCA(t).KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.ParseCA(ca.CertPEM(), otherKey); err == nil {
		t.Fatal("ParseCA accepted a key of another CA")
	}
	if _, err := pki.ParseCA(kp.CertPEM, kp.KeyPEM); err == nil {
		t.Fatal("ParseCA accepted a leaf certificate")
	}
}

func TestServingCertificateRenewsBeforeExpiry(t *testing.T) {
	ca := newCA(t)
	// A lifetime this short is due for renewal almost at once.
	source := pki.NewServingCertificate(ca, pki.Request{CommonName: "listener", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: 50 * time.Millisecond}, 0.9)
	first, err := source.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Fatal("the listener certificate is not a serving certificate")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		next, err := source.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if next.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the serving certificate was not renewed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A certificate with time left is served again rather than reissued.
	long := pki.NewServingCertificate(ca, pki.Request{CommonName: "listener", Validity: time.Hour}, 0)
	a, _ := long.GetCertificate(nil)
	b, _ := long.GetCertificate(nil)
	if a != b {
		t.Fatal("a valid serving certificate was reissued")
	}
}
