package wshub_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// On PostgreSQL, each API replica listens on the bus: an event committed by any process
// (a worker here) reaches the connections of every replica exactly once, and config
// changes made through one replica act on every replica's connections.
func TestReplicasOnPostgresShareOneStream(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.PostgresSchemaURL(t)
	open := func() *store.Store {
		s, err := store.Open(ctx, store.Config{DatabaseURL: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	worker := open()
	if err := worker.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	creds := seedStore(t, worker)
	a := startReplica(t, open(), assemble.LiveOptions{}, api.Config{})
	b := startReplica(t, open(), assemble.LiveOptions{}, api.Config{})
	pay := creds.Keys["pay"]
	cfg := a.createConfig(t, pay.SK, "order.*")
	onA, onB := a.connect(t, cfg, pay.PK), b.connect(t, cfg, pay.SK)
	waitListening(t, 2)

	// An event committed through replica A's API.
	orderID := a.createPayment(t, creds, pay.SK)
	for _, c := range []*client{onA, onB} {
		if f := c.next(t); f["event"] != "Order.Created" {
			t.Fatalf("frame %v", f)
		}
	}
	// An event committed by the worker, which runs no hub at all.
	step := func(name, event string) {
		t.Helper()
		_, err := worker.ApplyOrderStep(ctx, store.OrderChange{OrderID: orderID, Step: name, Event: &store.EventSpec{Name: event}})
		if err != nil {
			t.Fatal(err)
		}
	}
	step("ws-test-submitted", "Order.Submitted")
	for _, c := range []*client{onA, onB} {
		if f := c.next(t); f["event"] != "Order.Submitted" {
			t.Fatalf("frame %v", f)
		}
	}

	// The bus connections drop; an event committed meanwhile is not lost, and nothing
	// delivered before is delivered again.
	admin, err := sql.Open("pgx", storetest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
		events.ListenerApplicationName); err != nil {
		t.Fatal(err)
	}
	step("ws-test-approved", "Order.Approved")
	for _, c := range []*client{onA, onB} {
		if f := c.next(t); f["event"] != "Order.Approved" {
			t.Fatalf("frame after the bus reconnected: %v", f)
		}
		c.quiet(t, 500*time.Millisecond)
	}
	for _, r := range []*replica{a, b} {
		if !strings.Contains(r.logs.String(), "event bus reconnected") {
			t.Fatal("the bus did not reconnect: the test proved nothing about the gap")
		}
	}

	// Each replica counts the other's connections.
	wait.For(t, 5*time.Second, "liveConnections 2 through replica A", func() bool {
		_, page := a.call(t, "GET", "/developer/websockets/"+cfg, pay.SK, nil)
		return page["liveConnections"] == float64(2)
	})

	// A test sent through B reaches A's client; a disable through B closes both.
	b.sendTestEvent(t, cfg, pay.SK)
	for _, c := range []*client{onA, onB} {
		if f := c.next(t); f["event"] != "websocket.test" {
			t.Fatalf("frame %v", f)
		}
	}
	if status, _ := b.call(t, "PATCH", "/developer/websockets/"+cfg, pay.SK, map[string]any{"enabled": false}); status != 200 {
		t.Fatal("disable refused")
	}
	onA.waitClosed(t, 4001)
	onB.waitClosed(t, 4001)
}

// waitListening waits until n bus connections listen (pg_stat_activity shows them).
func waitListening(t *testing.T, n int) {
	t.Helper()
	admin, err := sql.Open("pgx", storetest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var got int
	defer func() {
		if t.Failed() {
			t.Logf("%d bus connections listening, want %d (%v)", got, n, err)
		}
	}()
	wait.For(t, 10*time.Second, fmt.Sprintf("%d bus connections to listen", n), func() bool {
		got = 0
		err = admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
			events.ListenerApplicationName).Scan(&got)
		return err == nil && got >= n
	})
}
