package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/migrations"
)

// ErrNoNotifications means the store's database has no notification channels (SQLite).
var ErrNoNotifications = errors.New("store: notifications need PostgreSQL")

// eventAppended records that the transaction wrote an event, for the after-commit hook.
// On PostgreSQL the transaction also notifies events.EventsChannel with the event's id:
// PostgreSQL delivers a notification only if and when its transaction commits, so a
// listening process hears of every committed event, and of nothing rolled back.
func (s *Store) eventAppended(ctx context.Context, id, name string) error {
	if s.appended != nil {
		*s.appended = append(*s.appended, id)
		*s.appendedNames = append(*s.appendedNames, name)
	}
	if s.dialect != migrations.Postgres {
		return nil
	}
	return s.Notify(ctx, events.EventsChannel, id)
}

// Notify sends payload on a channel to every listener of the database.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if s.dialect != migrations.Postgres {
		return ErrNoNotifications
	}
	return s.with(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error
}

// Record is the event as the outbox's followers receive it.
func (e *Event) Record() events.Event {
	return events.Event{ID: e.ID, Name: e.Event, OrgID: e.OrgID, App: e.App, WalletID: e.WalletID, OrderID: e.OrderID, CorrelationID: e.CorrelationID,
		Data: json.RawMessage(e.Data), OccurredAt: e.OccurredAt}
}

func records(list []Event) []events.Event {
	out := make([]events.Event, len(list))
	for i := range list {
		out[i] = list[i].Record()
	}
	return out
}

// EventsByID returns the stored events with these ids (those that exist), oldest first.
func (s *Store) EventsByID(ctx context.Context, ids []string) ([]events.Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []Event
	err := s.with(ctx).Where("id IN ?", ids).Order("occurred_at, id").Find(&out).Error
	return records(out), err
}

// EventsSince returns the events that occurred at or after since, oldest first, at most limit.
func (s *Store) EventsSince(ctx context.Context, since time.Time, limit int) ([]events.Event, error) {
	var out []Event
	err := s.with(ctx).Where("occurred_at >= ?", since.UTC()).Order("occurred_at, id").Limit(limit).Find(&out).Error
	return records(out), err
}
