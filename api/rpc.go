package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/rpcproxy"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/ratelimit"
)

// rpcHandlers serve POST /rpc/{chain}: an app's read-only JSON-RPC calls, forwarded to the
// chain's node by rpcproxy, which answers everything past the HTTP checks as JSON-RPC.
type rpcHandlers struct {
	nodes rpcproxy.Nodes
	proxy rpcproxy.Proxy
	log   *slog.Logger
	// budget is each app's calls per second, shared by its credentials: the calls reach
	// the app's node provider, whose quota the apps share, so one app's job cannot spend
	// it for the others by spreading its calls over many keys.
	budget  *ratelimit.Limiter
	metrics *metrics.Metrics
}

func (h *rpcHandlers) forward(c *gin.Context) {
	name := c.Param("chain")
	node, ok := h.nodes[name]
	if !ok {
		fail(c, apitypes.CodeNotFound, h.noNode(name))
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	p := principalOf(c)
	if ok, _, wait := h.budget.TakeN("rpc "+p.OrgID+" "+p.App, rpcproxy.Calls(body)); !ok {
		h.metrics.RateLimited(metrics.LimiterRPC)
		seconds := retryAfter(wait)
		c.Header("Retry-After", seconds)
		fail(c, apitypes.CodeRateLimited, fmt.Sprintf("The %s app's JSON-RPC budget (%g calls a second, a burst of %d, every call of a batch "+
			"counted, shared by all its credentials) is spent; retry after %s s.", p.App, float64(h.budget.PerSecond), h.budget.Burst, seconds))
		return
	}
	answer := h.proxy.Forward(c.Request.Context(), name, node, body)
	if answer.NodeErr != nil {
		h.log.Warn("chain node did not answer", "correlationId", correlationID(c), "chain", name,
			"error", chain.RedactURL(answer.NodeErr))
	}
	c.Data(http.StatusOK, "application/json", answer.Body)
}

// noNode says why a chain has no JSON-RPC endpoint, naming those that have one.
func (h *rpcHandlers) noNode(name string) string {
	served := slices.Sorted(func(yield func(string) bool) {
		for n := range h.nodes {
			if !yield(n) {
				return
			}
		}
	})
	list := "none"
	if len(served) > 0 {
		list = strings.Join(served, ", ")
	}
	if _, known := orders.ChainAssets[name]; known {
		return "The " + name + " chain has no JSON-RPC node here (it is not an EVM chain with a configured node); chains served: " + list + "."
	}
	return "There is no chain '" + name + "'; chains served: " + list + "."
}

// requireAppCredential lets through an app's key or OAuth token holding action on its own
// app. The JSON-RPC endpoint serves programs, each call filed in its app's request log and
// counted against its credential: a person's session names no one app, and is refused.
func requireAppCredential(action string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principalOf(c)
		if p.Kind == auth.KindUser {
			fail(c, apitypes.CodePermissionDenied, "POST /rpc/{chain} takes an app's credential (an sk_ key, a tk_ key holding "+
				"'"+action+"', or an OAuth access token with <app>:"+action+"), not a person's session.")
			return
		}
		require(p.App, action)(c)
	}
}
