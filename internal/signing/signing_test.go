package signing_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// keyPair is a signer and its public key, made as `cosign generate-key-pair`
// makes them (an encrypted sigstore private key, empty password) unless
// plain.
type keyPair struct {
	privPEM, pubPEM []byte
	signer          signature.Signer
	verifier        signature.Verifier
}

func newKeyPair(t *testing.T, plain bool) keyPair {
	t.Helper()
	pf := cryptoutils.StaticPasswordFunc([]byte(""))
	if plain {
		pf = nil
	}
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signing.LoadSigner(privPEM, []byte(""))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signing.LoadVerifier(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{privPEM: privPEM, pubPEM: pubPEM, signer: signer, verifier: verifier}
}

func pushModule(t *testing.T, reg *testregistry.Registry, repo, manifest string) ociartifact.Artifact {
	t.Helper()
	art, err := ociartifact.Push(context.Background(), reg.Host()+"/"+repo, ociartifact.Module{
		RawManifest: []byte(manifest),
		DefaultCR:   []byte("apiVersion: x/v1\nkind: X\nmetadata:\n  name: " + repo + "\n"),
	}.Layers())
	if err != nil {
		t.Fatal(err)
	}
	return art
}

func digestOf(t *testing.T, ref string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(strings.TrimPrefix(ref, "oci://"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSignedArtifactVerifiesWithItsKeyOnly(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	a, b := newKeyPair(t, false), newKeyPair(t, true)
	signed := pushModule(t, reg, "modules/signed:1.0.0", "kind: ConfigMap\n")
	unsigned := pushModule(t, reg, "modules/signed:1.1.0", "kind: Secret\n")

	got, err := signing.Sign(ctx, reg.Host()+"/modules/signed:1.0.0", a.signer)
	if err != nil {
		t.Fatal(err)
	}
	if got.Artifact.String() != signed.Ref || !got.Added {
		t.Fatalf("Sign: got %+v, want %s signed anew", got, signed.Ref)
	}

	cases := []struct {
		name    string
		verify  func() error
		wantErr error
	}{
		{"artifact, its key", func() error { return signing.Verify(ctx, digestOf(t, signed.Ref), []signature.Verifier{a.verifier}) }, nil},
		{"artifact, its key among others", func() error {
			return signing.Verify(ctx, digestOf(t, signed.Ref), []signature.Verifier{b.verifier, a.verifier})
		}, nil},
		{"artifact, another key", func() error { return signing.Verify(ctx, digestOf(t, signed.Ref), []signature.Verifier{b.verifier}) }, signing.ErrUntrusted},
		{"artifact unsigned", func() error { return signing.Verify(ctx, digestOf(t, unsigned.Ref), []signature.Verifier{a.verifier}) }, signing.ErrUnsigned},
		{"layer of the signed artifact", func() error {
			return signing.VerifyLayer(ctx, digestOf(t, signed.Links["rawManifest"]), []signature.Verifier{a.verifier}, nil)
		}, nil},
		{"layer, another key", func() error {
			return signing.VerifyLayer(ctx, digestOf(t, signed.Links["rawManifest"]), []signature.Verifier{b.verifier}, nil)
		}, signing.ErrUntrusted},
		{"layer only in the unsigned artifact", func() error {
			return signing.VerifyLayer(ctx, digestOf(t, unsigned.Links["rawManifest"]), []signature.Verifier{a.verifier}, nil)
		}, signing.ErrUnsigned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.verify()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			var sigErr *signing.Error
			if err != nil && !errors.As(err, &sigErr) {
				t.Fatalf("a refusal is a *signing.Error, got %T", err)
			}
			if err != nil && (strings.Contains(err.Error(), string(a.pubPEM)) || strings.Contains(err.Error(), "BEGIN")) {
				t.Fatalf("the error quotes key material: %v", err)
			}
		})
	}
}

// The signature is laid out as cosign lays it out, and its bytes verify
// with the standard library alone: ECDSA P-256 over SHA-256 of the payload.
func TestSignatureHasCosignsLayout(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	key := newKeyPair(t, false)
	art := pushModule(t, reg, "modules/layout:1.0.0", "kind: ConfigMap\n")
	artifact := digestOf(t, art.Ref)

	if _, err := signing.Sign(ctx, art.Ref, key.signer); err != nil {
		t.Fatal(err)
	}
	tag := artifact.Context().Tag("sha256-" + strings.TrimPrefix(artifact.DigestStr(), "sha256:") + ".sig")
	img, err := remote.Image(tag)
	if err != nil {
		t.Fatalf("no signature at %s: %v", tag, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != "application/vnd.dev.cosign.simplesigning.v1+json" {
		t.Fatalf("want one simple-signing layer, got %+v", manifest.Layers)
	}
	layer, err := img.LayerByDigest(manifest.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"critical":{"identity":{"docker-reference":"%s"},"image":{"docker-manifest-digest":"%s"},"type":"cosign container image signature"},"optional":null}`,
		artifact.Context().Name(), artifact.DigestStr())
	if string(payload) != want {
		t.Fatalf("payload\n got %s\nwant %s", payload, want)
	}
	sig, err := base64.StdEncoding.DecodeString(manifest.Layers[0].Annotations["dev.cosignproject.cosign/signature"])
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(key.pubPEM)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), sum[:], sig) {
		t.Fatal("the signature does not verify as ECDSA P-256 over SHA-256 of the payload")
	}
}

func TestSigningAgainKeepsOtherSignatures(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	a, b := newKeyPair(t, false), newKeyPair(t, false)
	art := pushModule(t, reg, "modules/twice:1.0.0", "kind: ConfigMap\n")

	for i, step := range []struct {
		key       keyPair
		wantAdded bool
	}{{a, true}, {a, false}, {b, true}} {
		got, err := signing.Sign(ctx, "oci://"+art.Ref, step.key.signer)
		if err != nil {
			t.Fatal(err)
		}
		if got.Added != step.wantAdded {
			t.Fatalf("step %d: Added %v, want %v", i, got.Added, step.wantAdded)
		}
	}
	for _, k := range []keyPair{a, b} {
		if err := signing.Verify(ctx, digestOf(t, art.Ref), []signature.Verifier{k.verifier}); err != nil {
			t.Fatalf("a signature was lost: %v", err)
		}
	}
	img, err := remote.Image(digestOf(t, art.Ref).Context().Tag(signing.SignatureTag(digestOf(t, art.Ref).DigestStr())))
	if err != nil {
		t.Fatal(err)
	}
	if layers, _ := img.Layers(); len(layers) != 2 {
		t.Fatalf("want 2 signatures (a once, b once), got %d", len(layers))
	}
}

// A signature of one artifact copied to another's signature tag does not
// make the other one signed: the payload names the digest.
func TestCopiedSignatureDoesNotVerify(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	key := newKeyPair(t, false)
	good := pushModule(t, reg, "modules/copy:1.0.0", "kind: ConfigMap\n")
	evil := pushModule(t, reg, "modules/copy:1.0.1", "kind: ClusterRoleBinding\n")
	signed, err := signing.Sign(ctx, good.Ref, key.signer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(signed.Signature)
	if err != nil {
		t.Fatal(err)
	}
	evilDigest := digestOf(t, evil.Ref)
	if err := remote.Write(evilDigest.Context().Tag(signing.SignatureTag(evilDigest.DigestStr())), img); err != nil {
		t.Fatal(err)
	}
	err = signing.Verify(ctx, evilDigest, []signature.Verifier{key.verifier})
	if !errors.Is(err, signing.ErrUntrusted) {
		t.Fatalf("got %v, want ErrUntrusted", err)
	}
	err = signing.VerifyLayer(ctx, digestOf(t, evil.Links["rawManifest"]), []signature.Verifier{key.verifier}, nil)
	if !errors.Is(err, signing.ErrUntrusted) {
		t.Fatalf("layer: got %v, want ErrUntrusted", err)
	}
}

// countingTransport counts the requests that reach the registry.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(req)
}

func TestPolicyVerifiesALayerOnce(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	key, other := newKeyPair(t, false), newKeyPair(t, false)
	art := pushModule(t, reg, "modules/once:1.0.0", "kind: ConfigMap\n")
	layer := digestOf(t, art.Links["rawManifest"])
	policy := signing.NewPolicy(map[string][]signature.Verifier{reg.Host(): {key.verifier}, "other.example": {other.verifier}})
	counter := &countingTransport{}

	if !policy.Requires(reg.Host()) || policy.Requires("public.example") {
		t.Fatal("Requires: want the configured hosts only")
	}
	if err := policy.VerifyLayer(ctx, reg.Host(), layer, ociartifact.WithTransport(counter)); !errors.Is(err, signing.ErrUnsigned) {
		t.Fatalf("before signing: got %v, want ErrUnsigned", err)
	}
	if _, err := signing.Sign(ctx, art.Ref, key.signer); err != nil {
		t.Fatal(err)
	}
	// A failure is not remembered: the signature pushed since is found.
	if err := policy.VerifyLayer(ctx, reg.Host(), layer, ociartifact.WithTransport(counter)); err != nil {
		t.Fatalf("after signing: %v", err)
	}
	before := counter.n.Load()
	for range 5 {
		if err := policy.VerifyLayer(ctx, reg.Host(), layer, ociartifact.WithTransport(counter)); err != nil {
			t.Fatal(err)
		}
	}
	if n := counter.n.Load() - before; n != 0 {
		t.Fatalf("a verified layer cost %d more requests, want 0", n)
	}
	if err := policy.VerifyLayer(ctx, "public.example", layer); err != nil {
		t.Fatalf("a host that requires no signature: %v", err)
	}
}

func TestKeys(t *testing.T) {
	cosignKey := newKeyPair(t, false)
	plainKey := newKeyPair(t, true)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // a key too weak on purpose
	if err != nil {
		t.Fatal(err)
	}
	weakPub, err := cryptoutils.MarshalPublicKeyToPEM(weak.Public())
	if err != nil {
		t.Fatal(err)
	}

	signers := []struct {
		name     string
		pem      []byte
		password string
		wantErr  bool
	}{
		{"cosign key, empty password", cosignKey.privPEM, "", false},
		{"cosign key, wrong password", cosignKey.privPEM, "nope", true},
		{"PKCS#8", plainKey.privPEM, "", false},
		{"SEC 1 EC PRIVATE KEY", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}), "", false},
		{"not PEM", []byte("secret-bytes-not-a-key"), "", true},
		{"a public key", cosignKey.pubPEM, "", true},
	}
	for _, tc := range signers {
		t.Run("signer/"+tc.name, func(t *testing.T) {
			_, err := signing.LoadSigner(tc.pem, []byte(tc.password))
			if (err != nil) != tc.wantErr {
				t.Fatalf("got %v, want error %v", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret-bytes") {
				t.Fatalf("the error quotes the key: %v", err)
			}
		})
	}
	verifiers := []struct {
		name    string
		pem     []byte
		wantErr bool
	}{
		{"cosign.pub", cosignKey.pubPEM, false},
		{"RSA 1024", weakPub, true},
		{"a private key", plainKey.privPEM, true},
		{"not PEM", []byte("nothing"), true},
	}
	for _, tc := range verifiers {
		t.Run("verifier/"+tc.name, func(t *testing.T) {
			if _, err := signing.LoadVerifier(tc.pem); (err != nil) != tc.wantErr {
				t.Fatalf("got %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestParseRequirement(t *testing.T) {
	cases := []struct {
		in, host, file string
		wantErr        bool
	}{
		{in: "registry.example.com=/keys/cosign.pub", host: "registry.example.com", file: "/keys/cosign.pub"},
		{in: " localhost:5000 = k.pub ", host: "localhost:5000", file: "k.pub"},
		{in: "registry.example.com", wantErr: true},
		{in: "=k.pub", wantErr: true},
		{in: "registry.example.com=", wantErr: true},
		{in: "registry.example.com/team=k.pub", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			host, file, err := signing.ParseRequirement(tc.in)
			if (err != nil) != tc.wantErr || host != tc.host || file != tc.file {
				t.Fatalf("got %q %q %v", host, file, err)
			}
		})
	}
}
