package remote

import (
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
)

func TestRESTConfigUsesOnlyValidatedFields(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:9")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:9")
	cfg := restConfig(&kubeconfig.Kubeconfig{Server: "https://127.0.0.1:6443", Token: "t", CAData: []byte("ca")})
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.Insecure ||
		cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.Username != "" || cfg.Impersonate.UserName != "" {
		t.Fatalf("config reaches beyond inline material: %+v", cfg)
	}
	if cfg.Proxy == nil {
		t.Fatal("a nil Proxy means the environment's proxy")
	}
	if p, _ := cfg.Proxy(nil); p != nil {
		t.Fatalf("proxy %v, want none whatever the environment says", p)
	}
}
