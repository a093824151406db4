package api

import (
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/internal/service"
)

// oauthHandlers serve POST /oauth/token: the OAuth 2.0 client credentials grant (RFC 6749
// §4.4), which service.OAuth decides. Its errors follow §5.2 ({error, error_description}),
// not the problem format.
type oauthHandlers struct {
	oauth *service.OAuth
	log   *slog.Logger
}

func oauthError(c *gin.Context, status int, code, description string, basic bool) {
	if status == http.StatusUnauthorized && basic {
		c.Header("WWW-Authenticate", `Basic realm="treasury"`)
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.Abort()
	c.PureJSON(status, gin.H{"error": code, "error_description": description})
}

func (h *oauthHandlers) token(c *gin.Context) {
	mediaType, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	body, ok := readBody(c)
	if !ok {
		return
	}
	if mediaType != "application/x-www-form-urlencoded" {
		oauthError(c, http.StatusBadRequest, service.OAuthInvalidRequest, "the body must be application/x-www-form-urlencoded", false)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		oauthError(c, http.StatusBadRequest, service.OAuthInvalidRequest, "the body is not a valid form", false)
		return
	}
	for k, v := range form {
		if len(v) > 1 {
			oauthError(c, http.StatusBadRequest, service.OAuthInvalidRequest, k+" is repeated", false)
			return
		}
	}
	id, secret, basic := c.Request.BasicAuth()
	if basic {
		// RFC 6749 §2.3.1: the Basic credentials are form-encoded first.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if form.Has("client_id") || form.Has("client_secret") {
			oauthError(c, http.StatusBadRequest, service.OAuthInvalidRequest, "authenticate the client one way only", false)
			return
		}
	} else {
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	req := service.TokenRequest{GrantType: form.Get("grant_type"), ClientID: id, ClientSecret: secret}
	if raw, given := form["scope"]; given {
		req.Scope = &raw[0]
	}
	token, err := h.oauth.IssueToken(c.Request.Context(), req)
	var refused *service.OAuthError
	if errors.As(err, &refused) {
		status := http.StatusBadRequest
		if refused.Code == service.OAuthInvalidClient {
			status = http.StatusUnauthorized
		}
		oauthError(c, status, refused.Code, refused.Description, basic)
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.PureJSON(http.StatusOK, gin.H{"access_token": token.AccessToken, "token_type": "Bearer", "expires_in": int(token.ExpiresIn.Seconds()), "scope": token.Scope})
}
