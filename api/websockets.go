package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
)

// LiveChannel is the WebSocket hub of this process, as the API uses it.
type LiveChannel interface {
	// Serve upgrades an authorised request and runs the connection.
	Serve(w http.ResponseWriter, r *http.Request, cfg events.Subscription, credentialID string, expiresAt time.Time, header http.Header) error
	// LiveConnections counts each config's live connections.
	LiveConnections(ctx context.Context, configIDs []string) map[string]int
}

// websocketHandlers serve /developer/websockets and the channel itself, /ws.
type websocketHandlers struct {
	store *store.Store
	log   *slog.Logger
	bus   events.Bus
	live  LiveChannel
	authn *auth.Authenticator
	limit *rateLimiter
	now   func() time.Time
}

type deliveryJSON struct {
	EventID string `json:"eventId"`
	Event   string `json:"event"`
	At      string `json:"at"`
}

type websocketConfigJSON struct {
	ID              string         `json:"id"`
	App             string         `json:"app"`
	Events          []string       `json:"events"`
	Enabled         bool           `json:"enabled"`
	LiveConnections int            `json:"liveConnections"`
	CreatedAt       string         `json:"createdAt"`
	DeliveryLog     []deliveryJSON `json:"deliveryLog"`
}

// page renders configs as the WebSockets page shows them: with their live connections
// and delivery logs.
func (h *websocketHandlers) page(ctx context.Context, configs []store.WebSocketConfig) ([]websocketConfigJSON, error) {
	configIDs := make([]string, len(configs))
	for i := range configs {
		configIDs[i] = configs[i].ID
	}
	logs, err := h.store.WebSocketDeliveryLogs(ctx, configIDs)
	if err != nil {
		return nil, err
	}
	live := map[string]int{}
	if h.live != nil {
		live = h.live.LiveConnections(ctx, configIDs)
	}
	out := make([]websocketConfigJSON, len(configs))
	for i, cfg := range configs {
		log := make([]deliveryJSON, 0, len(logs[cfg.ID]))
		for _, d := range logs[cfg.ID] {
			log = append(log, deliveryJSON{EventID: d.EventID, Event: d.Event, At: formatTime(d.SentAt)})
		}
		entries := cfg.EventList()
		if entries == nil {
			entries = []string{}
		}
		out[i] = websocketConfigJSON{ID: cfg.ID, App: cfg.App, Events: entries, Enabled: cfg.Enabled,
			LiveConnections: live[cfg.ID], CreatedAt: formatTime(cfg.CreatedAt), DeliveryLog: log}
	}
	return out, nil
}

// list answers GET /developer/websockets.
func (h *websocketHandlers) list(c *gin.Context) {
	pg, errs := listParams(c, "limit", "cursor")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	configs, err := h.store.ListWebSocketConfigs(c.Request.Context(), p.OrgID, p.App)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	configs, next := pageInMemory(configs, pg, false, func(cfg *store.WebSocketConfig) string { return cfg.ID })
	out, err := h.page(c.Request.Context(), configs)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.JSON(http.StatusOK, listResponse[websocketConfigJSON]{Data: out, NextCursor: next})
}

// get answers GET /developer/websockets/{id}.
func (h *websocketHandlers) get(c *gin.Context) {
	cfg, ok := h.configOfApp(c)
	if !ok {
		return
	}
	h.reply(c, http.StatusOK, cfg)
}

func (h *websocketHandlers) reply(c *gin.Context, status int, cfg *store.WebSocketConfig) {
	out, err := h.page(c.Request.Context(), []store.WebSocketConfig{*cfg})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.JSON(status, out[0])
}

// configOfApp loads the config named in the path; one of another org or app is not found.
func (h *websocketHandlers) configOfApp(c *gin.Context) (*store.WebSocketConfig, bool) {
	p := principalOf(c)
	cfg, err := h.store.WebSocketConfig(c.Request.Context(), p.OrgID, c.Param("id"))
	return ofOwnApp(c, h.log, "WebSocket config", cfg, err, func(cfg *store.WebSocketConfig) bool { return cfg.App == p.App })
}

// ofOwnApp passes on a record looked up by the id in the path, or answers: 404 when it is
// missing or not the caller's (another app's or organisation's record is as unknown as a
// missing one), 500 or 503 when the lookup failed.
func ofOwnApp[R any](c *gin.Context, log *slog.Logger, what string, rec *R, err error, mine func(*R) bool) (*R, bool) {
	if errors.Is(err, store.ErrNotFound) || (err == nil && !mine(rec)) {
		fail(c, CodeNotFound, "No "+what+" with this id.")
		return nil, false
	}
	if err != nil {
		requestFailed(c, log, err)
		return nil, false
	}
	return rec, true
}

// create answers POST /developer/websockets {events}.
func (h *websocketHandlers) create(c *gin.Context) {
	var req struct {
		Events []string `json:"events"`
	}
	if !bindStrict(c, &req, "events") {
		return
	}
	entries, err := events.NormalizeEntries(req.Events)
	if err != nil {
		validationFailed(c, []orders.FieldError{{Field: "events", Message: err.Error()}})
		return
	}
	p := principalOf(c)
	ctx := c.Request.Context()
	cfg := &store.WebSocketConfig{ID: ids.New(ids.WebSocketConfig), OrgID: p.OrgID, App: p.App,
		Events: strings.Join(entries, ","), Enabled: true, CreatedAt: h.now().UTC()}
	created := writeAudited(c, h.store, h.log, func(tx *store.Store) error { return tx.CreateWebSocketConfig(ctx, cfg) },
		"websocket_config.created", "websocket_config", cfg.ID, map[string]any{"events": entries})
	if !created {
		return
	}
	h.reply(c, http.StatusCreated, cfg)
}

// writeAudited runs write and the change's audit record in one transaction, answering an
// error itself; it reports whether the handler may go on.
func writeAudited(c *gin.Context, s *store.Store, log *slog.Logger, write func(tx *store.Store) error,
	action, resourceType, id string, details map[string]any) bool {
	err := s.Tx(c.Request.Context(), func(tx *store.Store) error {
		if err := write(tx); err != nil {
			return err
		}
		return auditDeveloperAction(c, tx, action, resourceType, id, details)
	})
	if err != nil {
		requestFailed(c, log, err)
		return false
	}
	return true
}

// auditDeveloperAction records a change the caller made to its own app's developer
// resources, in the transaction that makes it.
func auditDeveloperAction(c *gin.Context, tx *store.Store, action, resourceType, id string, details map[string]any) error {
	p := principalOf(c)
	d, _ := json.Marshal(details)
	return tx.AppendAudit(c.Request.Context(), &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: p.OrgID, App: p.App,
		ActorType: p.ActorType(), ActorID: p.ID, Action: action, ResourceType: resourceType, ResourceID: id,
		CorrelationID: correlationID(c), Details: string(d), CreatedAt: time.Now().UTC()})
}

// update answers PATCH /developer/websockets/{id} {enabled}: disabling closes the
// config's connections (4001) on every replica.
func (h *websocketHandlers) update(c *gin.Context) {
	var req struct {
		Enabled *bool `json:"enabled"`
	}
	if !bindStrict(c, &req, "enabled") {
		return
	}
	if req.Enabled == nil {
		validationFailed(c, []orders.FieldError{{Field: "enabled", Message: "is required (true or false)"}})
		return
	}
	cfg, ok := h.configOfApp(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if cfg.Enabled != *req.Enabled {
		updated := writeAudited(c, h.store, h.log, func(tx *store.Store) error {
			return tx.SetWebSocketConfigEnabled(ctx, cfg.OrgID, cfg.ID, *req.Enabled)
		}, "websocket_config.updated", "websocket_config", cfg.ID, map[string]any{"enabled": *req.Enabled})
		if !updated {
			return
		}
		cfg.Enabled = *req.Enabled
	}
	// Announced even when nothing changed: a retry after a lost announcement repairs it.
	announce(c, h.bus, h.log, events.Control{Kind: events.ControlConfig, OrgID: cfg.OrgID, ConfigID: cfg.ID})
	h.reply(c, http.StatusOK, cfg)
}

// remove answers DELETE /developer/websockets/{id}: its connections are closed (4004).
func (h *websocketHandlers) remove(c *gin.Context) {
	cfg, ok := h.configOfApp(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	err := h.store.Tx(ctx, func(tx *store.Store) error {
		if err := tx.DeleteWebSocketConfig(ctx, cfg.OrgID, cfg.ID, h.now()); err != nil {
			return err
		}
		return auditDeveloperAction(c, tx, "websocket_config.deleted", "websocket_config", cfg.ID, map[string]any{})
	})
	if errors.Is(err, store.ErrNotFound) {
		fail(c, CodeNotFound, "No WebSocket config with this id.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	announce(c, h.bus, h.log, events.Control{Kind: events.ControlConfig, OrgID: cfg.OrgID, ConfigID: cfg.ID})
	c.JSON(http.StatusOK, gin.H{"id": cfg.ID, "deleted": true})
}

// test answers POST /developer/websockets/{id}/test: a websocket.test event goes to
// every live connection of the config, on every replica, whatever it subscribes to.
func (h *websocketHandlers) test(c *gin.Context) {
	cfg, ok := h.configOfApp(c)
	if !ok {
		return
	}
	if !cfg.Enabled {
		fail(c, CodeConflict, "The config is disabled; enable it to send a test event.")
		return
	}
	now := h.now().UTC()
	data := map[string]any{"id": ids.New(ids.Event), "event": events.WebSocketTest, "configId": cfg.ID, "app": cfg.App,
		"correlationId": correlationID(c), "occurredAt": formatTime(now)}
	raw, _ := json.Marshal(data)
	if !announce(c, h.bus, h.log, events.Control{Kind: events.ControlTest, OrgID: cfg.OrgID, ConfigID: cfg.ID, Event: raw}) {
		fail(c, CodeUnavailable, "The test event could not be sent; retry.")
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"eventId": data["id"], "event": events.WebSocketTest, "configId": cfg.ID})
}

// announce tells every API process about a change. It reports false when the bus
// could not take it (the change itself is stored).
func announce(c *gin.Context, bus events.Bus, log *slog.Logger, ctl events.Control) bool {
	if bus == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 5*time.Second)
	defer cancel()
	if err := bus.Publish(ctx, ctl); err != nil {
		log.Error("bus: control message not sent", "kind", ctl.Kind, "configId", ctl.ConfigID,
			"credentialId", ctl.CredentialID, "correlationId", correlationID(c), "error", err)
		return false
	}
	return true
}

// connect answers GET /ws?id=&token=: the upgrade to the live channel (SPEC 4). Every
// refusal is an HTTP answer before the upgrade: 401 for a missing or bad token, 403 for
// a token of another organisation or app or of a kind that cannot connect, 404 for an
// unknown config.
func (h *websocketHandlers) connect(c *gin.Context) {
	token := c.Query("token")
	if token == "" {
		token = bearerToken(c.GetHeader("Authorization"))
	}
	if token == "" {
		fail(c, CodeUnauthenticated, "Pass a key or access token as ?token=… (or 'Authorization: Bearer …').")
		return
	}
	ctx := c.Request.Context()
	p, err := h.authn.Authenticate(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		fail(c, CodeUnauthenticated, "The token is unknown, revoked or expired.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	switch {
	case p.Kind == auth.KindSecret || p.Kind == auth.KindPublishable:
	case p.Kind == auth.KindAccessToken && len(p.Actions) > 0:
	default:
		fail(c, CodePermissionDenied, "Connect with an sk_ or pk_ key of the app, or an OAuth access token with a scope on it.")
		return
	}
	c.Set(principalContextKey, p)
	if h.limit.middleware()(c); c.IsAborted() {
		return
	}
	id := c.Query("id")
	if id == "" {
		validationFailed(c, []orders.FieldError{{Field: "id", Message: "is required: the WebSocket config id (wsc_…)"}})
		return
	}
	cfg, err := h.store.WebSocketConfigByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && cfg.DeletedAt != nil) {
		fail(c, CodeNotFound, "No WebSocket config with this id.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	if cfg.OrgID != p.OrgID || cfg.App != p.App {
		fail(c, CodePermissionDenied, "This token does not belong to the config's organisation and app.")
		return
	}
	if h.live == nil {
		fail(c, CodeUnavailable, "The live channel is not served by this process.")
		return
	}
	header := http.Header{}
	header.Set(correlationHeader, correlationID(c))
	// A disabled config's connection is upgraded and then closed with 4001, as if it had
	// been disabled a moment later: the client handles one case, not two.
	if err := h.live.Serve(c.Writer, c.Request, cfg.Subscription(), p.ID, p.ExpiresAt, header); err != nil {
		if !c.Writer.Written() {
			fail(c, CodeUnavailable, "The server is restarting; reconnect.")
			return
		}
		h.log.Debug("websocket upgrade failed", "configId", cfg.ID, "correlationId", correlationID(c), "error", err)
	}
}
