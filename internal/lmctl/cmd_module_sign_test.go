package lmctl

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// TestModuleSignAndVerify runs `lmctl module sign` and `lmctl module verify`
// as a user does, against a real registry, with a plain PEM key and a
// cosign key (empty password), and a verify with another key that fails.
func TestModuleSignAndVerify(t *testing.T) {
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	ref := reg.Host() + "/modules/sample:1.0.0"
	if _, err := ociartifact.Push(context.Background(), ref, ociartifact.Module{RawManifest: []byte("kind: ConfigMap\n")}.Layers()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeKeys := func(name string, pf cryptoutils.PassFunc) (priv, pub string) {
		privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
		if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pub, pubPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return priv, pub
	}
	plainKey, plainPub := writeKeys("plain", nil)
	t.Setenv("COSIGN_PASSWORD", "")
	cosignKey, cosignPub := writeKeys("cosign", cryptoutils.StaticPasswordFunc([]byte("")))
	_, otherPub := writeKeys("other", nil)

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := NewCommand()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	steps := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: []string{"module", "verify", ref, "--key", plainPub}, wantErr: "is not signed"},
		{args: []string{"module", "sign", ref, "--key", plainKey}, want: "Signed " + reg.Host() + "/modules/sample@sha256:"},
		{args: []string{"module", "sign", ref, "--key", plainKey}, want: "Already signed with this key"},
		{args: []string{"module", "sign", "oci://" + ref, "--key", cosignKey}, want: "Signed "},
		{args: []string{"module", "verify", ref, "--key", plainPub}, want: "Verified "},
		{args: []string{"module", "verify", ref, "--key", cosignPub}, want: "Verified "},
		{args: []string{"module", "verify", ref, "--key", otherPub}, wantErr: "is not signed with a trusted key"},
		{args: []string{"module", "sign", ref}, wantErr: "--key is required"},
		{args: []string{"module", "sign", ref, "--key", plainPub}, wantErr: "private key"},
	}
	for _, s := range steps {
		out, err := run(s.args...)
		if s.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Fatalf("%v: got %v, want an error with %q", s.args, err, s.wantErr)
			}
			continue
		}
		if err != nil || !strings.Contains(out, s.want) {
			t.Fatalf("%v: got %q, %v; want %q", s.args, out, err, s.want)
		}
	}
}
