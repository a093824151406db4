package api

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
)

// authenticate resolves the bearer token into a principal, or answers 401.
func authenticate(a *auth.Authenticator, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		header := c.GetHeader("Authorization")
		if header == "" {
			fail(c, CodeUnauthenticated, "Send an API key as 'Authorization: Bearer <key>'.")
			return
		}
		token := bearerToken(header)
		if token == "" {
			fail(c, CodeUnauthenticated, "The Authorization header must be 'Bearer <key>'.")
			return
		}
		p, err := a.Authenticate(c.Request.Context(), token)
		if errors.Is(err, auth.ErrUnauthenticated) {
			fail(c, CodeUnauthenticated, "The token is unknown, revoked or expired.")
			return
		}
		if err != nil {
			requestFailed(c, log, err)
			return
		}
		c.Set(principalContextKey, p)
		c.Next()
	}
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header, or "".
func bearerToken(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// require lets the request through only when the principal holds action on app.
func require(app, action string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principalOf(c)
		if p.Kind == auth.KindPublishable {
			fail(c, CodePermissionDenied, "Publishable (pk_) keys only open WebSocket connections; use an sk_ or tk_ key for the REST API.")
			return
		}
		if !p.Can(app, action) {
			fail(c, CodePermissionDenied, "This credential does not have the '"+action+"' action on the '"+app+"' app.")
			return
		}
		c.Next()
	}
}

func principalOf(c *gin.Context) *auth.Principal {
	v, ok := c.Get(principalContextKey)
	if !ok {
		return nil
	}
	p, _ := v.(*auth.Principal)
	return p
}
