package fetch_test

import (
	"context"
	"crypto/elliptic"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// TestSignaturesAreCheckedBeforeContentIsRead: content of a host that
// requires signatures is refused unsigned before any blob is downloaded;
// once signed it is fetched, and later fetches make no request at all;
// http(s) links to such a host are refused; other hosts are unaffected.
func TestSignaturesAreCheckedBeforeContentIsRead(t *testing.T) {
	p := pushModule(t)
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signing.LoadSigner(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signing.LoadVerifier(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	policy := signing.NewPolicy(map[string][]signature.Verifier{p.reg.Host(): {verifier}})
	counter := &countingTransport{}
	f := newFetcher(t, p, fetch.WithSignatures(policy), fetch.WithTransport(counter))
	ctx := context.Background()
	link := p.links["rawManifest"]

	_, err = f.Fetch(ctx, link)
	if !errors.Is(err, signing.ErrUnsigned) {
		t.Fatalf("unsigned: got %v, want ErrUnsigned", err)
	}
	if n := counter.blobs.Load(); n != 0 {
		t.Fatalf("unsigned content was downloaded (%d blob GETs)", n)
	}

	repo, _, _ := strings.Cut(strings.TrimPrefix(link, "oci://"), "@")
	artifact := repo + ":1.0.0"
	if _, err := signing.Sign(ctx, artifact, signer, ociartifact.Insecure()); err != nil {
		t.Fatal(err)
	}
	data, err := f.Fetch(ctx, link)
	if err != nil || string(data) != string(p.data["rawManifest"]) {
		t.Fatalf("signed: got %q, %v", data, err)
	}
	before := counter.total.Load()
	if _, err := f.Fetch(ctx, link); err != nil {
		t.Fatal(err)
	}
	if n := counter.total.Load() - before; n != 0 {
		t.Fatalf("a verified, cached layer cost %d requests, want 0", n)
	}

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("kind: ConfigMap\n")) }))
	t.Cleanup(web.Close)
	host := strings.TrimPrefix(web.URL, "http://")
	webPolicy := signing.NewPolicy(map[string][]signature.Verifier{host: {verifier}})
	fw, err := fetch.New(fetch.WithAllowedHosts(host), fetch.WithSignatures(webPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Fetch(ctx, web.URL+"/m.yaml#sha256="+strings.Repeat("a", 64)); !errors.Is(err, signing.ErrUnsigned) || !strings.Contains(err.Error(), "http(s) link cannot carry a signature") {
		t.Fatalf("http link to a host that requires signatures: got %v", err)
	}
	// Another registry (another port of 127.0.0.1) requires nothing.
	q := pushModule(t)
	if _, err := newFetcher(t, q, fetch.WithSignatures(policy)).Fetch(ctx, q.links["rawManifest"]); err != nil {
		t.Fatalf("a host that requires no signature: %v", err)
	}
}
