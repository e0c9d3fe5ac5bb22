package fetch

import "testing"

func TestIsInsecure(t *testing.T) {
	insecure := map[string]bool{"registry.local:5000": true, "127.0.0.1": true}
	tests := []struct {
		hostPort string
		want     bool
	}{
		{"registry.local:5000", true},
		{"REGISTRY.local:5000", true},
		{"registry.local:5001", false},
		{"registry.local", false},
		{"127.0.0.1:40725", true},
		{"127.0.0.1", true},
		{"127.0.0.2:40725", false},
		{"10.0.0.1:5000", false},
	}
	for _, tt := range tests {
		if got := isInsecure(insecure, tt.hostPort); got != tt.want {
			t.Errorf("isInsecure(%q) = %v, want %v", tt.hostPort, got, tt.want)
		}
	}
}

// Registries given to WithInsecureRegistries match links as they write
// hosts: spaces around an entry and its case do not count, and an IPv6
// address alone covers its ports.
func TestWithInsecureRegistries(t *testing.T) {
	c := newConfig([]Option{WithInsecureRegistries(" localhost:5000", "Registry.Local ", "[::1]", "")})
	for host, want := range map[string]bool{
		"localhost:5000":      true,
		"localhost:5001":      false,
		"registry.local:1234": true,
		"[::1]:40725":         true,
		"[::2]:40725":         false,
	} {
		if got := isInsecure(c.insecureHosts, host); got != want {
			t.Errorf("isInsecure(%q) = %v, want %v", host, got, want)
		}
	}
	if len(c.insecureHosts) != 3 {
		t.Errorf("insecure hosts %v, want three", c.insecureHosts)
	}
}
