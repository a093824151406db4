package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"
)

// Notifier is a database with notification channels (PostgreSQL LISTEN/NOTIFY).
type Notifier interface {
	Notify(ctx context.Context, channel, payload string) error
	Listen(ctx context.Context, channels []string, onNotify func(channel, payload string), onReconnect func(aliveAt time.Time)) error
}

// resyncMargin covers events whose occurredAt was stamped before their transaction
// committed, and clocks of other processes a little behind.
const resyncMargin = 10 * time.Second

// PostgresBus is the bus of several processes sharing one PostgreSQL database: every
// transaction that appends an event notifies eventsChannel on commit; control messages go
// on controlChannel. No broker besides the database is needed. A notification lost while
// the listening connection was down is made up for by a ResyncSince notice.
type PostgresBus struct {
	db                            Notifier
	eventsChannel, controlChannel string
	log                           *slog.Logger
	local                         LocalBus
}

// NewPostgresBus builds a bus over db's channels. Run must be running for subscribers
// to hear anything.
func NewPostgresBus(db Notifier, eventsChannel, controlChannel string, log *slog.Logger) *PostgresBus {
	return &PostgresBus{db: db, eventsChannel: eventsChannel, controlChannel: controlChannel, log: log,
		local: LocalBus{subs: map[int]func(Notice){}}}
}

// Run listens until ctx ends.
func (b *PostgresBus) Run(ctx context.Context) error {
	return b.db.Listen(ctx, []string{b.eventsChannel, b.controlChannel}, b.notified, func(aliveAt time.Time) {
		b.log.Warn("event bus reconnected; re-reading events of the gap", "since", aliveAt.Add(-resyncMargin))
		b.local.deliver(Notice{ResyncSince: aliveAt.Add(-resyncMargin)})
	})
}

func (b *PostgresBus) notified(channel, payload string) {
	switch channel {
	case b.eventsChannel:
		b.local.deliver(Notice{EventIDs: []string{payload}})
	case b.controlChannel:
		var c Control
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			b.log.Error("event bus: unreadable control message", "error", err)
			return
		}
		b.local.deliver(Notice{Control: &c})
	}
}

// Publish notifies every listening process, this one included.
func (b *PostgresBus) Publish(ctx context.Context, c Control) error {
	payload, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return b.db.Notify(ctx, b.controlChannel, string(payload))
}

// Subscribe registers fn.
func (b *PostgresBus) Subscribe(fn func(Notice)) func() { return b.local.Subscribe(fn) }
