package wshub_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/wshub"
	"github.com/opentreasury/treasury/wshub/closecode"
)

// lossyBus is a bus whose notices can be lost on the way, as with a PostgreSQL
// listening connection that dropped.
type lossyBus struct {
	mu   sync.Mutex
	fn   func(events.Notice)
	lose bool
}

func (b *lossyBus) Subscribe(fn func(events.Notice)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fn = fn
	return func() {}
}

func (b *lossyBus) deliver(n events.Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fn != nil && !b.lose {
		b.fn(n)
	}
}

func (b *lossyBus) Publish(_ context.Context, c events.Control) error {
	b.deliver(events.Notice{Control: &c})
	return nil
}

func (b *lossyBus) setLosing(lose bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lose = lose
}

// After notices were lost, the bus's re-read notice makes the hub catch up: the events
// committed meanwhile arrive once, and the config and credential changes made meanwhile
// close their connections.
func TestHubCatchesUpAfterLostNotices(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	bus := &lossyBus{}
	s.OnEventsCommitted(func(ids []string) { bus.deliver(events.Notice{EventIDs: ids}) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	follower := events.NewFollower(bus, s, log)
	go follower.Run(ctx)
	hub := wshub.New(wshub.Options{Store: assemble.HubStore{Store: s}, Events: follower, Log: log})
	hub.Start(ctx)
	srv := httptest.NewServer(api.NewRouter(api.Config{Store: s, Log: log, Live: hub, RateLimit: 1e6, RateBurst: 1e6, Service: &service.Service{Store: s, Log: log, Bus: bus, Live: hub}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hub.Shutdown(ctx)
		srv.Close()
	})
	r := &replica{srv: srv, store: s}
	pay := creds.Keys["pay"]
	watched := r.createConfig(t, pay.SK, "order.*")
	toDisable := r.createConfig(t, pay.SK, "*")
	key := createKey(t, r, pay.SK, "pk")
	watcher := r.connect(t, watched, pay.PK)
	disabled := r.connect(t, toDisable, pay.PK)
	revoked := r.connect(t, watched, key.secret)

	lostAt := time.Now()
	bus.setLosing(true)
	orderID := r.createPayment(t, creds, pay.SK)
	r.call(t, "PATCH", "/developer/websockets/"+toDisable, pay.SK, map[string]any{"enabled": false})
	r.call(t, "DELETE", "/developer/api-keys/"+key.id, pay.SK, nil)
	watcher.quiet(t, 300*time.Millisecond)
	disabled.quiet(t, 0)

	bus.setLosing(false)
	bus.deliver(events.Notice{ResyncSince: lostAt.Add(-time.Second)})
	f := watcher.next(t)
	if data, _ := f["data"].(map[string]any); f["event"] != "Order.Created" || data["orderId"] != orderID {
		t.Fatalf("after the re-read: %v", f)
	}
	disabled.waitClosed(t, closecode.ConfigDisabled)
	revoked.waitClosed(t, closecode.Credential)

	// A second re-read over the same time delivers nothing again.
	bus.deliver(events.Notice{ResyncSince: lostAt.Add(-time.Second)})
	watcher.quiet(t, 300*time.Millisecond)
}
