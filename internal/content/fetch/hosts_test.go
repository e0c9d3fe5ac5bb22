package fetch

import (
	"strings"
	"testing"
)

// Addresses a link may reach only through a listed host, in every
// spelling that reaches them, and public ones it may reach.
func TestCheckAddress(t *testing.T) {
	tests := []struct {
		address string
		want    string // a part of the refusal; empty for allowed
	}{
		{address: "93.184.215.14:443"},
		{address: "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443"},
		{address: "127.0.0.1:80", want: "loopback"},
		{address: "169.254.169.254:80", want: "link-local (cloud metadata)"},
		{address: "10.1.2.3:5000", want: "private"},
		{address: "[::1]:80", want: "loopback"},
		{address: "[fd00::1]:80", want: "private"},
		// IPv4-mapped IPv6 is IPv4 to the socket: judged by the IPv4 inside.
		{address: "[::ffff:127.0.0.1]:80", want: "127.0.0.1 is a loopback"},
		{address: "[::ffff:169.254.169.254]:80", want: "169.254.169.254 is a link-local"},
		{address: "[::ffff:93.184.215.14]:443"},
		// IPv4-embedding ranges are refused whole, whatever IPv4 they carry.
		{address: "[64:ff9b::7f00:1]:80", want: "a NAT64 (IPv4-embedding)"},
		{address: "[64:ff9b::a9fe:a9fe]:80", want: "a NAT64 (IPv4-embedding)"},
		{address: "[64:ff9b::5db8:d70e]:443", want: "a NAT64 (IPv4-embedding)"},
		{address: "[64:ff9b:1::a9fe:a9fe]:80", want: "a local-use NAT64 (IPv4-embedding)"},
		{address: "[64:ff9b:1:7f00:1::]:80", want: "a local-use NAT64 (IPv4-embedding)"},
		{address: "[2002:7f00:1::1]:80", want: "a 6to4 (IPv4-embedding)"},
		{address: "[2002:a9fe:a9fe::]:80", want: "a 6to4 (IPv4-embedding)"},
		{address: "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:80", want: "a Teredo (IPv4-embedding)"},
		{address: "[::7f00:1]:80", want: "IPv4-compatible"},
		// Neighbours of the embedding ranges stay public.
		{address: "[64:ff9b:0:1::1]:443"},
		{address: "[2003::1]:443"},
		{address: "[2001:1::1]:443"},
	}
	for _, tt := range tests {
		err := checkAddress(tt.address)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkAddress(%s) = %v, want it allowed", tt.address, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("checkAddress(%s) = %v, want a refusal with %q", tt.address, err, tt.want)
		}
	}
}

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
