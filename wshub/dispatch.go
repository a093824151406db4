package wshub

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/store"
)

// maxBatch bounds how many notices the dispatcher takes up at once.
const maxBatch = 512

// resyncLimit is the page size of a re-read after the bus lost its connection.
const resyncLimit = 1000

// resyncMargin covers events stamped a little before the moment something was dropped.
const resyncMargin = 10 * time.Second

// dispatch takes notices off the bus one batch at a time: control messages first, then
// the batch's events, read from the outbox by id, in the order they occurred.
func (h *Hub) dispatch(ctx context.Context) {
	for {
		var first events.Notice
		select {
		case <-ctx.Done():
			return
		case first = <-h.inbox:
		}
		batch := []events.Notice{first}
	more:
		for len(batch) < maxBatch {
			select {
			case n := <-h.inbox:
				batch = append(batch, n)
			default:
				break more
			}
		}
		var eventIDs []string
		var resync time.Time
		if v := h.droppedSince.Swap(0); v != 0 {
			resync = time.Unix(0, v)
		}
		for _, n := range batch {
			switch {
			case n.Control != nil:
				h.control(ctx, n.Control)
			case !n.ResyncSince.IsZero():
				if resync.IsZero() || n.ResyncSince.Before(resync) {
					resync = n.ResyncSince
				}
			default:
				for _, id := range n.EventIDs {
					if !h.seen.has(id) {
						eventIDs = append(eventIDs, id)
					}
				}
			}
		}
		// With no live connection on this replica there is nobody to deliver to: the
		// outbox is not read at all, so an idle API process costs the order path nothing.
		if h.idle() {
			continue
		}
		// A re-read goes first: it holds the older events, so an order's events still
		// arrive in sequence; the notified ones it covers are then skipped as seen.
		if !resync.IsZero() {
			h.recheckAll(ctx)
			h.resync(ctx, resync)
		}
		if len(eventIDs) > 0 {
			h.deliverEvents(ctx, func(ctx context.Context) ([]store.Event, error) {
				return h.opts.Store.EventsByID(ctx, eventIDs)
			})
		}
	}
}

func (h *Hub) idle() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.configs) == 0
}

// resync delivers the events that occurred since a moment and were not delivered yet,
// a page at a time.
func (h *Hub) resync(ctx context.Context, since time.Time) {
	for ctx.Err() == nil {
		var page []store.Event
		h.deliverEvents(ctx, func(ctx context.Context) ([]store.Event, error) {
			var err error
			page, err = h.opts.Store.EventsSince(ctx, since, resyncLimit)
			return page, err
		})
		if len(page) < resyncLimit || !page[len(page)-1].OccurredAt.After(since) {
			return
		}
		since = page[len(page)-1].OccurredAt
	}
}

// deliverEvents reads events (retrying a database blip for a while) and fans out those
// not delivered before.
func (h *Hub) deliverEvents(ctx context.Context, read func(context.Context) ([]store.Event, error)) {
	var (
		list []store.Event
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
			h.opts.Log.Error("websocket hub: events unreadable; they are not delivered live", "error", err)
		}
		return
	}
	for i := range list {
		if h.seen.add(list[i].ID) {
			h.fanOut(&list[i])
		}
	}
}

// fanOut offers an event to every matching connection: configs of the event's
// organisation and app whose entries select it.
func (h *Hub) fanOut(ev *store.Event) {
	// Only the dispatcher fans out, so one list serves every event: at 10,000
	// connections it would otherwise be 160 KB of garbage an event.
	to := h.fanOutList[:0]
	defer func() { clear(to); h.fanOutList = to[:0] }()
	var wire []byte
	h.mu.RLock()
	for _, lc := range h.configs {
		if lc.cfg.OrgID != ev.OrgID || lc.cfg.App != ev.App || !lc.cfg.Enabled || !events.Matches(lc.match, ev.Event) {
			continue
		}
		if wire == nil {
			var err error
			if wire, err = eventFrame(ev.Event, store.FormatTime(ev.OccurredAt), json.RawMessage(ev.Data)); err != nil {
				h.mu.RUnlock()
				h.opts.Log.Error("websocket hub: event frame", "eventId", ev.ID, "error", err)
				return
			}
		}
		f := &frame{wire: wire, delivery: &delivery{configID: lc.cfg.ID, eventID: ev.ID, event: ev.Event}}
		for _, c := range lc.list() {
			to = append(to, offerTo{c, f})
		}
	}
	h.mu.RUnlock()
	h.offerAll(to)
}

// offerTo is one frame for one connection.
type offerTo struct {
	c *conn
	f *frame
}

// offerAll makes every offer, on one goroutine per core, since each offer is a system
// call's worth of the kernel's work. The offers are taken sendChunk at a time, each chunk
// written with one submission of a send ring where the kernel has them, so that a
// goroutine held up (by the other processes on its core) leaves more of the work to the
// others. It returns once every offer is made, so that the dispatcher's next frame
// reaches each connection after these.
func (h *Hub) offerAll(to []offerTo) {
	if len(to) == 0 {
		return
	}
	workers := min(runtime.GOMAXPROCS(0), (len(to)+sendChunk-1)/sendChunk)
	var next atomic.Int64
	work := func() {
		ring := h.rings.get()
		defer func() { h.rings.put(ring) }()
		for {
			start := int(next.Add(sendChunk)) - sendChunk
			if start >= len(to) {
				return
			}
			chunk := to[start:min(start+sendChunk, len(to))]
			if ring == nil {
				for _, o := range chunk {
					o.c.offer(o.f)
				}
			} else if !offerChunk(ring, chunk) {
				h.rings.discard(ring)
				ring = nil
			}
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// offerEach offers one frame to every connection of a list.
func (h *Hub) offerEach(conns []*conn, f *frame) {
	to := make([]offerTo, len(conns))
	for i, c := range conns {
		to[i] = offerTo{c, f}
	}
	h.offerAll(to)
}

// eventFrame encodes an event frame once for every connection it goes to.
func eventFrame(name, at string, data json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(struct {
		Type  string          `json:"type"`
		Event string          `json:"event"`
		At    string          `json:"at"`
		Data  json.RawMessage `json:"data"`
	}{"event", name, at, data})
	if err != nil {
		return nil, err
	}
	return encodeFrame(websocket.TextMessage, b), nil
}

// control applies a control message from the bus.
func (h *Hub) control(ctx context.Context, c *events.Control) {
	switch c.Kind {
	case events.ControlConfig:
		h.refreshConfig(ctx, c.ConfigID)
	case events.ControlCredentialRevoked:
		h.credentialRevoked(c.CredentialID)
	case events.ControlTest:
		h.sendTest(c)
	}
}

// sendTest delivers a websocket.test event to every connection of its config, whatever
// the config subscribes to.
func (h *Hub) sendTest(c *events.Control) {
	var head struct {
		ID         string `json:"id"`
		OccurredAt string `json:"occurredAt"`
	}
	if err := json.Unmarshal(c.Event, &head); err != nil || head.ID == "" {
		h.opts.Log.Error("websocket hub: unreadable test event", "configId", c.ConfigID)
		return
	}
	wire, err := eventFrame(events.WebSocketTest, head.OccurredAt, c.Event)
	if err != nil {
		return
	}
	f := &frame{wire: wire, delivery: &delivery{configID: c.ConfigID, eventID: head.ID, event: events.WebSocketTest}}
	h.mu.RLock()
	var conns []*conn
	if lc := h.configs[c.ConfigID]; lc != nil && lc.cfg.OrgID == c.OrgID {
		conns = lc.list()
	}
	h.mu.RUnlock()
	h.offerEach(conns, f)
}

// delivery is one event on its way to the connections of one config; the first
// connection that writes it records it in the delivery log.
type delivery struct {
	configID, eventID, event string
	recorded                 atomic.Bool
}

func (h *Hub) delivered(d *delivery) {
	if d == nil {
		return
	}
	// A plain load first: the fan-out's goroutines would otherwise bounce the line between
	// cores with a locked compare-and-swap for every connection.
	if !d.recorded.Load() && d.recorded.CompareAndSwap(false, true) {
		h.recorder.Add(store.WebSocketDelivery{ConfigID: d.configID, EventID: d.eventID, Event: d.event, SentAt: time.Now().UTC()})
	}
}

// presenceFresh is how old another replica's presence report may be and still count.
const presenceFresh = 90 * time.Second

// reportPresence keeps this replica's connection counts in the store: soon after they
// change, and every 30 seconds so that other replicas see it is alive.
func (h *Hub) reportPresence(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last, lastSweep time.Time
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = h.opts.Store.SetWebSocketPresence(dctx, h.replicaID, nil, time.Now())
			cancel()
			return
		case <-tick.C:
		}
		if !h.presence.Swap(false) && time.Since(last) < 30*time.Second {
			continue
		}
		counts := map[string]int{}
		h.mu.RLock()
		for id, lc := range h.configs {
			counts[id] = len(lc.conns)
		}
		h.mu.RUnlock()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := h.opts.Store.SetWebSocketPresence(wctx, h.replicaID, counts, time.Now())
		cancel()
		if err != nil {
			h.presence.Store(true)
			h.opts.Log.Warn("websocket presence not written", "error", err)
			continue
		}
		last = time.Now()
		if last.Sub(lastSweep) > 10*time.Minute {
			lastSweep = last
			_ = h.opts.Store.DeleteStalePresence(ctx, last.Add(-10*presenceFresh))
		}
	}
}

// recentSet remembers the last n event ids delivered, so that an event announced twice
// (a notice and a re-read after a bus reconnection) reaches clients once.
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
