package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// X-Forwarded-Proto is believed from exactly the peers whose X-Forwarded-For gin believes,
// whatever the list holds: addresses, networks, IPv6, or an entry gin refuses.
func TestForwardedProtoTrustsTheProxiesGinTrusts(t *testing.T) {
	peers := []string{"10.0.0.1:1000", "10.1.2.3:1000", "192.0.2.1:1000", "[2001:db8::5]:1000", "[::1]:1000", "127.0.0.1:1000"}
	for _, proxies := range [][]string{nil, {"10.0.0.1"}, {"10.0.0.0/8", "2001:db8::/32"}, {"::1"}, {"127.0.0.1", "bogus"}, {"0.0.0.0/0"}} {
		r := gin.New()
		if err := r.SetTrustedProxies(proxies); err != nil {
			_ = r.SetTrustedProxies(nil) // as NewRouter does
		}
		r.Use(withForwardedProto(proxies))
		r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, c.ClientIP()+" "+c.GetHeader("X-Forwarded-Proto")) })
		for _, peer := range peers {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = peer
			req.Header.Set("X-Forwarded-For", "198.51.100.7")
			req.Header.Set("X-Forwarded-Proto", "https")
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			client, proto, _ := strings.Cut(rec.Body.String(), " ")
			ginTrusts, protoKept := client == "198.51.100.7", proto == "https"
			if ginTrusts != protoKept {
				t.Errorf("proxies %v, peer %s: gin believes X-Forwarded-For %v, X-Forwarded-Proto kept %v (%q)", proxies, peer, ginTrusts, protoKept, rec.Body)
			}
		}
	}
}
