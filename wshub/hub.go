// Package wshub is the live WebSocket channel of SPEC 4: it holds the connections of this
// API process, matches committed events (handed over by an events.Follower) against their
// configs, writes each frame straight into every matching socket (with a bounded backlog
// behind a full one), keeps connections alive, and records the delivery log.
//
// Read hub.go first (the hub, its connections and configs, keepalive), then fanout.go (how
// one event reaches every matching socket) and conn.go (one connection: the direct write,
// the backlog and flusher behind a full socket, the reader). sendbatch.go and
// sendring_linux.go are an optional speed-up, 128 sends per io_uring submission, used where
// the kernel allows it; Options.NoSendRing switches them off, and every frame then takes
// conn.go's plain write. The suite runs both ways.
package wshub

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/internal/batch"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/wshub/closecode"
)

// Store is what the hub keeps in the database: the configs it serves, revocations, the
// delivery log, and the connection counts replicas share.
type Store interface {
	// WebSocketSubscription returns a config, or nil when it is deleted or unknown.
	WebSocketSubscription(ctx context.Context, configID string) (*events.Subscription, error)
	// CredentialRevoked reports whether a key or OAuth client has been revoked.
	CredentialRevoked(ctx context.Context, credentialID string) (bool, error)
	// RecordDeliveries adds rows to the configs' delivery logs.
	RecordDeliveries(ctx context.Context, rows []Delivery) error
	// SetWebSocketPresence stores this replica's connection counts; WebSocketPresence sums
	// the fresh counts of the other replicas; DeleteStalePresence forgets dead replicas.
	SetWebSocketPresence(ctx context.Context, replicaID string, counts map[string]int, at time.Time) error
	WebSocketPresence(ctx context.Context, configIDs []string, exceptReplica string, freshAfter time.Time) (map[string]int, error)
	DeleteStalePresence(ctx context.Context, cutoff time.Time) error
}

// Delivery is one row of a config's delivery log: an event a frame carried to at least
// one of its connections.
type Delivery struct {
	ConfigID string
	EventID  string
	Event    string
	SentAt   time.Time
}

// Options configure a hub. Zero values take the defaults in brackets.
type Options struct {
	Store Store
	// Events hands the hub committed events and control messages.
	Events *events.Follower
	Log    *slog.Logger
	// PingInterval is how often a protocol ping is sent [25 s]; PongWait how long the
	// pong may take [10 s].
	PingInterval, PongWait time.Duration
	// WriteTimeout bounds one frame's write [10 s].
	WriteTimeout time.Duration
	// SendQueue is the frames a connection may have waiting behind a full socket before
	// it is closed as too slow [32].
	SendQueue int
	// SharedPresence writes this replica's connection counts to the store so that every
	// replica reports every replica's connections (several API processes).
	SharedPresence bool
	// NoSendRing writes every frame with a system call of its own, never through an
	// io_uring send ring (see sendbatch.go). The ring is used where the kernel allows it
	// unless this is set.
	NoSendRing bool
}

// Hub holds the live connections of one API process.
type Hub struct {
	opts      Options
	replicaID string
	upgrader  websocket.Upgrader
	pongFrame *frame

	mu      sync.RWMutex
	configs map[string]*liveConfig
	byCred  map[string]map[*conn]struct{}
	stopped bool

	fanOutList   []offerTo // the follower's, reused by every fanOut
	recorder     *batch.Writer[Delivery]
	rings        *sendRings
	presence     atomic.Bool // counts changed since the last presence write
	nextPingSlot atomic.Uint32

	// endedFrames and closes count, under mu, the frames written to connections that have
	// ended and those connections by close code (see Stats).
	endedFrames uint64
	closes      map[int]uint64

	wg          sync.WaitGroup // the hub's own goroutines
	connections sync.WaitGroup // reader and flusher goroutines of every connection
	unsubscribe func()
	cancel      context.CancelFunc
}

// liveConfig is a config with live connections on this replica.
type liveConfig struct {
	sub   events.Subscription
	conns map[*conn]struct{}
	// snapshot lists conns; built on demand and dropped when they change, so a fan-out
	// reads a slice instead of walking the map, and writes outside the hub's lock.
	snapshot atomic.Pointer[[]*conn]
}

// list returns the config's connections. The slice is never modified: callers may keep
// it after they release the hub's lock. Call with h.mu held (read or write); two readers
// may both build it after a change, and either copy is right.
func (lc *liveConfig) list() []*conn {
	if s := lc.snapshot.Load(); s != nil {
		return *s
	}
	s := make([]*conn, 0, len(lc.conns))
	for c := range lc.conns {
		s = append(s, c)
	}
	lc.snapshot.Store(&s)
	return s
}

// New builds a hub; Start subscribes it to the events.
func New(opts Options) *Hub {
	if opts.PingInterval <= 0 {
		opts.PingInterval = 25 * time.Second
	}
	if opts.PongWait <= 0 {
		opts.PongWait = 10 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = 32
	}
	h := &Hub{opts: opts, replicaID: ids.New("rep"), pongFrame: textFrame([]byte(`{"type":"pong"}`)),
		configs: map[string]*liveConfig{}, byCred: map[string]map[*conn]struct{}{}, closes: map[int]uint64{}}
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// Client frames are small: a small read buffer of its own instead of the 4 KiB one
		// of the HTTP server. The library writes nothing after the handshake (see
		// libraryConn), so with a pool it holds no write buffer either.
		ReadBufferSize:  512,
		WriteBufferPool: &sync.Pool{},
		// Any origin: the channel authenticates by the token in its URL, never by cookies,
		// so a page of another origin gains nothing it does not already hold.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	h.rings = &sendRings{log: opts.Log, disabled: opts.NoSendRing}
	if opts.NoSendRing {
		opts.Log.Info("websocket hub: frames are written one system call each", "reason", "the send ring is switched off")
	}
	// Delivery-log rows are written in batches, off the connections' path.
	h.recorder = batch.New("websocket delivery log", 100*time.Millisecond, 1000, opts.Log, opts.Store.RecordDeliveries)
	return h
}

// Start subscribes the hub to the events and starts its background work.
func (h *Hub) Start(ctx context.Context) {
	ctx, h.cancel = context.WithCancel(ctx)
	h.unsubscribe = h.opts.Events.Subscribe(subscriber{h})
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.keepAlive(ctx) }()
	go func() { defer h.wg.Done(); h.recorder.Run(ctx) }()
	if h.opts.SharedPresence {
		h.wg.Add(1)
		go func() { defer h.wg.Done(); h.reportPresence(ctx) }()
	}
}

// Shutdown closes every connection with 1001 and waits for them to end (or ctx). Call it
// before http.Server.Shutdown, which does not track hijacked connections.
func (h *Hub) Shutdown(ctx context.Context) {
	h.mu.Lock()
	h.stopped = true
	var all []*conn
	for _, lc := range h.configs {
		for c := range lc.conns {
			all = append(all, c)
		}
	}
	h.mu.Unlock()
	for _, c := range all {
		c.close(closecode.GoingAway, "server restarting")
	}
	done := make(chan struct{})
	go func() { h.connections.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range all {
			c.end()
		}
	}
	if h.unsubscribe != nil {
		h.unsubscribe()
	}
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	h.rings.closeAll()
}

// socketSendBuffer is the kernel send buffer asked for each connection (Linux doubles it).
const socketSendBuffer = 32 << 10

// pingSlots spreads the keepalive pings over the ping interval: each connection belongs
// to one slot, and each tick pings one slot. Pinging every connection on one tick would
// put a frame into every socket at once, and bring every pong back at once: at 10,000
// connections a burst that held up the events fanned out beside it by 150 – 250 ms.
const pingSlots = 50

// keepAlive offers a protocol ping to each connection once per ping interval: one ticker
// for the hub rather than one per connection, pinging one slot of connections a tick. A
// connection whose backlog is full is too slow and is closed, as for any frame.
func (h *Hub) keepAlive(ctx context.Context) {
	tick := time.NewTicker(max(h.opts.PingInterval/pingSlots, time.Millisecond))
	defer tick.Stop()
	var (
		slot uint32
		due  []*conn
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		slot = (slot + 1) % pingSlots
		due = due[:0]
		h.mu.RLock()
		for _, lc := range h.configs {
			for _, c := range lc.list() {
				if c.pingSlot == slot {
					due = append(due, c)
				}
			}
		}
		h.mu.RUnlock()
		h.offerEach(due, pingFrame)
		clear(due)
	}
}

// ErrStopped means the hub is shutting down and takes no new connections.
var ErrStopped = errors.New("wshub: shutting down")

// Serve upgrades the request and runs the connection for cfg. The caller has
// authenticated and authorised the request; errors before the upgrade are the caller's
// to answer, so Serve checks nothing but the upgrade itself.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, cfg events.Subscription, peer events.Recipient, header http.Header) error {
	h.mu.RLock()
	stopped := h.stopped
	h.mu.RUnlock()
	if stopped {
		return ErrStopped
	}
	hj := &hijacker{ResponseWriter: w}
	ws, err := h.upgrader.Upgrade(hj, r, header)
	if err != nil {
		return err // the upgrader has answered the client
	}
	out := hj.conn.Conn
	hj.conn.upgraded.Store(true)
	if tcp, ok := out.(*net.TCPConn); ok {
		// A small kernel send buffer bounds the memory a stalled client holds and lets the
		// backlog notice it soon; the event stream needs little throughput.
		_ = tcp.SetWriteBuffer(socketSendBuffer)
	}
	c := newConn(h, ws, out, cfg.ID, peer)
	c.pingSlot = h.nextPingSlot.Add(1) % pingSlots
	ready, _ := json.Marshal(map[string]any{"type": "connection.ready", "configId": cfg.ID,
		"events": nonNil(cfg.Entries), "scope": cfg.App})
	// connection.ready is always the first frame, even before a close: a flusher writes
	// it, and frames offered meanwhile wait behind it.
	readyFrame := textFrame(ready)
	c.flushing, c.head, c.headOf = true, readyFrame.wire, readyFrame
	if !h.register(c, cfg) {
		_ = out.SetWriteDeadline(time.Now().Add(closeGrace))
		_, _ = (&net.Buffers{readyFrame.wire, closeFrame(closecode.GoingAway, "server restarting").wire}).WriteTo(out)
		_ = ws.Close()
		return ErrStopped
	}
	go func() { defer h.connections.Done(); c.flush() }()
	go func() { defer h.connections.Done(); c.readLoop() }()
	// A change of the config, or a revocation, between the caller's checks and the
	// registration would have missed this connection: look once more, for it only.
	h.applyConfig(r.Context(), cfg.ID, []*conn{c})
	h.checkCredential(r.Context(), peer.CredentialID, []*conn{c})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// register adds a connection, and counts its reader and first flusher, unless the hub is
// stopping.
func (h *Hub) register(c *conn, cfg events.Subscription) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.connections.Add(2)
	lc := h.configs[cfg.ID]
	if lc == nil {
		lc = &liveConfig{sub: cfg, conns: map[*conn]struct{}{}}
		h.configs[cfg.ID] = lc
	}
	lc.conns[c] = struct{}{}
	lc.snapshot.Store(nil)
	if c.credentialID != "" {
		if h.byCred[c.credentialID] == nil {
			h.byCred[c.credentialID] = map[*conn]struct{}{}
		}
		h.byCred[c.credentialID][c] = struct{}{}
	}
	h.presence.Store(true)
	return true
}

// unregister removes an ended connection, counting it by the close code it ended with.
func (h *Hub) unregister(c *conn, code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closes[code]++
	h.endedFrames += c.sent.Load()
	if lc := h.configs[c.configID]; lc != nil {
		delete(lc.conns, c)
		lc.snapshot.Store(nil)
		if len(lc.conns) == 0 {
			delete(h.configs, c.configID)
		}
	}
	if m := h.byCred[c.credentialID]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.byCred, c.credentialID)
		}
	}
	h.presence.Store(true)
}

// Stats are a hub's counts since it started, for monitoring.
type Stats struct {
	// Connections are open now, on this replica.
	Connections int
	// FramesSent were written whole: events, connection.ready, pongs, pings, closes.
	FramesSent uint64
	// Closes counts the ended connections by close code; 1006 when none was sent.
	Closes map[int]uint64
}

// Stats reads the hub's counts; it walks the connections, which is cheap beside a
// fan-out and keeps the writes' path free of a shared counter.
func (h *Hub) Stats() Stats {
	h.mu.RLock()
	defer h.mu.RUnlock()
	st := Stats{FramesSent: h.endedFrames, Closes: maps.Clone(h.closes)}
	for _, lc := range h.configs {
		st.Connections += len(lc.conns)
		for c := range lc.conns {
			st.FramesSent += c.sent.Load()
		}
	}
	return st
}

// LiveConnections counts the live connections of each config, on every replica when
// presence is shared.
func (h *Hub) LiveConnections(ctx context.Context, configIDs []string) map[string]int {
	out := make(map[string]int, len(configIDs))
	h.mu.RLock()
	for _, id := range configIDs {
		if lc := h.configs[id]; lc != nil {
			out[id] = len(lc.conns)
		}
	}
	h.mu.RUnlock()
	if h.opts.SharedPresence {
		others, err := h.opts.Store.WebSocketPresence(ctx, configIDs, h.replicaID, time.Now().Add(-presenceFresh))
		if err != nil {
			h.opts.Log.Warn("websocket presence unreadable; counting this replica only", "error", err)
		}
		for id, n := range others {
			out[id] += n
		}
	}
	return out
}

// connsOf returns a snapshot of a config's connections.
func (h *Hub) connsOf(configID string) []*conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if lc := h.configs[configID]; lc != nil {
		return lc.list()
	}
	return nil
}

// refreshConfig applies the stored state of a config to its live connections: closed
// with 4004 when deleted, 4001 when disabled, otherwise its event list is taken up.
func (h *Hub) refreshConfig(ctx context.Context, id string) {
	if conns := h.connsOf(id); len(conns) > 0 {
		h.applyConfig(ctx, id, conns)
	}
}

func (h *Hub) applyConfig(ctx context.Context, id string, conns []*conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cfg, err := h.opts.Store.WebSocketSubscription(ctx, id)
	switch {
	case err == nil && cfg == nil:
		for _, c := range conns {
			c.close(closecode.ConfigDeleted, "config deleted")
		}
	case err != nil:
		h.opts.Log.Error("websocket config unreadable", "configId", id, "error", err)
	case !cfg.Enabled:
		for _, c := range conns {
			c.close(closecode.ConfigDisabled, "config disabled")
		}
	default:
		h.mu.Lock()
		if lc := h.configs[id]; lc != nil {
			lc.sub = *cfg
		}
		h.mu.Unlock()
	}
}

// checkCredential closes conns (4003) if their credential has been revoked meanwhile.
func (h *Hub) checkCredential(ctx context.Context, id string, conns []*conn) {
	if id == "" || len(conns) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	revoked, err := h.opts.Store.CredentialRevoked(ctx, id)
	if err != nil {
		h.opts.Log.Error("websocket credential unreadable", "credentialId", id, "error", err)
		return
	}
	if revoked {
		for _, c := range conns {
			c.close(closecode.Credential, "credential revoked")
		}
	}
}

// recheckAll applies the stored state of every live config and credential, after
// control messages may have been lost (the bus reconnected, or the follower fell behind).
func (h *Hub) recheckAll(ctx context.Context) {
	h.mu.RLock()
	configIDs := make([]string, 0, len(h.configs))
	for id := range h.configs {
		configIDs = append(configIDs, id)
	}
	creds := make(map[string][]*conn, len(h.byCred))
	for id, m := range h.byCred {
		for c := range m {
			creds[id] = append(creds[id], c)
		}
	}
	h.mu.RUnlock()
	for _, id := range configIDs {
		h.refreshConfig(ctx, id)
	}
	for id, conns := range creds {
		h.checkCredential(ctx, id, conns)
	}
}

// credentialRevoked closes every connection opened with the credential.
func (h *Hub) credentialRevoked(id string) {
	h.mu.RLock()
	var conns []*conn
	for c := range h.byCred[id] {
		conns = append(conns, c)
	}
	h.mu.RUnlock()
	for _, c := range conns {
		c.close(closecode.Credential, "credential revoked")
	}
}
