package fetch

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// hostPolicy says which hosts content may come from. A ModuleTemplate is
// written by a module team, not by the SRE who runs the operator, so its
// links must not make the operator reach what only the operator can reach:
// the cloud metadata service, the control plane's own network, loopback.
type hostPolicy struct {
	// allowed are the SRE's content hosts and registries
	// (--content-allowed-hosts). Empty allows every host whose addresses
	// are public.
	allowed []string
	// insecure are the registries reached over plain HTTP
	// (--insecure-registries): host:port as in links, or a host alone for
	// any of its ports. The SRE named them, so they count as allowed.
	insecure map[string]bool
}

// isInsecure reports whether a registry (host:port as in links) is reached
// over plain HTTP: listed with its port, or listed as a host alone (local
// registries that tests and lmctl dev start on random ports).
func isInsecure(insecure map[string]bool, hostPort string) bool {
	hostPort = strings.ToLower(hostPort)
	if insecure[hostPort] {
		return true
	}
	name := hostName(hostPort)
	return insecure[name]
}

// listed reports whether the SRE named host (host or host:port) in the
// allow-list or among the insecure registries. A listed host may resolve to
// any address, private ones included.
func (p hostPolicy) listed(host string) bool {
	host = strings.ToLower(host)
	if isInsecure(p.insecure, host) {
		return true
	}
	name := hostName(host)
	for _, pattern := range p.allowed {
		if hostMatches(strings.ToLower(pattern), host, name) {
			return true
		}
	}
	return false
}

// permits refuses a host outside a non-empty allow-list. Whether its
// addresses are public is checked when it is dialled (checkAddress).
func (p hostPolicy) permits(host string) error {
	if len(p.allowed) == 0 || p.listed(host) {
		return nil
	}
	return fmt.Errorf("host %s is not an allowed content host; the operator's --content-allowed-hosts lists %s", host, strings.Join(p.allowed, ","))
}

// hostMatches matches one allow-list entry: host:port matches exactly,
// host matches it on any port, and *.example.com matches the subdomains of
// example.com on any port. An IPv6 address is listed as a link writes it,
// in brackets ([::1]:5000, [2001:db8::1]) or not (2001:db8::1); a link
// writes it in canonical form (parseLink), so list it so. The admission
// policy (config/admission) matches the same way.
func hostMatches(pattern, hostPort, name string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(name, "."+suffix)
	}
	if _, _, err := net.SplitHostPort(pattern); err == nil {
		return pattern == hostPort
	}
	return withoutBrackets(pattern) == name
}

// hostName returns a link host's name without its port (and without the
// brackets of an IPv6 literal).
func hostName(host string) string {
	if name, _, err := net.SplitHostPort(host); err == nil {
		return name
	}
	return withoutBrackets(host)
}

func withoutBrackets(host string) string {
	if inner, ok := strings.CutPrefix(host, "["); ok {
		if inner, ok := strings.CutSuffix(inner, "]"); ok {
			return inner
		}
	}
	return host
}

// nonPublic are the ranges a link may reach only through a listed host:
// cloud metadata (link-local) and the networks of the control plane itself.
var nonPublic = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local (cloud metadata)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "a broadcast"},
	{netip.MustParsePrefix("::/128"), "an unspecified"},
	{netip.MustParsePrefix("::1/128"), "a loopback"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local"},
	{netip.MustParsePrefix("fc00::/7"), "a private"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast"},
	// IPv6 addresses that carry an IPv4 address, which a translator or
	// relay reaches for them: NAT64 (RFC 6052, and the local-use prefix
	// of RFC 8215), 6to4 (RFC 3056), Teredo (RFC 4380) and the deprecated
	// IPv4-compatible addresses (::a.b.c.d). They are refused whole rather
	// than judged by the IPv4 address inside: that is simpler and
	// stricter, as where the IPv4 address sits in a local-use NAT64
	// address depends on the prefix length the network chose (RFC 6052
	// allows six), Teredo obfuscates it, and a translator is part of the
	// network the operator runs in. (IPv4-mapped addresses, ::ffff:a.b.c.d,
	// are IPv4 addresses to the socket API and are judged as such: see
	// Unmap in checkAddress.) In an IPv6-only cluster that reaches IPv4 content
	// through DNS64, list the content hosts in --content-allowed-hosts:
	// listed hosts are not checked here.
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 (IPv4-embedding)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 (IPv4-embedding)"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 (IPv4-embedding)"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo (IPv4-embedding)"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible (deprecated, IPv4-embedding)"},
}

// checkAddress refuses a non-public address. It runs on the address being
// dialled, after name resolution, so a name that resolves to a public
// address once and to 169.254.169.254 the next time (DNS rebinding) is
// still refused.
func checkAddress(address string) error {
	ipText, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(ipText)
	if err != nil {
		return fmt.Errorf("dialling %s: not an IP address", address)
	}
	ip = ip.Unmap()
	for _, r := range nonPublic {
		if r.prefix.Contains(ip) {
			return fmt.Errorf("%s is %s address; a content host there must be listed in --content-allowed-hosts (or --insecure-registries)", ip, r.what)
		}
	}
	return nil
}

// refuseNonPublic is a net.Dialer Control function that applies
// checkAddress.
func refuseNonPublic(_, address string, _ syscall.RawConn) error {
	return checkAddress(address)
}

// CheckAllowed refuses a registry host (host or host:port, as links write
// it) that a fetcher with these allowed hosts and insecure registries
// would refuse: for a registry the SRE names elsewhere (--oci-registry-host),
// checked when the operator starts.
func CheckAllowed(allowed, insecure []string, host string) error {
	cfg := newConfig([]Option{WithAllowedHosts(allowed...), WithInsecureRegistries(insecure...)})
	return hostPolicy{allowed: cfg.allowedHosts, insecure: cfg.insecureHosts}.permits(host)
}
