package api

import (
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/store"
)

// oauthHandlers serve POST /oauth/token: the OAuth 2.0 client credentials grant (RFC 6749
// §4.4). Its errors follow §5.2 ({error, error_description}), not the problem format.
type oauthHandlers struct {
	store *store.Store
	log   *slog.Logger
	ttl   time.Duration
	now   func() time.Time
}

func oauthError(c *gin.Context, status int, code, description string, basic bool) {
	if status == http.StatusUnauthorized && basic {
		c.Header("WWW-Authenticate", `Basic realm="treasury"`)
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.AbortWithStatusJSON(status, gin.H{"error": code, "error_description": description})
}

func (h *oauthHandlers) token(c *gin.Context) {
	mediaType, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	body, ok := readBody(c)
	if !ok {
		return
	}
	if mediaType != "application/x-www-form-urlencoded" {
		oauthError(c, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded", false)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		oauthError(c, http.StatusBadRequest, "invalid_request", "the body is not a valid form", false)
		return
	}
	for k, v := range form {
		if len(v) > 1 {
			oauthError(c, http.StatusBadRequest, "invalid_request", k+" is repeated", false)
			return
		}
	}
	id, secret, basic := c.Request.BasicAuth()
	if basic {
		// RFC 6749 §2.3.1: the Basic credentials are form-encoded first.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if form.Has("client_id") || form.Has("client_secret") {
			oauthError(c, http.StatusBadRequest, "invalid_request", "authenticate the client one way only", false)
			return
		}
	} else {
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	if form.Get("grant_type") == "" {
		oauthError(c, http.StatusBadRequest, "invalid_request", "grant_type is required", false)
		return
	}
	if form.Get("grant_type") != "client_credentials" {
		oauthError(c, http.StatusBadRequest, "unsupported_grant_type", "only client_credentials is supported", false)
		return
	}
	// An id no client has (not UTF-8 text, or with a NUL in it) never reaches the database,
	// which could not even compare it.
	if !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		oauthError(c, http.StatusUnauthorized, "invalid_client", "client authentication failed", basic)
		return
	}
	ctx := c.Request.Context()
	client, err := h.store.OAuthClient(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		requestFailed(c, h.log, err)
		return
	}
	if id == "" || secret == "" || err != nil || !auth.SecretMatches(secret, client.SecretHash) || client.RevokedAt != nil {
		oauthError(c, http.StatusUnauthorized, "invalid_client", "client authentication failed", basic)
		return
	}
	granted := strings.Fields(client.Scopes)
	requested := granted
	if raw, given := form["scope"]; given {
		requested = strings.Fields(raw[0])
		if len(requested) == 0 {
			oauthError(c, http.StatusBadRequest, "invalid_scope", "scope is empty", false)
			return
		}
	}
	var actions []string
	for _, s := range requested {
		app, action, _ := strings.Cut(s, ":")
		if !slices.Contains(granted, s) || app != client.App || !auth.IsAction(action) {
			oauthError(c, http.StatusBadRequest, "invalid_scope", s+" is not a scope of this client", false)
			return
		}
		if !slices.Contains(actions, action) {
			actions = append(actions, action)
		}
	}
	token, err := auth.NewSecret(auth.KindAccessToken)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	now := h.now().UTC()
	scope := strings.Join(requested, " ")
	err = h.store.CreateOAuthToken(ctx, &store.OAuthToken{TokenHash: auth.HashSecret(token), ClientID: client.ID, OrgID: client.OrgID,
		App: client.App, Actions: auth.FormatActions(actions), Scope: scope, CreatedAt: now, ExpiresAt: now.Add(h.ttl)})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.JSON(http.StatusOK, gin.H{"access_token": token, "token_type": "Bearer", "expires_in": int(h.ttl.Seconds()), "scope": scope})
}
