package fetch

import "testing"

// Allow-list entries match as the admission policy matches them
// (config/admission): host:port exactly, host on any port, *.domain its
// subdomains; IPv6 addresses with or without brackets.
func TestHostMatches(t *testing.T) {
	tests := []struct {
		pattern, host string
		want          bool
	}{
		{"allowed.example.com", "allowed.example.com", true},
		{"allowed.example.com", "allowed.example.com:8443", true},
		{"allowed.example.com:8443", "allowed.example.com:8443", true},
		{"allowed.example.com:8443", "allowed.example.com", false},
		{"allowed.example.com:8443", "allowed.example.com:443", false},
		{"*.example.org", "charts.example.org", true},
		{"*.example.org", "a.b.example.org:5000", true},
		{"*.example.org", "example.org", false},
		{"*.example.org", "evilexample.org", false},
		{"[::1]:5000", "[::1]:5000", true},
		{"[::1]:5000", "[::1]:5001", false},
		{"[2001:db8::1]", "[2001:db8::1]:443", true},
		{"2001:db8::1", "[2001:db8::1]", true},
		{"[2001:db8::1", "[2001:db8::1]", false},
	}
	for _, tt := range tests {
		if got := hostMatches(tt.pattern, tt.host, hostName(tt.host)); got != tt.want {
			t.Errorf("hostMatches(%q, %q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
		}
	}
}
