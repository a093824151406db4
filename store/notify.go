package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opentreasury/treasury/migrations"
)

// PostgreSQL notification channels of the bus.
const (
	// EventsChannel carries the id of every event committed to the outbox.
	EventsChannel = "treasury_events"
	// ControlChannel carries control messages between API processes (JSON, < 8000 bytes).
	ControlChannel = "treasury_control"
)

// ListenerApplicationName is the application_name of the bus's listening connections.
const ListenerApplicationName = "treasury-bus"

// ErrNoNotifications means the store's database has no notification channels (SQLite).
var ErrNoNotifications = errors.New("store: notifications need PostgreSQL")

// eventAppended records that the transaction wrote an event. On PostgreSQL the
// transaction also notifies EventsChannel: PostgreSQL delivers a notification only if
// and when its transaction commits, so listeners never hear of an event they cannot read.
func (s *Store) eventAppended(ctx context.Context, id string) error {
	if s.appended != nil {
		*s.appended = append(*s.appended, id)
	}
	if s.dialect != migrations.Postgres {
		return nil
	}
	return s.Notify(ctx, EventsChannel, id)
}

// Notify sends payload on a channel to every listener of the database.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if s.dialect != migrations.Postgres {
		return ErrNoNotifications
	}
	return s.with(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error
}

// Listen holds its own connection (outside the pool) listening on channels, and calls
// onNotify for each notification until ctx ends. When the connection is lost it
// reconnects with backoff and then calls onReconnect with the last moment it knew the old
// connection was alive, so the caller can re-read what it may have missed. onNotify and
// onReconnect are called from Listen's goroutine.
func (s *Store) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string), onReconnect func(aliveAt time.Time)) error {
	if s.dialect != migrations.Postgres {
		return ErrNoNotifications
	}
	var aliveAt time.Time
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channels, onNotify, func() {
			if !aliveAt.IsZero() {
				onReconnect(aliveAt)
			}
			backoff = 100 * time.Millisecond
		}, &aliveAt)
		if ctx.Err() != nil {
			break
		}
		if err != nil && s.onListenError != nil {
			s.onListenError(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

// listenCheckInterval bounds how long a dead listening connection goes unnoticed.
const listenCheckInterval = 15 * time.Second

func (s *Store) listenOnce(ctx context.Context, channels []string, onNotify func(channel, payload string), connected func(), aliveAt *time.Time) error {
	cfg, err := pgx.ParseConfig(s.databaseURL)
	if err != nil {
		return fmt.Errorf("store: listen: %w", err)
	}
	// Named, so that an operator can tell the bus's connections apart in pg_stat_activity.
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("store: listen: connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("store: listen %s: %w", ch, err)
		}
	}
	connected()
	for {
		*aliveAt = time.Now()
		wctx, cancel := context.WithTimeout(ctx, listenCheckInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			onNotify(n.Channel, n.Payload)
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("store: listen: %w", err)
		}
		// Quiet for a while: prove the connection still works before waiting again.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("store: listen: ping: %w", err)
		}
	}
}

// EventsByID returns the stored events with these ids (those that exist), oldest first.
func (s *Store) EventsByID(ctx context.Context, ids []string) ([]Event, error) {
	var out []Event
	if len(ids) == 0 {
		return out, nil
	}
	err := s.with(ctx).Where("id IN ?", ids).Order("occurred_at, id").Find(&out).Error
	return out, err
}

// EventsSince returns the events that occurred at or after since, oldest first, at most limit.
func (s *Store) EventsSince(ctx context.Context, since time.Time, limit int) ([]Event, error) {
	var out []Event
	err := s.with(ctx).Where("occurred_at >= ?", since.UTC()).Order("occurred_at, id").Limit(limit).Find(&out).Error
	return out, err
}
