package service

import (
	"context"
	"errors"
	"strings"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
)

// WebSocketConfig is a config as the WebSockets page shows it: with its live connections
// (on every replica) and its delivery log.
type WebSocketConfig struct {
	*store.WebSocketConfig
	LiveConnections int
	DeliveryLog     []store.WebSocketDelivery
}

// withLive adds live connections and delivery logs to configs.
func (s *Service) withLive(ctx context.Context, configs []store.WebSocketConfig) ([]WebSocketConfig, error) {
	configIDs := make([]string, len(configs))
	for i := range configs {
		configIDs[i] = configs[i].ID
	}
	logs, err := s.Store.WebSocketDeliveryLogs(ctx, configIDs)
	if err != nil {
		return nil, err
	}
	live := map[string]int{}
	if s.Live != nil {
		live = s.Live.LiveConnections(ctx, configIDs)
	}
	out := make([]WebSocketConfig, len(configs))
	for i := range configs {
		out[i] = WebSocketConfig{WebSocketConfig: &configs[i], LiveConnections: live[configs[i].ID], DeliveryLog: logs[configs[i].ID]}
	}
	return out, nil
}

// ListWebSocketConfigs pages through the caller's app's configs, oldest first.
func (s *Service) ListWebSocketConfigs(ctx context.Context, who Caller, pg Page) ([]WebSocketConfig, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	configs, err := s.Store.ListWebSocketConfigs(ctx, who.OrgID, who.App)
	if err != nil {
		return nil, "", err
	}
	configs, next := pageOf(configs, pg, false, func(cfg *store.WebSocketConfig) string { return cfg.ID })
	list, err := s.withLive(ctx, configs)
	return list, next, err
}

// config reads a config of the caller's app; another app's or organisation's is not found.
func (s *Service) config(ctx context.Context, who Caller, id string) (*store.WebSocketConfig, error) {
	if err := developer(who); err != nil {
		return nil, err
	}
	cfg, err := s.Store.WebSocketConfig(ctx, who.OrgID, id)
	return ofOwnApp(who, "WebSocket config", cfg, err, func(cfg *store.WebSocketConfig) string { return cfg.App })
}

// live is one config with its live connections and delivery log.
func (s *Service) live(ctx context.Context, cfg *store.WebSocketConfig) (*WebSocketConfig, error) {
	out, err := s.withLive(ctx, []store.WebSocketConfig{*cfg})
	if err != nil {
		return nil, err
	}
	return &out[0], nil
}

// GetWebSocketConfig reads one config of the caller's app.
func (s *Service) GetWebSocketConfig(ctx context.Context, who Caller, id string) (*WebSocketConfig, error) {
	cfg, err := s.config(ctx, who, id)
	if err != nil {
		return nil, err
	}
	return s.live(ctx, cfg)
}

// CreateWebSocketConfig registers a config of the caller's app for the events its entries
// name (SPEC 3.8).
func (s *Service) CreateWebSocketConfig(ctx context.Context, who Caller, entries []string) (*WebSocketConfig, error) {
	if err := developer(who); err != nil {
		return nil, err
	}
	normal, err := events.NormalizeEntries(entries)
	if err != nil {
		return nil, invalid(field("events", err.Error()))
	}
	cfg := &store.WebSocketConfig{ID: ids.New(ids.WebSocketConfig), OrgID: who.OrgID, App: who.App,
		Events: strings.Join(normal, ","), Enabled: true, Creator: creatorOf(who), CreatedAt: s.now()}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.CreateWebSocketConfig(ctx, cfg) },
		"websocket_config.created", "websocket_config", cfg.ID, map[string]any{"events": normal})
	if err != nil {
		return nil, err
	}
	return s.live(ctx, cfg)
}

// SetWebSocketConfigEnabled enables or disables a config; disabling closes its live
// connections (4001) on every replica.
func (s *Service) SetWebSocketConfigEnabled(ctx context.Context, who Caller, id string, enabled bool) (*WebSocketConfig, error) {
	cfg, err := s.config(ctx, who, id)
	if err != nil {
		return nil, err
	}
	if cfg.Enabled != enabled {
		err := s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.SetWebSocketConfigEnabled(ctx, cfg.OrgID, cfg.ID, enabled) },
			"websocket_config.updated", "websocket_config", cfg.ID, map[string]any{"enabled": enabled})
		if err != nil {
			return nil, err
		}
		cfg.Enabled = enabled
	}
	// Announced even when nothing changed: a retry after a lost announcement repairs it.
	s.announce(ctx, who, events.Control{Kind: events.ControlConfig, OrgID: cfg.OrgID, ConfigID: cfg.ID})
	return s.live(ctx, cfg)
}

// DeleteWebSocketConfig deletes a config; its live connections close (4004).
func (s *Service) DeleteWebSocketConfig(ctx context.Context, who Caller, id string) error {
	cfg, err := s.config(ctx, who, id)
	if err != nil {
		return err
	}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.DeleteWebSocketConfig(ctx, cfg.OrgID, cfg.ID, s.now()) },
		"websocket_config.deleted", "websocket_config", cfg.ID, nil)
	if errors.Is(err, store.ErrNotFound) {
		return refuse(NotFound, "No WebSocket config with this id.")
	}
	if err != nil {
		return err
	}
	s.announce(ctx, who, events.Control{Kind: events.ControlConfig, OrgID: cfg.OrgID, ConfigID: cfg.ID})
	return nil
}

// TestWebSocketConfig sends a websocket.test event to every live connection of a config,
// on every replica, whatever it subscribes to; it returns the event's id.
func (s *Service) TestWebSocketConfig(ctx context.Context, who Caller, id string) (string, error) {
	cfg, err := s.config(ctx, who, id)
	if err != nil {
		return "", err
	}
	if !cfg.Enabled {
		return "", refuse(Conflict, "The config is disabled; enable it to send a test event.")
	}
	eventID := ids.New(ids.Event)
	raw, err := events.Encode(&events.TestEvent{ID: eventID, Event: events.WebSocketTest, ConfigID: cfg.ID, App: cfg.App,
		CorrelationID: who.CorrelationID, OccurredAt: events.TimeOf(s.now())})
	if err != nil {
		return "", err
	}
	if !s.announce(ctx, who, events.Control{Kind: events.ControlTest, OrgID: cfg.OrgID, ConfigID: cfg.ID, Event: raw}) {
		return "", refuse(Unavailable, "The test event could not be sent; retry.")
	}
	return eventID, nil
}
