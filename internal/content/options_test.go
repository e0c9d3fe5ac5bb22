package content_test

import (
	"crypto/elliptic"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/runtime-fleet/lifecycle-manager/internal/content"
)

// TestRequireSignaturesFlag: --require-signatures HOST=PUBKEYFILE, repeated
// or comma-separated, gathers keys per host; the pipeline loads them at
// start, and a key file that is missing or holds no public key stops it
// with the file's name and without its content.
func TestRequireSignaturesFlag(t *testing.T) {
	dir := t.TempDir()
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "cosign.key")
	if err := os.WriteFile(pub, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	opts := content.DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	if err := fs.Parse([]string{"--require-signatures", "registry.example.com=" + pub + ",localhost:5000=" + pub, "--require-signatures", "registry.example.com=" + pub}); err != nil {
		t.Fatal(err)
	}
	if got := opts.RequireSignatures; len(got["registry.example.com"]) != 2 || len(got["localhost:5000"]) != 1 {
		t.Fatalf("got %v", got)
	}
	if _, err := content.New(opts, nil); err != nil {
		t.Fatalf("good keys: %v", err)
	}
	if err := fs.Parse([]string{"--require-signatures", "registry.example.com"}); err == nil {
		t.Fatal("HOST without =PUBKEYFILE was accepted")
	}

	for name, file := range map[string]string{"missing": filepath.Join(dir, "nope.pub"), "private key": priv} {
		t.Run(name, func(t *testing.T) {
			bad := content.DefaultOptions()
			bad.RequireSignatures = map[string][]string{"registry.example.com": {file}}
			_, err := content.New(bad, nil)
			if err == nil || !strings.Contains(err.Error(), "--require-signatures") || !strings.Contains(err.Error(), file) {
				t.Fatalf("got %v, want an error naming the flag and %s", err, file)
			}
			if strings.Contains(err.Error(), "BEGIN") {
				t.Fatalf("the error quotes the key: %v", err)
			}
		})
	}
}

// A render memory budget too small for a render process to start would
// refuse every chart; the pipeline does not start with one.
func TestRenderMemoryBudgetIsValidated(t *testing.T) {
	opts := content.DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	if err := fs.Parse([]string{"--helm-max-render-memory-bytes", "33554432"}); err != nil {
		t.Fatal(err)
	}
	_, err := content.New(opts, nil)
	if err == nil || !strings.Contains(err.Error(), "--helm-max-render-memory-bytes is 33554432, less than the 67108864 bytes (64 MiB)") {
		t.Fatalf("got %v, want an error naming the flag and the least budget", err)
	}
	if err := fs.Parse([]string{"--helm-max-render-memory-bytes", "67108864"}); err != nil {
		t.Fatal(err)
	}
	if _, err := content.New(opts, nil); err != nil {
		t.Fatalf("64 MiB: %v", err)
	}
}
