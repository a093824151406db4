package api

import (
	"context"
	"encoding/json"
	"errors"
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

// keyHandlers serve /developer/api-keys: the keys of the caller's app, managed with a
// credential holding the developer action on it.
type keyHandlers struct {
	store *store.Store
	log   *slog.Logger
	// bus closes the revoked key's live connections on every replica.
	bus events.Bus
}

type keyResponse struct {
	ID          string   `json:"id"`
	App         string   `json:"app"`
	Kind        string   `json:"kind"`
	Actions     []string `json:"actions"`
	ResourceIDs []string `json:"resourceIds"`
	Label       string   `json:"label"`
	Hint        string   `json:"hint"`
	CreatedAt   string   `json:"createdAt"`
	LastUsedAt  *string  `json:"lastUsedAt"`
	RevokedAt   *string  `json:"revokedAt"`
	// CreatedBy is the person who created the key; null when a key created it.
	CreatedBy *string `json:"createdBy"`
	// Secret is present only in the answer to the create, once.
	Secret string `json:"secret,omitempty"`
}

func keyJSON(k *store.APIKey) keyResponse {
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
	return keyResponse{ID: k.ID, App: k.App, Kind: k.Kind, Actions: actions, ResourceIDs: resources, Label: k.Label,
		Hint: k.SecretHint, CreatedAt: formatTime(k.CreatedAt), LastUsedAt: formatTimePtr(k.LastUsedAt),
		RevokedAt: formatTimePtr(k.RevokedAt), CreatedBy: nullable(k.CreatedBy)}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// handsOutOnlyWhatItHolds answers 403 when a new credential would reach more than its
// creator: an action the creator does not hold on the app (a member granted developer must
// not mint themselves approve, nor an sk_ key, which holds every action), or, from a
// credential restricted to resource ids, anything beyond them. resourceIDs are the new
// credential's; none means every wallet of the organisation, which is all an sk_ or pk_ key
// or an OAuth client can reach, so a restricted creator can make only tk_ keys.
func handsOutOnlyWhatItHolds(c *gin.Context, actions, resourceIDs []string) bool {
	p := principalOf(c)
	var missing []string
	for _, a := range actions {
		if !p.Can(p.App, a) && !slices.Contains(missing, a) {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		fail(c, CodePermissionDenied, "A credential cannot hand out actions its creator does not hold on the '"+p.App+"' app: "+
			strings.Join(missing, ", ")+".")
		return false
	}
	if len(p.ResourceIDs) == 0 {
		return true
	}
	if len(resourceIDs) == 0 {
		fail(c, CodePermissionDenied, "A credential restricted to resource ids can create only tk keys restricted to some of its own resourceIds.")
		return false
	}
	var beyond []string
	for _, id := range resourceIDs {
		if !p.CanReach(id) {
			beyond = append(beyond, id)
		}
	}
	if len(beyond) > 0 {
		fail(c, CodePermissionDenied, "A credential cannot hand out resources its creator cannot reach: "+strings.Join(beyond, ", ")+".")
		return false
	}
	return true
}

// maxResourceIDs bounds a key's resourceIds, each of which is looked up at creation.
const maxResourceIDs = 100

// unknownWallets lists the ids among walletIDs that are not wallets of the organisation.
func (h *keyHandlers) unknownWallets(ctx context.Context, orgID string, walletIDs []string) ([]string, error) {
	if len(walletIDs) == 0 {
		return nil, nil
	}
	found, err := h.store.ListWallets(ctx, orgID, "", len(walletIDs), walletIDs...)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, id := range walletIDs {
		if !slices.ContainsFunc(found, func(w store.Wallet) bool { return w.ID == id }) {
			unknown = append(unknown, id)
		}
	}
	return unknown, nil
}

// list answers GET /developer/api-keys: the app's keys, newest first, never their secrets.
func (h *keyHandlers) list(c *gin.Context) {
	listOfOwnApp(c, h.log, h.store.ListAPIKeys, func(k *store.APIKey) string { return k.ID }, keyJSON)
}

// listOfOwnApp answers a page of the records of the caller's app that fetch returns,
// newest first (by id), each rendered for the API.
func listOfOwnApp[R, T any](c *gin.Context, log *slog.Logger, fetch func(ctx context.Context, orgID, app string) ([]R, error),
	id func(*R) string, render func(*R) T) {
	pg, errs := listParams(c, "limit", "cursor")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	rows, err := fetch(c.Request.Context(), p.OrgID, p.App)
	if err != nil {
		requestFailed(c, log, err)
		return
	}
	rows, next := pageInMemory(rows, pg, true, id)
	out := make([]T, len(rows))
	for i := range rows {
		out[i] = render(&rows[i])
	}
	c.JSON(http.StatusOK, listResponse[T]{Data: out, NextCursor: next})
}

// create answers POST /developer/api-keys {kind, actions?, resourceIds?, label?}: the new
// key's secret is in this answer and nowhere else, ever.
func (h *keyHandlers) create(c *gin.Context) {
	var req struct {
		Kind        string   `json:"kind"`
		Actions     []string `json:"actions"`
		ResourceIDs []string `json:"resourceIds"`
		Label       string   `json:"label"`
	}
	if !bindStrict(c, &req, "kind", "actions", "resourceIds", "label") {
		return
	}
	var errs []orders.FieldError
	switch req.Kind {
	case auth.KindSecret, auth.KindPublishable:
		if len(req.Actions) > 0 || len(req.ResourceIDs) > 0 {
			errs = append(errs, orders.FieldError{Field: "actions", Message: "only tk keys take actions and resourceIds"})
		}
	case auth.KindResource:
		if len(req.Actions) == 0 {
			errs = append(errs, orders.FieldError{Field: "actions", Message: "a tk key needs at least one action"})
		}
		for _, a := range req.Actions {
			if !auth.IsAction(a) {
				errs = append(errs, orders.FieldError{Field: "actions", Message: a + " is not an action (read, write, approve, sign, developer)"})
			}
		}
		if len(req.ResourceIDs) > maxResourceIDs {
			errs = append(errs, orders.FieldError{Field: "resourceIds", Message: "must hold at most 100 wallet ids"})
		}
	default:
		errs = append(errs, orders.FieldError{Field: "kind", Message: "must be sk, tk or pk"})
	}
	if len(req.Label) > 100 {
		errs = append(errs, orders.FieldError{Field: "label", Message: "must be at most 100 characters"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	slices.Sort(req.Actions)
	req.Actions = slices.Compact(req.Actions)
	slices.Sort(req.ResourceIDs)
	req.ResourceIDs = slices.Compact(req.ResourceIDs)
	granted := req.Actions
	if req.Kind == auth.KindSecret {
		granted = auth.AllActions
	}
	// Authorised before the wallets are looked up, so that a restricted key cannot learn
	// which ids beyond its own are wallets.
	if !handsOutOnlyWhatItHolds(c, granted, req.ResourceIDs) {
		return
	}
	p := principalOf(c)
	unknown, err := h.unknownWallets(c.Request.Context(), p.OrgID, req.ResourceIDs)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	for _, id := range unknown {
		errs = append(errs, orders.FieldError{Field: "resourceIds", Message: id + " is not a wallet of this organisation"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	secret, err := auth.NewSecret(req.Kind)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	now := time.Now().UTC()
	k := &store.APIKey{ID: ids.New(ids.APIKey), OrgID: p.OrgID, App: p.App, Kind: req.Kind,
		Actions: auth.FormatActions(req.Actions), ResourceIDs: auth.FormatActions(req.ResourceIDs), Label: req.Label,
		SecretHash: auth.HashSecret(secret), SecretHint: auth.Hint(secret), CreatedAt: now, CreatedBy: p.Person}
	if !writeAudited(c, h.store, h.log, func(tx *store.Store) error { return tx.CreateAPIKey(c.Request.Context(), k) },
		"api_key.created", "api_key", k.ID, map[string]any{"kind": k.Kind}) {
		return
	}
	out := keyJSON(k)
	out.Secret = secret
	replyWithSecret(c, out, "secret")
}

// revoke answers DELETE /developer/api-keys/{id}: the key stops working at once.
func (h *keyHandlers) revoke(c *gin.Context) {
	p := principalOf(c)
	ctx := c.Request.Context()
	k, ok := h.keyOfApp(c)
	if !ok {
		return
	}
	if k.RevokedAt != nil {
		c.JSON(http.StatusOK, keyJSON(k))
		return
	}
	now := time.Now().UTC()
	revoked := writeAudited(c, h.store, h.log, func(tx *store.Store) error {
		return ignoreNotFound(tx.RevokeAPIKey(ctx, p.OrgID, k.ID, now))
	}, "api_key.revoked", "api_key", k.ID, map[string]any{})
	if !revoked {
		return
	}
	k.RevokedAt = &now
	announce(c, h.bus, h.log, events.Control{Kind: events.ControlCredentialRevoked, OrgID: p.OrgID, CredentialID: k.ID})
	c.JSON(http.StatusOK, keyJSON(k))
}

// get answers GET /developer/api-keys/{id}: one key of the caller's app, never its secret.
func (h *keyHandlers) get(c *gin.Context) {
	if k, ok := h.keyOfApp(c); ok {
		c.JSON(http.StatusOK, keyJSON(k))
	}
}

// keyOfApp finds the key in the path among the caller's app's, or answers 404 (another
// app's or organisation's key is as unknown as a missing one).
func (h *keyHandlers) keyOfApp(c *gin.Context) (*store.APIKey, bool) {
	p := principalOf(c)
	k, err := h.store.APIKey(c.Request.Context(), p.OrgID, c.Param("id"))
	return ofOwnApp(c, h.log, "API key", k, err, func(k *store.APIKey) bool { return k.App == p.App })
}

// replyWithSecret answers 201 with a new credential whose secret this answer alone holds.
// A replay of the request (Idempotency-Key) answers the same record without the secret
// fields: the secret was shown once and is never stored in the clear, not even for replay.
func replyWithSecret(c *gin.Context, out any, secretFields ...string) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, out)
	var kept map[string]any
	b, err := json.Marshal(out)
	if err == nil {
		err = json.Unmarshal(b, &kept)
	}
	for _, f := range secretFields {
		delete(kept, f)
	}
	if err == nil {
		b, err = json.Marshal(kept)
	}
	if err != nil {
		b = []byte(`{}`)
	}
	c.Set(keptBodyKey, b)
}

// keptBodyKey holds the body an idempotency record keeps in place of the one sent.
const keptBodyKey = "treasury.keptBody"

// ignoreNotFound: revoking what a concurrent request revoked first is not an error.
func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
