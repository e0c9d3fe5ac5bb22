package content_test

import (
	"crypto/elliptic"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
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

// TestInsecureRegistriesFlag: --insecure-registries entries are trimmed
// (a comma and a space is how lists are written) and lower-cased; an empty
// or malformed entry stops the operator with the flag's name and the entry,
// rather than leaving a registry that never matches a link.
func TestInsecureRegistriesFlag(t *testing.T) {
	parse := func(args ...string) (content.Options, error) {
		opts := content.DefaultOptions()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		opts.BindFlags(fs)
		return opts, fs.Parse(args)
	}

	opts, err := parse("--insecure-registries", "registry.local:5000, localhost:5000 ,[::1]:5000", "--insecure-registries=KIND-Registry")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"registry.local:5000", "localhost:5000", "[::1]:5000", "kind-registry"}
	if !slices.Equal(opts.InsecureRegistries, want) {
		t.Fatalf("got %q, want %q", opts.InsecureRegistries, want)
	}
	if opts, err := parse("--insecure-registries", " "); err != nil || len(opts.InsecureRegistries) != 0 {
		t.Fatalf("a blank value: got %q, %v; want no registries", opts.InsecureRegistries, err)
	}

	for value, want := range map[string]string{
		"registry.local:5000,,localhost:5000": "entry 2: empty registry host",
		"registry.local:5000, ":               "entry 2: empty registry host",
		"http://registry.local:5000":          `entry 1: registry host "http://registry.local:5000": want host or host:port`,
		"registry.local:5000/modules":         `registry host "registry.local:5000/modules": want host or host:port`,
		"user@registry.local":                 "want host or host:port, without scheme, path or user info",
		"registry.local:0":                    "the port must be 1 to 65535",
		"registry.local:":                     "empty port",
		"registry local":                      "want host or host:port",
		"::1":                                 "neither a DNS name",
	} {
		_, err := parse("--insecure-registries", value)
		if err == nil || !strings.Contains(err.Error(), "insecure-registries") || !strings.Contains(err.Error(), want) {
			t.Errorf("--insecure-registries %q: got %v, want an error naming the flag with %q", value, err, want)
		}
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
