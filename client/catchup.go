package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opentreasury/treasury/internal/events"
)

// defaultLookback is as far back as the service's own replicas re-read after a gap in
// their feed, for the same reason: events commit from several processes, so one can
// become visible a moment after events with later ids.
const defaultLookback = 10 * time.Second

// catchUpPageSize is the largest page GET /events gives, so that a catch-up takes as few
// requests as it can.
const catchUpPageSize = 200

// FollowOptions tune FollowEvents; the zero value is fine.
type FollowOptions struct {
	// Options tune the connection and the waits between reconnections.
	Options
	// Token opens the live channel: an sk_, tk_ or pk_ key of the config's app. Empty:
	// the client's key, or with client credentials a fresh access token for each
	// connection. A session cannot open the channel.
	Token string
	// After is the id of the last event already handled, kept from an earlier run
	// (Event.ID): the first connection catches up from there, and no event up to it is
	// delivered. Empty: from the first connection on.
	After string
	// Lookback is how far before the newest event delivered a catch-up reads again (10 s).
	Lookback time.Duration
}

// FollowEvents delivers a config's events to handle, each once, across reconnections. It
// keeps the live channel open as Follow does and, after every reconnection, reads what the
// config missed meanwhile from GET /api/v1/events (cursor=, page by page) with the client's
// credential, which must read the app's events; then it goes on with the live frames.
// Events are told apart by id: one delivered live and found again by a catch-up is
// handled once. Each catch-up delivers in the stored order and reads again from Lookback
// before the newest event delivered, so that an event committed late by another process
// is found too; handle may thus see an order's events slightly out of step, which their
// Sequence puts right. websocket.test events are never stored: they arrive live only.
//
// It returns like Follow: nil when ctx is done or handle returns ErrStop, and otherwise
// the first error it does not recover from. A catch-up that fails for a while (429, 5xx,
// no answer, after the client's retries) counts as a lost connection: FollowEvents
// reconnects and catches up again from the same place.
func (c *Client) FollowEvents(ctx context.Context, configID string, handle func(Event) error, opts *FollowOptions) error {
	var o FollowOptions
	if opts != nil {
		o = *opts
	}
	if o.Lookback <= 0 {
		o.Lookback = defaultLookback
	}
	token := c.cred.channelToken
	if o.Token != "" {
		token = func(context.Context) (string, error) { return o.Token, nil }
	}
	f := &eventFollower{c: c, ctx: ctx, handle: handle, lookback: o.Lookback, after: o.After, delivered: map[string]time.Time{}}
	return followWithTokens(ctx, c.base, configID, token, f.frame, &o.Options)
}

// eventFollower turns the frames of every connection, and the catch-ups between them,
// into one stream of events without repeats.
type eventFollower struct {
	c        *Client
	ctx      context.Context
	handle   func(Event) error
	lookback time.Duration
	// after is the caller's starting point, never read back past.
	after string

	// The config, as the latest connection.ready describes it: a catch-up keeps only the
	// events a live connection would have received.
	entries []string
	app     string

	connections int
	startedAt   time.Time
	// newest is the latest occurredAt delivered; delivered holds the ids a catch-up may
	// still find again, with their occurredAt.
	newest     time.Time
	delivered  map[string]time.Time
	sincePrune int
}

func (f *eventFollower) frame(fr Frame) error {
	switch fr.Type {
	case FrameReady:
		f.connections++
		f.entries, f.app = fr.Events, fr.Scope
		if f.connections == 1 {
			f.startedAt = time.Now()
			if f.after == "" {
				return nil // nothing was missed yet
			}
		}
		return f.catchUp()
	case FrameEvent:
		var ev Event
		if err := json.Unmarshal(fr.Data, &ev); err != nil {
			return fmt.Errorf("client: the data of a %s frame: %w", printable(fr.Event), err)
		}
		if ev.Event == "" {
			ev.Event = fr.Event
		}
		return f.deliver(ev)
	}
	return nil
}

// catchUp delivers the stored events the config missed, oldest first.
func (f *eventFollower) catchUp() error {
	for ev, err := range f.c.Events(f.ctx, EventFilter{Cursor: f.cursor(), Limit: catchUpPageSize}) {
		if err != nil {
			if f.ctx.Err() != nil {
				return ErrStop
			}
			if temporary(err) {
				return &NetworkError{Op: "catch up from GET /events", Err: err}
			}
			return fmt.Errorf("catch up from GET /events: %w", err)
		}
		if !f.subscribed(ev) {
			continue
		}
		if err := f.deliver(ev); err != nil {
			return err
		}
	}
	return nil
}

// cursor is where a catch-up starts reading: Lookback before the newest event delivered
// (or before the first connection, when none was), never before the caller's After.
func (f *eventFollower) cursor() string {
	since := f.newest
	if since.IsZero() && f.after == "" {
		since = f.startedAt
	}
	if since.IsZero() {
		return f.after
	}
	return max(f.after, eventIDAt(since.Add(-f.lookback)))
}

// eventIDAt is an id that sorts before the id of every event made at t or later, for
// GET /events' cursor, which compares ids as strings. Event ids are evt_ and the 32 hex
// digits of a UUIDv7 (SPEC 2; ids.New), whose first 12 are its unix time in milliseconds.
func eventIDAt(t time.Time) string {
	return fmt.Sprintf("evt_%012x%020d", max(t.UnixMilli(), 0), 0)
}

// subscribed reports whether the config receives ev: its name matches an entry, and an
// order's event is of the config's app. The REST credential's reach is checked by the
// service; this keeps a catch-up to what the live channel would have delivered.
func (f *eventFollower) subscribed(ev Event) bool {
	return events.Matches(f.entries, ev.Event) && (ev.Domain == "" || Domain(ev.Domain).App() == f.app)
}

func (f *eventFollower) deliver(ev Event) error {
	if ev.ID != "" {
		if _, seen := f.delivered[ev.ID]; seen {
			return nil
		}
		f.delivered[ev.ID] = ev.OccurredAt.Time
	}
	if ev.OccurredAt.After(f.newest) {
		f.newest = ev.OccurredAt.Time
	}
	f.prune()
	return f.handle(ev)
}

// prune forgets, now and then, the ids no catch-up can reach any more: those well before
// the newest event less Lookback (ids and occurredAt are taken at one moment, nearly).
func (f *eventFollower) prune() {
	if f.sincePrune++; f.sincePrune < 256 {
		return
	}
	f.sincePrune = 0
	horizon := f.newest.Add(-2 * f.lookback)
	for id, at := range f.delivered {
		if at.Before(horizon) {
			delete(f.delivered, id)
		}
	}
}
