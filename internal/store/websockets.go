package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"github.com/opentreasury/treasury/internal/events"
)

// WebSocketConfig says which events of an app a live connection receives.
type WebSocketConfig struct {
	ID        string
	OrgID     string
	App       string
	Events    string
	Enabled   bool
	Creator   `gorm:"embedded"`
	CreatedAt time.Time
	DeletedAt *time.Time
}

func (WebSocketConfig) TableName() string { return "websocket_configs" }

// EventList returns the subscription entries.
func (c *WebSocketConfig) EventList() []string {
	if c.Events == "" {
		return nil
	}
	return strings.Split(c.Events, ",")
}

// Subscription is the config as the live channel matches events against it.
func (c *WebSocketConfig) Subscription() events.Subscription {
	return events.Subscription{ID: c.ID, OrgID: c.OrgID, App: c.App, Entries: c.EventList(), Enabled: c.Enabled}
}

// WebSocketSubscription returns a config's subscription, or nil when the config is
// deleted or unknown.
func (s *Store) WebSocketSubscription(ctx context.Context, id string) (*events.Subscription, error) {
	c, err := s.WebSocketConfigByID(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && c.DeletedAt != nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sub := c.Subscription()
	return &sub, nil
}

// WebSocketDelivery is one row of a config's delivery log.
type WebSocketDelivery struct {
	ConfigID string
	EventID  string
	Event    string
	SentAt   time.Time
}

func (WebSocketDelivery) TableName() string { return "websocket_deliveries" }

type websocketPresence struct {
	ReplicaID   string
	ConfigID    string
	Connections int
	UpdatedAt   time.Time
}

func (websocketPresence) TableName() string { return "websocket_presence" }

// DeliveryLogSize is how many deliveries each config's log keeps (SPEC 8).
const DeliveryLogSize = 5

// CreateWebSocketConfig stores a new config.
func (s *Store) CreateWebSocketConfig(ctx context.Context, c *WebSocketConfig) error {
	return s.with(ctx).Create(c).Error
}

// WebSocketConfig returns a live (not deleted) config of an organisation.
func (s *Store) WebSocketConfig(ctx context.Context, orgID, id string) (*WebSocketConfig, error) {
	var c WebSocketConfig
	err := s.with(ctx).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID).Take(&c).Error
	return &c, notFound(err)
}

// WebSocketConfigByID returns a config whatever its organisation, deleted ones included.
func (s *Store) WebSocketConfigByID(ctx context.Context, id string) (*WebSocketConfig, error) {
	var c WebSocketConfig
	err := s.with(ctx).Where("id = ?", id).Take(&c).Error
	return &c, notFound(err)
}

// ListWebSocketConfigs returns the live configs of an organisation's app, oldest first.
func (s *Store) ListWebSocketConfigs(ctx context.Context, orgID, app string) ([]WebSocketConfig, error) {
	var out []WebSocketConfig
	err := s.with(ctx).Where("org_id = ? AND app = ? AND deleted_at IS NULL", orgID, app).Order("id").Find(&out).Error
	return out, err
}

// SetWebSocketConfigEnabled turns a config on or off.
func (s *Store) SetWebSocketConfigEnabled(ctx context.Context, orgID, id string, enabled bool) error {
	res := s.with(ctx).Model(&WebSocketConfig{}).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID).
		Update("enabled", enabled)
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrNotFound
	}
	return res.Error
}

// DeleteWebSocketConfig marks a config deleted; its delivery log goes with it.
func (s *Store) DeleteWebSocketConfig(ctx context.Context, orgID, id string, at time.Time) error {
	res := s.with(ctx).Model(&WebSocketConfig{}).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID).
		Updates(map[string]any{"deleted_at": at.UTC(), "enabled": false})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return s.with(ctx).Where("config_id = ?", id).Delete(&WebSocketDelivery{}).Error
}

// RecordWebSocketDeliveries adds rows to delivery logs (a row already there, written by
// another replica, is kept as it is) and trims each touched log to its newest rows. Rows
// of deleted configs are dropped. Every replica takes its locks in (config, event) order,
// so two replicas writing at once wait for each other instead of deadlocking.
func (s *Store) RecordWebSocketDeliveries(ctx context.Context, rows []WebSocketDelivery) error {
	if len(rows) == 0 {
		return nil
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b WebSocketDelivery) int {
		return cmp.Or(cmp.Compare(a.ConfigID, b.ConfigID), cmp.Compare(a.EventID, b.EventID))
	})
	return s.Tx(ctx, func(tx *Store) error {
		var live []string
		configIDs := make([]string, 0, len(rows))
		for _, r := range rows {
			if len(configIDs) == 0 || configIDs[len(configIDs)-1] != r.ConfigID {
				configIDs = append(configIDs, r.ConfigID)
			}
		}
		err := tx.with(ctx).Model(&WebSocketConfig{}).Where("id IN ? AND deleted_at IS NULL", configIDs).Order("id").
			Pluck("id", &live).Error
		if err != nil {
			return err
		}
		rows = slices.DeleteFunc(rows, func(r WebSocketDelivery) bool { return !slices.Contains(live, r.ConfigID) })
		if len(rows) == 0 {
			return nil
		}
		if err := tx.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
			return err
		}
		for _, id := range live {
			keep := tx.with(ctx).Model(&WebSocketDelivery{}).Select("event_id").Where("config_id = ?", id).
				Order("sent_at DESC, event_id DESC").Limit(DeliveryLogSize)
			err := tx.with(ctx).Where("config_id = ? AND event_id NOT IN (?)", id, keep).Delete(&WebSocketDelivery{}).Error
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// WebSocketDeliveryLogs returns each config's delivery log, newest first.
func (s *Store) WebSocketDeliveryLogs(ctx context.Context, configIDs []string) (map[string][]WebSocketDelivery, error) {
	out := map[string][]WebSocketDelivery{}
	if len(configIDs) == 0 {
		return out, nil
	}
	var rows []WebSocketDelivery
	err := s.with(ctx).Where("config_id IN ?", configIDs).Order("config_id, sent_at DESC, event_id DESC").Find(&rows).Error
	for _, r := range rows {
		if len(out[r.ConfigID]) < DeliveryLogSize {
			out[r.ConfigID] = append(out[r.ConfigID], r)
		}
	}
	return out, err
}

// SetWebSocketPresence replaces what one API replica reports of its live connections per
// config.
func (s *Store) SetWebSocketPresence(ctx context.Context, replicaID string, counts map[string]int, at time.Time) error {
	return s.Tx(ctx, func(tx *Store) error {
		if err := tx.with(ctx).Where("replica_id = ?", replicaID).Delete(&websocketPresence{}).Error; err != nil {
			return err
		}
		rows := make([]websocketPresence, 0, len(counts))
		for id, n := range counts {
			if n > 0 {
				rows = append(rows, websocketPresence{ReplicaID: replicaID, ConfigID: id, Connections: n, UpdatedAt: at.UTC()})
			}
		}
		if len(rows) == 0 {
			return nil
		}
		return tx.with(ctx).Create(&rows).Error
	})
}

// WebSocketPresence sums the live connections per config that replicas other than
// exceptReplica reported since freshAfter.
func (s *Store) WebSocketPresence(ctx context.Context, configIDs []string, exceptReplica string, freshAfter time.Time) (map[string]int, error) {
	out := map[string]int{}
	if len(configIDs) == 0 {
		return out, nil
	}
	var rows []websocketPresence
	err := s.with(ctx).Where("config_id IN ? AND replica_id <> ? AND updated_at > ?", configIDs, exceptReplica, freshAfter.UTC()).
		Find(&rows).Error
	for _, r := range rows {
		out[r.ConfigID] += r.Connections
	}
	return out, err
}

// DeleteStalePresence removes presence rows not refreshed since cutoff (replicas gone).
func (s *Store) DeleteStalePresence(ctx context.Context, cutoff time.Time) error {
	return s.with(ctx).Where("updated_at < ?", cutoff.UTC()).Delete(&websocketPresence{}).Error
}
