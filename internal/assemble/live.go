package assemble

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/opentreasury/treasury/internal/batch"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/wshub"
)

// Live is the background work of an API process: the event bus and its follower, the
// WebSocket hub, and the writer of request logs.
type Live struct {
	Bus         events.Bus
	Follower    *events.Follower
	Hub         *wshub.Hub
	RequestLogs *batch.Writer[store.RequestLog]
	cancel      context.CancelFunc
	wg          sync.WaitGroup
}

// LiveOptions tune the WebSocket channel; zero values take wshub's defaults (ping every
// 25 s, pong within 10 s, 10 s per write, a backlog of 32 frames per connection).
type LiveOptions struct {
	PingInterval, PongWait, WriteTimeout time.Duration
	SendQueue                            int
	// NoSendRing writes every frame with its own system call, never through io_uring.
	NoSendRing bool
	// Metrics reads the hub's counts when scraped; nil leaves them unread.
	Metrics *metrics.Metrics
}

// StartLive picks the bus for the store and starts the follower and the hub on it. On
// PostgreSQL the bus is LISTEN/NOTIFY, so events committed by any worker process reach
// this API process; on SQLite (one process) the store's commit hook alone feeds it. Call
// it right after opening the store, before anything writes events.
func StartLive(s *store.Store, opts LiveOptions, log *slog.Logger) *Live {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Live{cancel: cancel}
	log = log.With("component", "live")
	l.Bus, l.Follower = followEvents(ctx, s, log, &l.wg)
	l.Hub = wshub.New(wshub.Options{Store: HubStore{s}, Events: l.Follower, Log: log, PingInterval: opts.PingInterval,
		PongWait: opts.PongWait, WriteTimeout: opts.WriteTimeout, SendQueue: opts.SendQueue, SharedPresence: s.DatabaseURL() != "",
		NoSendRing: opts.NoSendRing})
	l.Hub.Start(ctx)
	hub := l.Hub
	opts.Metrics.WatchLive(func() metrics.LiveStats {
		st := hub.Stats()
		return metrics.LiveStats{Connections: st.Connections, FramesSent: st.FramesSent, Closes: st.Closes}
	})
	l.RequestLogs = newRequestLogWriter(s, log)
	l.wg.Add(1)
	go func() { defer l.wg.Done(); l.RequestLogs.Run(ctx) }()
	return l
}

// followEvents starts a bus on the store's commits and a follower over it, until ctx ends.
func followEvents(ctx context.Context, s *store.Store, log *slog.Logger, wg *sync.WaitGroup) (events.Bus, *events.Follower) {
	bus := startBus(ctx, s, log, wg)
	f := events.NewFollower(bus, s, log)
	wg.Add(1)
	go func() { defer wg.Done(); f.Run(ctx) }()
	return bus, f
}

// startBus hooks a bus to the store's commits: an in-process one on SQLite, LISTEN/NOTIFY
// on PostgreSQL, listening until ctx ends.
func startBus(ctx context.Context, s *store.Store, log *slog.Logger, wg *sync.WaitGroup) events.Bus {
	databaseURL := s.DatabaseURL()
	if databaseURL == "" {
		bus := events.NewLocalBus()
		s.OnEventsCommitted(bus.Committed)
		return bus
	}
	bus := events.NewPostgresBus(databaseURL, s, log)
	s.OnEventsCommitted(bus.Committed)
	wg.Add(1)
	go func() { defer wg.Done(); _ = bus.Run(ctx) }()
	return bus
}

// HubStore is the store as the WebSocket hub uses it.
type HubStore struct{ *store.Store }

// RecordDeliveries adds rows to the configs' delivery logs.
func (s HubStore) RecordDeliveries(ctx context.Context, rows []wshub.Delivery) error {
	out := make([]store.WebSocketDelivery, len(rows))
	for i, r := range rows {
		out[i] = store.WebSocketDelivery{ConfigID: r.ConfigID, EventID: r.EventID, Event: r.Event, SentAt: r.SentAt}
	}
	return s.RecordWebSocketDeliveries(ctx, out)
}

// newRequestLogWriter writes request logs in batches; the hourly maintenance workflow
// removes those past their retention.
func newRequestLogWriter(s *store.Store, log *slog.Logger) *batch.Writer[store.RequestLog] {
	return batch.New("request logs", 500*time.Millisecond, 10000, log, s.AppendRequestLogs)
}

// CloseConnections closes every live connection with 1001, waiting up to ctx for them.
// Call it before draining the HTTP server, which ignores hijacked connections.
func (l *Live) CloseConnections(ctx context.Context) { l.Hub.Shutdown(ctx) }

// Stop ends the background work: the bus stops listening and the request log writes
// what it holds.
func (l *Live) Stop() {
	l.cancel()
	l.wg.Wait()
}

// Shutdown is CloseConnections then Stop.
func (l *Live) Shutdown(ctx context.Context) {
	l.CloseConnections(ctx)
	l.Stop()
}
