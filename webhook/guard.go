package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Resolver looks a host name up (net.DefaultResolver; tests pass a stub).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard is where webhooks may be sent. A webhook URL is given by an integrator, and the
// service sends to it from inside its own network: outside the dev bundle it must be https
// and must not resolve to the service's own neighbourhood (loopback, private, link-local,
// CGNAT, cloud metadata). The addresses are checked after DNS resolution, on the address
// actually dialled, so a name that resolves elsewhere later changes nothing. It lives here
// rather than in the dispatcher because the service vets a URL when a webhook is made and
// the dispatcher vets the address when it sends, and the service must not link the
// dispatcher for that.
type Guard struct {
	// AllowHTTP accepts http URLs (the dev bundle).
	AllowHTTP bool
	// AllowLoopback accepts loopback addresses (the dev bundle, for receivers on the same
	// machine).
	AllowLoopback bool
	// Resolver resolves host names; net.DefaultResolver when nil.
	Resolver Resolver
}

// ErrRefusedAddress means a webhook URL resolves to an address webhooks are not sent to.
var ErrRefusedAddress = errors.New("webhook: the URL resolves to an address webhooks are not sent to (loopback, private, link-local, CGNAT or metadata)")

// refusedPrefixes are the networks beside the ones netip classifies itself.
var refusedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this" network
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64 of any IPv4 address
}

// Refused reports whether webhooks may not be sent to ip.
func (g Guard) Refused(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return !g.AllowLoopback
	}
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() {
		return true
	}
	for _, p := range refusedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// CheckURL says what is wrong with a webhook URL, or nil: an absolute https URL (http too
// where allowed) with a host, without credentials or a fragment, and, when its host is an
// address, one webhooks may be sent to.
func (g Guard) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" || !u.IsAbs() {
		return errors.New("must be an absolute URL such as https://example.com/webhooks")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !g.AllowHTTP {
			return errors.New("must use https")
		}
	default:
		return errors.New("must use https")
	}
	if u.User != nil || u.Fragment != "" {
		return errors.New("must not carry credentials or a fragment")
	}
	if len(raw) > 2000 {
		return errors.New("must be at most 2000 characters")
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && g.Refused(ip) {
		return ErrRefusedAddress
	}
	return nil
}

// DialContext resolves addr's host and dials the first of its addresses webhooks may be
// sent to, refusing when there is none.
func (g Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		r := g.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if ips, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
	}
	var d net.Dialer
	var lastErr error = ErrRefusedAddress
	for _, ip := range ips {
		if g.Refused(ip) {
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("dial %s: %w", host, lastErr)
}
