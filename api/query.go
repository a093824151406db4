package api

import (
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/internal/orders"
)

// pageQuery are the parameters of every list.
var pageQuery = []string{"limit", "cursor"}

// routeQuery lists the query parameters of each route that takes any (SPEC 2: an unknown
// query parameter is refused, named in the problem). A route not named takes none; every
// route of the developer surface also takes app, which a person must name. The table is
// held against docs/openapi.json's parameters by TestQueryParametersAreTheDocumentsOwn.
var routeQuery = map[string][]string{
	"GET /api/v1/ws":                         {"id", "token"},
	"GET /api/v1/approvals":                  append([]string{"domain", "status"}, pageQuery...),
	"GET /api/v1/signing-requests":           append([]string{"status"}, pageQuery...),
	"GET /api/v1/approver-keys":              pageQuery,
	"GET /api/v1/events":                     {"orderId", "cursor", "after", "limit"},
	"GET /api/v1/audit-logs":                 pageQuery,
	"GET /api/v1/audit-logs/export":          {"since", "until", "cursor", "limit"},
	"GET /api/v1/policies/:app/versions":     pageQuery,
	"GET /api/v1/policies/:app/drafts":       append([]string{"status"}, pageQuery...),
	"POST /api/v1/policies/:app/evaluate":    {"version", "draft"},
	"GET /api/v1/treasury/wallets":           pageQuery,
	"GET /api/v1/wallets":                    pageQuery,
	"GET /api/v1/treasury/positions":         pageQuery,
	"GET /developer/api-keys":                pageQuery,
	"GET /developer/oauth-clients":           pageQuery,
	"GET /developer/team":                    pageQuery,
	"GET /developer/websockets":              pageQuery,
	"GET /developer/webhooks":                pageQuery,
	"GET /developer/logs":                    append([]string{"correlationId", "status"}, pageQuery...),
	"GET /developer/webhooks/:id/deliveries": append([]string{"status", "event"}, pageQuery...),
	"GET /developer/webhooks/:id/recoveries": pageQuery,
	"GET /api/v1/payout-schedules":           pageQuery,
	"GET /api/v1/payout-schedules/:id/runs":  pageQuery,
}

func init() {
	for _, d := range orders.Domains {
		routeQuery["GET /api/v1/"+d.Collection] = append([]string{"status", "createdAfter"}, pageQuery...)
	}
}

// withKnownQuery refuses a request naming a query parameter its route does not take:
// 422, each such parameter named in errors[]. A misspelt filter (?stauts=pending) would
// otherwise be ignored, and the caller would read a list it did not ask for.
func withKnownQuery() gin.HandlerFunc {
	return func(c *gin.Context) {
		route := c.FullPath()
		if route == "" || strings.HasPrefix(route, "/console") || c.Request.URL.RawQuery == "" {
			c.Next()
			return
		}
		route = strings.Replace(route, developerAlias, "/developer/", 1)
		allowed := routeQuery[c.Request.Method+" "+route]
		developer := strings.HasPrefix(route, "/developer/")
		var unknown []string
		for k := range c.Request.URL.Query() {
			if !slices.Contains(allowed, k) && !(developer && k == "app") {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) == 0 {
			c.Next()
			return
		}
		slices.Sort(unknown)
		errs := make([]orders.FieldError, len(unknown))
		for i, k := range unknown {
			errs[i] = orders.FieldError{Field: k, Message: "is not a parameter of this endpoint"}
		}
		validationFailed(c, errs)
	}
}

// developerAlias is where the developer surface also answers; its routes are those of
// their canonical paths at the root.
const developerAlias = "/api/v1/developer/"
