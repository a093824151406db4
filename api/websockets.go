package api

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

// LiveChannel is the WebSocket hub of this process, as the API uses it.
type LiveChannel interface {
	// Serve upgrades an authorised request and runs the connection.
	Serve(w http.ResponseWriter, r *http.Request, cfg events.Subscription, to events.Recipient, header http.Header) error
	// LiveConnections counts each config's live connections.
	LiveConnections(ctx context.Context, configIDs []string) map[string]int
}

// websocketHandlers serve /developer/websockets and the channel itself, /ws.
type websocketHandlers struct {
	svc   *service.Service
	log   *slog.Logger
	live  LiveChannel
	authn service.Authenticator
	// limit is the API's rate limit per credential; knownQuery refuses parameters the
	// channel does not take.
	limit, knownQuery gin.HandlerFunc
}

type deliveryJSON struct {
	EventID string `json:"eventId"`
	Event   string `json:"event"`
	At      string `json:"at"`
}

type websocketConfigJSON struct {
	ID              string   `json:"id"`
	App             string   `json:"app"`
	Events          []string `json:"events"`
	Enabled         bool     `json:"enabled"`
	LiveConnections int      `json:"liveConnections"`
	apitypes.Creator
	CreatedAt   string         `json:"createdAt"`
	DeliveryLog []deliveryJSON `json:"deliveryLog"`
}

// configJSON renders a config as the WebSockets page shows it: with its live connections
// and delivery log.
func configJSON(cfg *service.WebSocketConfig) websocketConfigJSON {
	log := make([]deliveryJSON, len(cfg.DeliveryLog))
	for i, d := range cfg.DeliveryLog {
		log[i] = deliveryJSON{EventID: d.EventID, Event: d.Event, At: formatTime(d.SentAt)}
	}
	entries := cfg.EventList()
	if entries == nil {
		entries = []string{}
	}
	return websocketConfigJSON{ID: cfg.ID, App: cfg.App, Events: entries, Enabled: cfg.Enabled,
		LiveConnections: cfg.LiveConnections, Creator: creatorJSON(cfg.Creator), CreatedAt: formatTime(cfg.CreatedAt), DeliveryLog: log}
}

// list answers GET /developer/websockets.
func (h *websocketHandlers) list(c *gin.Context) {
	listPage(c, h.log, h.svc.ListWebSocketConfigs, configJSON)
}

// get answers GET /developer/websockets/{id}.
func (h *websocketHandlers) get(c *gin.Context) {
	respond(c, h.log, http.StatusOK, configJSON)(h.svc.GetWebSocketConfig(c.Request.Context(), caller(c), c.Param("id")))
}

// create answers POST /developer/websockets {events}.
func (h *websocketHandlers) create(c *gin.Context) {
	var req struct {
		Events []string `json:"events"`
	}
	if !bindStrict(c, &req, "events") {
		return
	}
	respond(c, h.log, http.StatusCreated, configJSON)(h.svc.CreateWebSocketConfig(c.Request.Context(), caller(c), req.Events))
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
	respond(c, h.log, http.StatusOK, configJSON)(h.svc.SetWebSocketConfigEnabled(c.Request.Context(), caller(c), c.Param("id"), *req.Enabled))
}

// remove answers DELETE /developer/websockets/{id}: its connections are closed (4004).
func (h *websocketHandlers) remove(c *gin.Context) {
	id := c.Param("id")
	if err := h.svc.DeleteWebSocketConfig(c.Request.Context(), caller(c), id); err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"id": id, "deleted": true})
}

// test answers POST /developer/websockets/{id}/test: a websocket.test event goes to
// every live connection of the config, on every replica, whatever it subscribes to.
func (h *websocketHandlers) test(c *gin.Context) {
	id := c.Param("id")
	eventID, err := h.svc.TestWebSocketConfig(c.Request.Context(), caller(c), id)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusAccepted, gin.H{"eventId": eventID, "event": events.WebSocketTest, "configId": id})
}

// connect answers GET /ws?id=&token=: the upgrade to the live channel (SPEC 4), once
// service.LiveCaller and service.AdmitLive have admitted the token to the config. Every
// refusal is an HTTP answer before the upgrade: 401 for a missing or bad token, 403 for a
// token of another organisation or app or of a kind that cannot connect, 404 for an
// unknown config.
func (h *websocketHandlers) connect(c *gin.Context) {
	token := c.Query("token")
	if token == "" {
		token = bearerToken(c.GetHeader("Authorization"))
	}
	if token == "" {
		fail(c, apitypes.CodeUnauthenticated, "Pass a key or access token as ?token=… (or 'Authorization: Bearer …').")
		return
	}
	ctx := c.Request.Context()
	p, err := service.LiveCaller(ctx, h.authn, token)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.Set(principalContextKey, p)
	if h.limit(c); c.IsAborted() {
		return
	}
	if h.knownQuery(c); c.IsAborted() {
		return
	}
	sub, to, err := h.svc.AdmitLive(ctx, p, c.Query("id"))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	if h.live == nil {
		fail(c, apitypes.CodeUnavailable, "The live channel is not served by this process.")
		return
	}
	header := http.Header{}
	header.Set(correlationHeader, correlationID(c))
	if err := h.live.Serve(c.Writer, c.Request, sub, to, header); err != nil {
		if !c.Writer.Written() {
			fail(c, apitypes.CodeUnavailable, "The server is restarting; reconnect.")
			return
		}
		h.log.Debug("websocket upgrade failed", "configId", sub.ID, "correlationId", correlationID(c), "error", err)
	}
}
