package events_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// heard counts the control messages a process's subscriber was handed, by config id.
type heard struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *heard) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id]
}

func listen(t *testing.T, ctx context.Context, url string, db events.Notifier) (*events.PostgresBus, *heard) {
	t.Helper()
	bus := events.NewPostgresBus(url, db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := &heard{n: map[string]int{}}
	bus.Subscribe(func(n events.Notice) {
		if n.Control != nil {
			h.mu.Lock()
			h.n[n.Control.ConfigID]++
			h.mu.Unlock()
		}
	})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = bus.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return bus, h
}

// A control message holds in the process that publishes it once Publish returns (a
// revoked key must not work there a moment longer), reaches every other process, and
// each is handed it once: the copy that comes back through the database is dropped.
func TestPostgresBusDeliversAPublishOnceEverywhereAndAtOnceToItsPublisher(t *testing.T) {
	s := storetest.NewPostgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, heardA := listen(t, ctx, s.DatabaseURL(), s)
	b, heardB := listen(t, ctx, s.DatabaseURL(), s)

	// Both listen once a message of each reaches the other: each poll checks for the
	// probes of the rounds before and sends another pair.
	wait.For(t, 20*time.Second, "the buses to hear each other", func() bool {
		if heardB.count("probe-a") > 0 && heardA.count("probe-b") > 0 {
			return true
		}
		_ = a.Publish(ctx, events.Control{Kind: events.ControlConfig, ConfigID: "probe-a"})
		_ = b.Publish(ctx, events.Control{Kind: events.ControlConfig, ConfigID: "probe-b"})
		return false
	})

	if err := a.Publish(ctx, events.Control{Kind: events.ControlCredentialRevoked, ConfigID: "revoked"}); err != nil {
		t.Fatal(err)
	}
	if n := heardA.count("revoked"); n != 1 {
		t.Fatalf("the publisher was handed its message %d times when Publish returned, want 1", n)
	}
	wait.For(t, 20*time.Second, "the other process to hear the message", func() bool { return heardB.count("revoked") == 1 })
	// The other process answers; by the time its answer arrives, the publisher's own copy
	// (notified before it) has come back too, and must have been dropped.
	if err := b.Publish(ctx, events.Control{Kind: events.ControlConfig, ConfigID: "answer"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "the publisher to hear the answer", func() bool { return heardA.count("answer") == 1 })
	if n := heardA.count("revoked"); n != 1 {
		t.Fatalf("the publisher was handed its own message %d times, want 1", n)
	}
	if n := heardB.count("revoked"); n != 1 {
		t.Fatalf("the other process was handed the message %d times, want 1", n)
	}
}
