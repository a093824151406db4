package webhook

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// stubResolver answers every lookup with its addresses and remembers it was asked.
type stubResolver struct{ addrs []netip.Addr }

func (r stubResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return r.addrs, nil
}

// Outside the dev bundle no webhook goes to the service's own neighbourhood, whatever a
// name resolves to, and no http URL is taken.
func TestGuardRefusesTheServicesOwnNeighbourhood(t *testing.T) {
	strict := Guard{}
	for _, addr := range []string{"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"0.0.0.0", "::1", "fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1", "224.0.0.1"} {
		g := Guard{Resolver: stubResolver{addrs: []netip.Addr{netip.MustParseAddr(addr)}}}
		if _, err := g.DialContext(context.Background(), "tcp", "hooks.example.com:443"); !errors.Is(err, ErrRefusedAddress) {
			t.Errorf("a name resolving to %s: %v", addr, err)
		}
		if err := strict.CheckURL("https://[" + addr + "]/hooks"); err == nil && !strings.Contains(addr, ".") {
			t.Errorf("https://[%s]/ accepted", addr)
		}
		if err := strict.CheckURL("https://" + addr + "/hooks"); err == nil && strings.Contains(addr, ".") && !strings.Contains(addr, ":") {
			t.Errorf("https://%s/ accepted", addr)
		}
	}
	for _, bad := range []string{"http://hooks.example.com/", "ftp://hooks.example.com/", "hooks.example.com/x", "https://user:pw@hooks.example.com/",
		"https://hooks.example.com/#frag", "https:///path"} {
		if err := strict.CheckURL(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if err := strict.CheckURL("https://hooks.example.com/treasury?x=1"); err != nil {
		t.Errorf("a public https URL refused: %v", err)
	}
	if !strict.Refused(netip.MustParseAddr("127.0.0.1")) || strict.Refused(netip.MustParseAddr("93.184.216.34")) {
		t.Error("Refused")
	}
	dev := Guard{AllowHTTP: true, AllowLoopback: true}
	if err := dev.CheckURL("http://127.0.0.1:9999/hooks"); err != nil || !dev.Refused(netip.MustParseAddr("10.0.0.1")) {
		t.Errorf("the dev bundle's guard: %v", err)
	}
}
