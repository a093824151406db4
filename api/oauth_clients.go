package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// oauthClientHandlers serve /developer/oauth-clients: the client-credentials clients of
// the caller's app.
type oauthClientHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func oauthClientJSON(oc *store.OAuthClient) apitypes.OAuthClient {
	return apitypes.OAuthClient{ID: oc.ID, ClientID: oc.ID, App: oc.App, Scopes: oc.Scopes, Label: oc.Label,
		CreatedAt: timeOf(oc.CreatedAt), RevokedAt: timeOrNull(oc.RevokedAt), ApproverKeyID: oc.ApproverKeyID, Creator: creatorJSON(oc.Creator)}
}

// list answers GET /developer/oauth-clients: newest first, never a secret.
func (h *oauthClientHandlers) list(c *gin.Context) {
	listPage(c, h.log, h.svc.ListOAuthClients, oauthClientJSON)
}

// create answers POST /developer/oauth-clients {scopes, label?, approverKey?}: scopes are
// space-separated "<app>:<action>" of the caller's app; the secret is shown once.
func (h *oauthClientHandlers) create(c *gin.Context) {
	var req apitypes.OAuthClientRequest
	if !bindStrict(c, &req, "scopes", "label", "approverKey") {
		return
	}
	in := service.OAuthClientRequest{Scopes: req.Scopes, Label: req.Label, ApproverKey: approverKeyRequest(req.ApproverKey)}
	withSecret(c, h.log, http.StatusCreated, oauthClientJSON, "clientSecret")(h.svc.CreateOAuthClient(c.Request.Context(), caller(c), in))
}

// revoke answers DELETE /developer/oauth-clients/{id}: the client and every access token
// issued to it stop working at once, and connections opened with those tokens close
// (4003) on every replica.
func (h *oauthClientHandlers) revoke(c *gin.Context) {
	respond(c, h.log, http.StatusOK, oauthClientJSON)(h.svc.RevokeOAuthClient(c.Request.Context(), caller(c), c.Param("id")))
}

// get answers GET /developer/oauth-clients/{id}: one client of the caller's app, never its
// secret.
func (h *oauthClientHandlers) get(c *gin.Context) {
	respond(c, h.log, http.StatusOK, oauthClientJSON)(h.svc.OAuthClient(c.Request.Context(), caller(c), c.Param("id")))
}
