package events

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Subscriber is what takes committed events from a Follower: the live channel's hub, the
// webhook dispatcher. Its methods are called from the follower's goroutine, one at a time.
type Subscriber interface {
	// Wants reports whether the subscriber has anywhere to deliver events now. While no
	// subscriber wants them the outbox is not read at all, so that an idle API process
	// costs the order path nothing.
	Wants() bool
	// Events hands over committed events, each once, in the order they occurred.
	Events(ctx context.Context, evs []Event)
	// Control hands over a control message from another process (or this one).
	Control(ctx context.Context, c *Control)
	// Resynced says that notices may have been lost (the bus reconnected, or the follower
	// fell behind): state kept from control messages should be read again. The events of
	// the gap follow, through Events.
	Resynced(ctx context.Context)
}

// Waker is a subscriber that only needs to know that events were committed, not which
// ones: it is told without the outbox being read for it (the webhook dispatcher, whose
// deliveries were queued in the events' own transactions).
type Waker interface {
	Committed()
}

// maxBatch bounds how many notices the follower takes up at once.
const maxBatch = 512

// resyncLimit is the page size of a re-read after notices were lost.
const resyncLimit = 1000

// Follower follows the outbox for the subscribers of one process. The bus says which
// events were committed (by id, from this process's transactions and, on PostgreSQL,
// from every process's); the follower batches those notices, reads the events by id, and
// hands each to every subscriber once. When notices may have been lost it re-reads the
// events committed since the gap, and de-duplicates them against those already handed on.
type Follower struct {
	bus    Bus
	outbox Outbox
	log    *slog.Logger

	inbox chan Notice
	// droppedSince is when (unix ns, less a margin) the inbox first overflowed since the
	// follower last caught up; 0 when nothing was dropped.
	droppedSince atomic.Int64
	seen         *recentSet

	mu   sync.RWMutex
	subs map[int]Subscriber
	next int
}

// NewFollower builds a follower of outbox over bus; Run starts it.
func NewFollower(bus Bus, outbox Outbox, log *slog.Logger) *Follower {
	return &Follower{bus: bus, outbox: outbox, log: log, inbox: make(chan Notice, 4096),
		seen: newRecentSet(20000), subs: map[int]Subscriber{}}
}

// Subscribe adds a subscriber until the returned function is called.
func (f *Follower) Subscribe(s Subscriber) (unsubscribe func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.next
	f.next++
	f.subs[id] = s
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, id)
	}
}

// Run listens to the bus and hands events on until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	unsubscribe := f.bus.Subscribe(func(n Notice) {
		select {
		case f.inbox <- n:
		default:
			// The follower is far behind. Rather than block the bus, remember the earliest
			// moment something was dropped: the follower re-reads events since then, and
			// subscribers re-read what control messages told them (those were lost too).
			since := time.Now().Add(-resyncMargin).UnixNano()
			if f.droppedSince.CompareAndSwap(0, since) {
				f.log.Warn("event follower inbox full; events will be re-read from the outbox")
			}
		}
	})
	defer unsubscribe()
	for {
		var first Notice
		select {
		case <-ctx.Done():
			return
		case first = <-f.inbox:
		}
		f.handle(ctx, f.take(first))
	}
}

// take adds to first the notices already waiting, up to maxBatch.
func (f *Follower) take(first Notice) []Notice {
	batch := []Notice{first}
	for len(batch) < maxBatch {
		select {
		case n := <-f.inbox:
			batch = append(batch, n)
		default:
			return batch
		}
	}
	return batch
}

// handle passes on a batch: control messages first, in order, then a re-read of a gap
// (it holds the older events, so an order's events still arrive in sequence), then the
// events notified, read from the outbox by id.
func (f *Follower) handle(ctx context.Context, batch []Notice) {
	subs := f.subscribers()
	var eventIDs []string
	var resync time.Time
	if v := f.droppedSince.Swap(0); v != 0 {
		resync = time.Unix(0, v)
	}
	for _, n := range batch {
		switch {
		case n.Control != nil:
			for _, s := range subs {
				s.Control(ctx, n.Control)
			}
		case !n.ResyncSince.IsZero():
			if resync.IsZero() || n.ResyncSince.Before(resync) {
				resync = n.ResyncSince
			}
		default:
			for _, id := range n.EventIDs {
				if !f.seen.has(id) {
					eventIDs = append(eventIDs, id)
				}
			}
		}
	}
	committed := len(eventIDs) > 0 || !resync.IsZero()
	var wanting []Subscriber
	for _, s := range subs {
		if w, ok := s.(Waker); ok && committed {
			w.Committed()
		}
		if s.Wants() {
			wanting = append(wanting, s)
		}
	}
	if len(wanting) == 0 {
		return
	}
	if !resync.IsZero() {
		for _, s := range wanting {
			s.Resynced(ctx)
		}
		f.resync(ctx, wanting, resync)
	}
	if len(eventIDs) > 0 {
		f.deliver(ctx, wanting, func(ctx context.Context) ([]Event, error) { return f.outbox.EventsByID(ctx, eventIDs) })
	}
}

func (f *Follower) subscribers() []Subscriber {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Subscriber, 0, len(f.subs))
	for _, s := range f.subs {
		out = append(out, s)
	}
	return out
}

// resync hands on the events that occurred since a moment and were not handed on yet,
// a page at a time.
func (f *Follower) resync(ctx context.Context, subs []Subscriber, since time.Time) {
	for ctx.Err() == nil {
		var page []Event
		f.deliver(ctx, subs, func(ctx context.Context) ([]Event, error) {
			var err error
			page, err = f.outbox.EventsSince(ctx, since, resyncLimit)
			return page, err
		})
		if len(page) < resyncLimit || !page[len(page)-1].OccurredAt.After(since) {
			return
		}
		since = page[len(page)-1].OccurredAt
	}
}

// deliver reads events (retrying a database blip for a while) and hands on those not
// handed on before.
func (f *Follower) deliver(ctx context.Context, subs []Subscriber, read func(context.Context) ([]Event, error)) {
	var (
		list []Event
		err  error
	)
	for attempt, wait := 0, 50*time.Millisecond; attempt < 8; attempt, wait = attempt+1, 2*wait {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		list, err = read(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			f.log.Error("event follower: events unreadable; they are not handed on", "error", err)
		}
		return
	}
	fresh := list[:0]
	for i := range list {
		if f.seen.add(list[i].ID) {
			fresh = append(fresh, list[i])
		}
	}
	if len(fresh) == 0 {
		return
	}
	for _, s := range subs {
		s.Events(ctx, fresh)
	}
}

// recentSet remembers the last n event ids handed on, so that an event announced twice
// (by this process's commit hook and by the database, or by a notice and a re-read)
// reaches subscribers once.
type recentSet struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	ring []string
	next int
}

func newRecentSet(n int) *recentSet {
	return &recentSet{ids: make(map[string]struct{}, n), ring: make([]string, n)}
}

func (s *recentSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}

// add records id and reports whether it was new.
func (s *recentSet) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		return false
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.ids[id] = struct{}{}
	return true
}
