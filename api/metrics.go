package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/internal/metrics"
)

// withMetrics counts every answered request by the route that matched it (its template,
// never the path, which carries ids), its method and status, with its duration. A
// WebSocket upgrade counts as 101: the handshake is all the handler answers.
func withMetrics(m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		if status == http.StatusOK && c.IsWebsocket() && c.Writer.Size() == 0 {
			status = http.StatusSwitchingProtocols
		}
		m.HTTPRequest(c.FullPath(), c.Request.Method, status, time.Since(start))
	}
}
