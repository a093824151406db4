package api

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
)

// oauthClientSecretKind prefixes client secrets ("ocs_…").
const oauthClientSecretKind = "ocs"

// oauthClientHandlers serve /developer/oauth-clients: the client-credentials clients of
// the caller's app.
type oauthClientHandlers struct {
	store *store.Store
	log   *slog.Logger
	bus   events.Bus
}

type oauthClientResponse struct {
	ID        string  `json:"id"`
	ClientID  string  `json:"clientId"`
	App       string  `json:"app"`
	Scopes    string  `json:"scopes"`
	Label     string  `json:"label"`
	CreatedAt string  `json:"createdAt"`
	RevokedAt *string `json:"revokedAt"`
	// CreatedBy is the person who created the client; null when a key created it.
	CreatedBy *string `json:"createdBy"`
	// ClientSecret is present only in the answer to the create, once.
	ClientSecret string `json:"clientSecret,omitempty"`
}

func oauthClientJSON(oc *store.OAuthClient) oauthClientResponse {
	return oauthClientResponse{ID: oc.ID, ClientID: oc.ID, App: oc.App, Scopes: oc.Scopes, Label: oc.Label,
		CreatedAt: formatTime(oc.CreatedAt), RevokedAt: formatTimePtr(oc.RevokedAt), CreatedBy: nullable(oc.CreatedBy)}
}

// list answers GET /developer/oauth-clients: newest first, never a secret.
func (h *oauthClientHandlers) list(c *gin.Context) {
	listOfOwnApp(c, h.log, h.store.ListOAuthClients, func(oc *store.OAuthClient) string { return oc.ID }, oauthClientJSON)
}

// create answers POST /developer/oauth-clients {scopes, label?}: scopes are
// space-separated "<app>:<action>" of the caller's app; the secret is shown once.
func (h *oauthClientHandlers) create(c *gin.Context) {
	var req struct {
		Scopes string `json:"scopes"`
		Label  string `json:"label"`
	}
	if !bindStrict(c, &req, "scopes", "label") {
		return
	}
	p := principalOf(c)
	scopes := strings.Fields(req.Scopes)
	var errs []orders.FieldError
	if len(scopes) == 0 {
		errs = append(errs, orders.FieldError{Field: "scopes", Message: "needs at least one scope, e.g. \"" + p.App + ":read\""})
	}
	for _, s := range scopes {
		app, action, _ := strings.Cut(s, ":")
		if app != p.App || !auth.IsAction(action) {
			errs = append(errs, orders.FieldError{Field: "scopes", Message: s + " is not a scope of this app (" + p.App +
				":read, :write, :approve, :sign or :developer)"})
		}
	}
	if len(req.Label) > 100 {
		errs = append(errs, orders.FieldError{Field: "label", Message: "must be at most 100 characters"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	slices.Sort(scopes)
	actions := make([]string, len(scopes))
	for i, s := range scopes {
		_, actions[i], _ = strings.Cut(s, ":")
	}
	// A client reaches every wallet of the app: a creator restricted to some is refused.
	if !handsOutOnlyWhatItHolds(c, actions, nil) {
		return
	}
	secret, err := auth.NewSecret(oauthClientSecretKind)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	oc := &store.OAuthClient{ID: ids.New(ids.OAuthClient), OrgID: p.OrgID, App: p.App, SecretHash: auth.HashSecret(secret),
		Scopes: strings.Join(slices.Compact(scopes), " "), Label: req.Label, CreatedAt: time.Now().UTC(), CreatedBy: p.Person}
	if !writeAudited(c, h.store, h.log, func(tx *store.Store) error { return tx.CreateOAuthClient(c.Request.Context(), oc) },
		"oauth_client.created", "oauth_client", oc.ID, map[string]any{"scopes": oc.Scopes}) {
		return
	}
	out := oauthClientJSON(oc)
	out.ClientSecret = secret
	replyWithSecret(c, out, "clientSecret")
}

// revoke answers DELETE /developer/oauth-clients/{id}: the client and every access token
// issued to it stop working at once, and connections opened with those tokens close
// (4003) on every replica.
func (h *oauthClientHandlers) revoke(c *gin.Context) {
	p := principalOf(c)
	ctx := c.Request.Context()
	oc, ok := h.clientOfApp(c)
	if !ok {
		return
	}
	if oc.RevokedAt == nil {
		now := time.Now().UTC()
		revoked := writeAudited(c, h.store, h.log, func(tx *store.Store) error {
			return ignoreNotFound(tx.RevokeOAuthClient(ctx, p.OrgID, oc.ID, now))
		}, "oauth_client.revoked", "oauth_client", oc.ID, map[string]any{})
		if !revoked {
			return
		}
		oc.RevokedAt = &now
	}
	// Announced on a repeated revoke too: a retry repairs a lost announcement.
	announce(c, h.bus, h.log, events.Control{Kind: events.ControlCredentialRevoked, OrgID: p.OrgID, CredentialID: oc.ID})
	c.JSON(http.StatusOK, oauthClientJSON(oc))
}

// get answers GET /developer/oauth-clients/{id}: one client of the caller's app, never its
// secret.
func (h *oauthClientHandlers) get(c *gin.Context) {
	if oc, ok := h.clientOfApp(c); ok {
		c.JSON(http.StatusOK, oauthClientJSON(oc))
	}
}

// clientOfApp finds the OAuth client in the path among the caller's app's, or answers 404.
func (h *oauthClientHandlers) clientOfApp(c *gin.Context) (*store.OAuthClient, bool) {
	p := principalOf(c)
	oc, err := h.store.OAuthClient(c.Request.Context(), c.Param("id"))
	return ofOwnApp(c, h.log, "OAuth client", oc, err, func(oc *store.OAuthClient) bool { return oc.OrgID == p.OrgID && oc.App == p.App })
}
