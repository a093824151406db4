package events

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL notification channels of the bus.
const (
	// EventsChannel carries the id of every event committed to the outbox. The store
	// notifies it inside the transaction that appends the event: PostgreSQL delivers a
	// notification only if and when its transaction commits, so a listener never hears
	// of an event it cannot read.
	EventsChannel = "treasury_events"
	// ControlChannel carries control messages between processes (JSON, < 8000 bytes).
	ControlChannel = "treasury_control"
)

// ListenerApplicationName is the application_name of the bus's listening connections,
// so that an operator can tell them apart in pg_stat_activity.
const ListenerApplicationName = "treasury-bus"

// Notifier sends a notification on a channel of the database (the store's pool).
type Notifier interface {
	Notify(ctx context.Context, channel, payload string) error
}

// resyncMargin covers events whose occurredAt was stamped before their transaction
// committed, and clocks of other processes a little behind.
const resyncMargin = 10 * time.Second

// listenCheckInterval bounds how long a dead listening connection goes unnoticed.
const listenCheckInterval = 15 * time.Second

// PostgresBus is the bus of several processes sharing one PostgreSQL database: every
// transaction that appends an event notifies EventsChannel on commit; control messages go
// on ControlChannel. No broker besides the database is needed. A notification lost while
// the listening connection was down is made up for by a ResyncSince notice.
type PostgresBus struct {
	databaseURL string
	db          Notifier
	log         *slog.Logger
	local       LocalBus
	// origin tells this process's control messages apart when they come back.
	origin string
}

// NewPostgresBus builds a bus over the database at databaseURL; db sends its control
// messages. Run must be running for subscribers to hear other processes.
func NewPostgresBus(databaseURL string, db Notifier, log *slog.Logger) *PostgresBus {
	return &PostgresBus{databaseURL: databaseURL, db: db, log: log, local: LocalBus{subs: map[int]func(Notice){}},
		origin: rand.Text()}
}

// Committed is the store's after-commit hook: this process hears of its own events at
// once, without the round trip through the database (the follower drops the echo).
func (b *PostgresBus) Committed(eventIDs []string) { b.local.Committed(eventIDs) }

// Publish delivers c to this process's subscribers before it returns, so that what it
// announces (a revoked key, say) holds here from then on, and notifies every other
// listening process; the copy that comes back through the database is dropped.
func (b *PostgresBus) Publish(ctx context.Context, c Control) error {
	c.Origin = b.origin
	payload, err := json.Marshal(c)
	if err != nil {
		return err
	}
	b.local.deliver(Notice{Control: &c})
	return b.db.Notify(ctx, ControlChannel, string(payload))
}

// Subscribe registers fn.
func (b *PostgresBus) Subscribe(fn func(Notice)) func() { return b.local.Subscribe(fn) }

// Run holds its own connection (outside the store's pool) listening on both channels
// until ctx ends. When the connection is lost it reconnects with backoff and then tells
// subscribers to re-read what they may have missed since it was last known alive.
func (b *PostgresBus) Run(ctx context.Context) error {
	var aliveAt time.Time
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := b.listenOnce(ctx, func() {
			if !aliveAt.IsZero() {
				since := aliveAt.Add(-resyncMargin)
				b.log.Warn("event bus reconnected; re-reading events of the gap", "since", since)
				b.local.deliver(Notice{ResyncSince: since})
			}
			backoff = 100 * time.Millisecond
		}, &aliveAt)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			b.log.Warn("event bus connection lost; reconnecting", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

func (b *PostgresBus) listenOnce(ctx context.Context, connected func(), aliveAt *time.Time) error {
	cfg, err := pgx.ParseConfig(b.databaseURL)
	if err != nil {
		return fmt.Errorf("events: listen: %w", err)
	}
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("events: listen: connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	for _, ch := range []string{EventsChannel, ControlChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("events: listen %s: %w", ch, err)
		}
	}
	connected()
	for {
		*aliveAt = time.Now()
		wctx, cancel := context.WithTimeout(ctx, listenCheckInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			b.notified(n.Channel, n.Payload)
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("events: listen: %w", err)
		}
		// Quiet for a while: prove the connection still works before waiting again.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("events: listen: ping: %w", err)
		}
	}
}

func (b *PostgresBus) notified(channel, payload string) {
	switch channel {
	case EventsChannel:
		b.local.deliver(Notice{EventIDs: []string{payload}})
	case ControlChannel:
		var c Control
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			b.log.Error("event bus: unreadable control message", "error", err)
			return
		}
		if c.Origin == b.origin {
			return // delivered here when it was published
		}
		b.local.deliver(Notice{Control: &c})
	}
}
