package api

import (
	"net"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// withForwardedProto believes X-Forwarded-Proto as gin believes X-Forwarded-For: from the
// trusted proxies only. From anyone else it is dropped, so that the handlers after it (the
// session cookie's Secure flag, the console's ws or wss) may take the header as the truth
// of how the browser reached the service.
func withForwardedProto(trustedProxies []string) gin.HandlerFunc {
	trusted := trustedNets(trustedProxies)
	return func(c *gin.Context) {
		if c.Request.Header.Get("X-Forwarded-Proto") != "" && !fromTrustedProxy(c.Request, trusted) {
			c.Request.Header.Del("X-Forwarded-Proto")
		}
		c.Next()
	}
}

// trustedNets reads the proxies as gin's SetTrustedProxies does (an address is a network
// of one); a list gin refuses trusts no one, as the router then does.
func trustedNets(proxies []string) []*net.IPNet {
	var nets []*net.IPNet
	for _, p := range proxies {
		if !strings.Contains(p, "/") {
			ip := net.ParseIP(p)
			if ip == nil {
				return nil
			}
			bits := "/128"
			if ip.To4() != nil {
				bits = "/32"
			}
			p = ip.String() + bits
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return nil
		}
		nets = append(nets, n)
	}
	return nets
}

// fromTrustedProxy: the peer is one of the trusted networks, or a unix socket, which gin
// trusts too.
func fromTrustedProxy(r *http.Request, trusted []*net.IPNet) bool {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && strings.HasPrefix(local.Network(), "unix") {
		return true
	}
	host, _, err := net.SplitHostPort(strings.TrimSpace(r.RemoteAddr))
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return false
	}
	for _, n := range trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
