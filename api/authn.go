package api

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

// authenticate resolves the bearer token, or else the session cookie, into a principal,
// or answers 401. A write made with a session must carry the session's CSRF token.
func authenticate(a *auth.Authenticator, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		header := c.GetHeader("Authorization")
		var p *auth.Principal
		var err error
		switch session, _ := c.Cookie(auth.SessionCookie); {
		case header != "":
			token := bearerToken(header)
			if token == "" {
				fail(c, apitypes.CodeUnauthenticated, "The Authorization header must be 'Bearer <key>'.")
				return
			}
			p, err = a.Authenticate(c.Request.Context(), token)
		case session != "":
			p, err = a.AuthenticateSession(c.Request.Context(), session)
			if err == nil && !isSafeMethod(c.Request.Method) && !auth.CSRFTokenMatches(session, c.GetHeader(auth.CSRFHeader)) {
				fail(c, apitypes.CodePermissionDenied, "A write made with a session needs the session's CSRF token in the "+auth.CSRFHeader+" header.")
				return
			}
		default:
			fail(c, apitypes.CodeUnauthenticated, "Send an API key as 'Authorization: Bearer <key>', or sign in at POST /api/v1/sessions.")
			return
		}
		if errors.Is(err, auth.ErrUnauthenticated) {
			fail(c, apitypes.CodeUnauthenticated, "The token or session is unknown, revoked or expired.")
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

// require lets the request through only when the principal holds action on app, and
// narrows a person to that app for the handler.
func require(app, action string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principalOf(c)
		if p.Kind == auth.KindPublishable {
			fail(c, apitypes.CodePermissionDenied, "Publishable (pk_) keys only open WebSocket connections; use an sk_ or tk_ key for the REST API.")
			return
		}
		if !p.Can(app, action) {
			fail(c, apitypes.CodePermissionDenied, "This credential does not have the '"+action+"' action on the '"+app+"' app.")
			return
		}
		c.Set(principalContextKey, p.InApp(app))
		c.Next()
	}
}

// requireOwn is the check of routes about one app's own resources (the developer surface):
// a key or token acts in its own app; a person names the app with ?app=. A key may name
// its own app too, and only that one.
func requireOwn(action string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principalOf(c)
		app, named := c.GetQuery("app")
		switch {
		case named && !auth.IsApp(app):
			validationFailed(c, []orders.FieldError{{Field: "app", Message: "must be one of " + strings.Join(auth.Apps, ", ")}})
			return
		case p.Kind == auth.KindUser && !named:
			validationFailed(c, []orders.FieldError{{Field: "app", Message: "is required when signed in as a person, e.g. ?app=pay"}})
			return
		case p.Kind != auth.KindUser && named && app != p.App:
			fail(c, apitypes.CodePermissionDenied, "This credential belongs to the '"+p.App+"' app, not '"+app+"'.")
			return
		case p.Kind != auth.KindUser:
			app = p.App
		}
		require(app, action)(c)
	}
}

// requireOwner lets through the organisation's owner, signed in (the service checks it
// again; here it answers before the body is read).
func requireOwner(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := service.Owner(caller(c)); err != nil {
			failed(c, log, err)
			return
		}
		c.Next()
	}
}

// requireReach lets through a principal that reaches records of the kind in at least
// one app; the handler lists across those apps.
func requireReach(r service.Records) gin.HandlerFunc {
	return func(c *gin.Context) {
		if len(service.Reach(principalOf(c), r)) == 0 {
			fail(c, apitypes.CodePermissionDenied, "This credential may not read this.")
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
