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
