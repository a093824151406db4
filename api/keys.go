package api

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// keyHandlers serve /developer/api-keys: the keys of the caller's app, managed with a
// credential holding the developer action on it.
type keyHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func keyJSON(k *store.APIKey) apitypes.APIKey {
	actions := auth.ParseActions(k.Actions)
	if k.Kind == auth.KindSecret {
		actions = auth.AllActions
	}
	if actions == nil {
		actions = []string{}
	}
	resources := auth.ParseActions(k.ResourceIDs)
	if resources == nil {
		resources = []string{}
	}
	return apitypes.APIKey{ID: k.ID, App: k.App, Kind: k.Kind, Actions: actions, ResourceIDs: resources, Label: k.Label,
		Hint: k.SecretHint, CreatedAt: timeOf(k.CreatedAt), LastUsedAt: timeOrNull(k.LastUsedAt),
		RevokedAt: timeOrNull(k.RevokedAt), ApproverKeyID: k.ApproverKeyID, Creator: creatorJSON(k.Creator)}
}

// list answers GET /developer/api-keys: the app's keys, newest first, never their secrets.
func (h *keyHandlers) list(c *gin.Context) {
	listPage(c, h.log, h.svc.ListAPIKeys, keyJSON)
}

// listPage answers a developer list: the page the query asks for, read by list.
func listPage[R, T any](c *gin.Context, log *slog.Logger, list func(context.Context, service.Caller, service.Page) ([]R, string, error), render func(*R) T) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, log, render)(list(c.Request.Context(), caller(c), pg))
}

// create answers POST /developer/api-keys {kind, actions?, resourceIds?, label?}: the new
// key's secret is in this answer and nowhere else, ever.
func (h *keyHandlers) create(c *gin.Context) {
	var req apitypes.APIKeyRequest
	if !bindStrict(c, &req, "kind", "actions", "resourceIds", "label", "approverKey") {
		return
	}
	in := service.KeyRequest{Kind: req.Kind, Actions: req.Actions, ResourceIDs: req.ResourceIDs, Label: req.Label,
		ApproverKey: approverKeyRequest(req.ApproverKey)}
	withSecret(c, h.log, http.StatusCreated, keyJSON, "secret")(h.svc.CreateAPIKey(c.Request.Context(), caller(c), in))
}

// revoke answers DELETE /developer/api-keys/{id}: the key stops working at once.
func (h *keyHandlers) revoke(c *gin.Context) {
	respond(c, h.log, http.StatusOK, keyJSON)(h.svc.RevokeAPIKey(c.Request.Context(), caller(c), c.Param("id")))
}

// get answers GET /developer/api-keys/{id}: one key of the caller's app, never its secret.
func (h *keyHandlers) get(c *gin.Context) {
	respond(c, h.log, http.StatusOK, keyJSON)(h.svc.APIKey(c.Request.Context(), caller(c), c.Param("id")))
}

// respondList answers a list with what the service returned: the page rendered with the
// cursor that continues it, or the error.
func respondList[R, T any](c *gin.Context, log *slog.Logger, render func(*R) T) func([]R, string, error) {
	return func(items []R, next string, err error) {
		if err != nil {
			failed(c, log, err)
			return
		}
		writeList(c, items, next, render)
	}
}

// respond answers with what the service returned: the record rendered, or the error.
func respond[R, T any](c *gin.Context, log *slog.Logger, status int, render func(*R) T) func(*R, error) {
	return func(rec *R, err error) {
		if err != nil {
			failed(c, log, err)
			return
		}
		c.PureJSON(status, render(rec))
	}
}

// approverKeyRequest is the approver key a new credential asks to carry, if any.
func approverKeyRequest(req *apitypes.ApproverKeyRequest) *service.ApproverKeyRequest {
	if req == nil {
		return nil
	}
	return &service.ApproverKeyRequest{Scheme: req.Scheme, PublicKey: req.PublicKey}
}
