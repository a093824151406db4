package events

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Control kinds: what else, besides committed events, every API process must hear of.
const (
	// ControlConfig: a WebSocket config was changed or deleted; reload it.
	ControlConfig = "config"
	// ControlCredentialRevoked: a key or OAuth client was revoked; close its connections.
	ControlCredentialRevoked = "credential_revoked"
	// ControlOrgDisabled: the operator disabled an organisation; refuse its credentials
	// and close its connections.
	ControlOrgDisabled = "org_disabled"
	// ControlTest: deliver a websocket.test event to every connection of a config.
	ControlTest = "test"
	// ControlWebhooksQueued: webhook deliveries were queued outside an event's commit (a
	// test message, a redelivery); the dispatchers look for them now.
	ControlWebhooksQueued = "webhooks_queued"
)

// Control is a message that API processes send each other through the bus.
type Control struct {
	Kind         string `json:"kind"`
	OrgID        string `json:"orgId,omitempty"`
	ConfigID     string `json:"configId,omitempty"`
	CredentialID string `json:"credentialId,omitempty"`
	// Event is the test event's data (ControlTest).
	Event json.RawMessage `json:"event,omitempty"`
	// Origin is the publishing process's bus, set by the bus.
	Origin string `json:"origin,omitempty"`
}

// Notice is one thing the bus delivers to a subscriber. Exactly one field is set.
type Notice struct {
	// EventIDs are events just committed to the outbox; read them from the store by id.
	EventIDs []string
	Control  *Control
	// ResyncSince is set after the bus lost its connection: events committed since that
	// time may have been missed and should be read again (and deduplicated).
	ResyncSince time.Time
}

// Bus carries notices to every subscribed API process. Publishing is at most once per
// process; the outbox is the durable record and notices only say where to look.
type Bus interface {
	// Publish sends a control message to every subscriber, this process included.
	Publish(ctx context.Context, c Control) error
	// Subscribe calls fn for every notice until the returned function is called. fn is
	// called from one goroutine at a time and must not block for long.
	Subscribe(fn func(Notice)) (unsubscribe func())
}

// LocalBus is the bus of a single process (the dev bundle on SQLite): the store tells it
// about committed events, and it hands them to subscribers in the same process.
type LocalBus struct {
	mu   sync.Mutex
	subs map[int]func(Notice)
	next int
}

// NewLocalBus returns an empty in-process bus.
func NewLocalBus() *LocalBus { return &LocalBus{subs: map[int]func(Notice){}} }

// Committed is the store's after-commit hook: it announces events now in the outbox.
func (b *LocalBus) Committed(eventIDs []string) {
	if len(eventIDs) > 0 {
		b.deliver(Notice{EventIDs: eventIDs})
	}
}

// Publish delivers c to every subscriber.
func (b *LocalBus) Publish(_ context.Context, c Control) error {
	b.deliver(Notice{Control: &c})
	return nil
}

func (b *LocalBus) deliver(n Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, fn := range b.subs {
		fn(n)
	}
}

// Subscribe registers fn.
func (b *LocalBus) Subscribe(fn func(Notice)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	b.subs[id] = fn
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs, id)
	}
}
