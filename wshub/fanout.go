package wshub

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/internal/events"
)

// subscriber takes the follower's events and control messages for the hub.
type subscriber struct{ h *Hub }

// Wants: with no live connection on this replica there is nobody to deliver to.
func (s subscriber) Wants() bool {
	s.h.mu.RLock()
	defer s.h.mu.RUnlock()
	return len(s.h.configs) > 0
}

func (s subscriber) Events(_ context.Context, evs []events.Event) {
	for i := range evs {
		s.h.fanOut(&evs[i])
	}
}

func (s subscriber) Control(ctx context.Context, c *events.Control) { s.h.control(ctx, c) }

// Resynced: control messages may have been lost with the notices, so every live config
// and credential is read again.
func (s subscriber) Resynced(ctx context.Context) { s.h.recheckAll(ctx) }

// fanOut offers an event to every matching connection: configs of the event's
// organisation and app whose entries select it.
func (h *Hub) fanOut(ev *events.Event) {
	// Only the follower's goroutine fans out, so one list serves every event: at 10,000
	// connections it would otherwise be 160 KB of garbage an event.
	to := h.fanOutList[:0]
	defer func() { clear(to); h.fanOutList = to[:0] }()
	var wire []byte
	h.mu.RLock()
	for _, lc := range h.configs {
		wants := lc.sub.Wants(ev)
		devicesOnly := !wants && lc.sub.WantsForDevices(ev)
		if !wants && !devicesOnly {
			continue
		}
		if wire == nil {
			var err error
			if wire, err = eventFrame(ev.Name, events.FormatTime(ev.OccurredAt), ev.Data); err != nil {
				h.mu.RUnlock()
				h.opts.Log.Error("websocket hub: event frame", "eventId", ev.ID, "error", err)
				return
			}
		}
		f := &frame{wire: wire, delivery: &delivery{configID: lc.sub.ID, eventID: ev.ID, event: ev.Name}}
		for _, c := range lc.list() {
			if (c.device || !devicesOnly) && (!c.signingOnly || devicesOnly) && c.reaches(ev.WalletID) {
				to = append(to, offerTo{c, f})
			}
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
// others. It returns once every offer is made, so that the next event's frame
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

// control applies a control message from another process (or this one).
func (h *Hub) control(ctx context.Context, c *events.Control) {
	switch c.Kind {
	case events.ControlConfig:
		h.refreshConfig(ctx, c.ConfigID)
	case events.ControlCredentialRevoked:
		h.credentialRevoked(c.CredentialID)
	case events.ControlOrgDisabled:
		// Rare: each live credential is read again, and those of the organisation close.
		h.recheckAll(ctx)
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
	if lc := h.configs[c.ConfigID]; lc != nil && lc.sub.OrgID == c.OrgID {
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
		h.recorder.Add(Delivery{ConfigID: d.configID, EventID: d.eventID, Event: d.event, SentAt: time.Now().UTC()})
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
