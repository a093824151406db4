package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/opentreasury/treasury/batch"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/migrations"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/wshub"
)

// Live is the background work of an API process: the event bus, the WebSocket hub, and
// the writer of request logs.
type Live struct {
	Bus         events.Bus
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
}

// StartLive picks the bus for the store and starts the hub on it. On PostgreSQL the bus is
// LISTEN/NOTIFY, so events committed by any worker process reach this API process; on
// SQLite (one process) the store hands committed events to an in-process bus. Call it
// right after opening the store, before anything writes events.
func StartLive(s *store.Store, opts LiveOptions, log *slog.Logger) *Live {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Live{cancel: cancel}
	log = log.With("component", "live")
	shared := s.Dialect() == migrations.Postgres
	if shared {
		s.OnListenError(func(err error) { log.Warn("event bus connection lost; reconnecting", "error", err) })
		bus := events.NewPostgresBus(s, store.EventsChannel, store.ControlChannel, log)
		l.Bus = bus
		l.wg.Add(1)
		go func() { defer l.wg.Done(); _ = bus.Run(ctx) }()
	} else {
		bus := events.NewLocalBus()
		s.OnEventsCommitted(bus.Committed)
		l.Bus = bus
	}
	l.Hub = wshub.New(wshub.Options{Store: s, Bus: l.Bus, Log: log, PingInterval: opts.PingInterval,
		PongWait: opts.PongWait, WriteTimeout: opts.WriteTimeout, SendQueue: opts.SendQueue, SharedPresence: shared})
	l.Hub.Start(ctx)
	l.RequestLogs = newRequestLogWriter(s, log)
	l.wg.Add(1)
	go func() { defer l.wg.Done(); l.RequestLogs.Run(ctx) }()
	return l
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
