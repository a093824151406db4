package events

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
)

// fakeOutbox holds events in memory and counts its reads.
type fakeOutbox struct {
	mu     sync.Mutex
	events []Event
	reads  int
}

func (o *fakeOutbox) add(id string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, Event{ID: id, Name: OrderCreated, OccurredAt: at})
}

func (o *fakeOutbox) EventsByID(_ context.Context, ids []string) ([]Event, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	var out []Event
	for _, e := range o.events {
		if slices.Contains(ids, e.ID) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (o *fakeOutbox) EventsSince(_ context.Context, since time.Time, limit int) ([]Event, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	var out []Event
	for _, e := range o.events {
		if !e.OccurredAt.Before(since) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (o *fakeOutbox) readCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}

// recorder is a subscriber that writes down what it is handed, in order.
type recorder struct {
	mu    sync.Mutex
	wants bool
	got   []string
	seen  chan struct{}
}

func newRecorder(wants bool) *recorder {
	return &recorder{wants: wants, seen: make(chan struct{}, 100)}
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
	r.seen <- struct{}{}
}

func (r *recorder) Wants() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wants
}

func (r *recorder) Events(_ context.Context, evs []Event) {
	for _, e := range evs {
		r.note("event " + e.ID)
	}
}

func (r *recorder) Control(_ context.Context, c *Control) { r.note("control " + c.ConfigID) }
func (r *recorder) Resynced(context.Context)              { r.note("resynced") }

// wait waits until n things have been noted, then a little longer for any that should not be.
func (r *recorder) wait(t *testing.T, n int) []string {
	t.Helper()
	for range n {
		select {
		case <-r.seen:
		case <-time.After(5 * time.Second):
			t.Fatalf("waited for %d notes, have %v", n, r.snapshot())
		}
	}
	select {
	case <-r.seen:
	case <-time.After(100 * time.Millisecond):
	}
	return r.snapshot()
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func startFollower(t *testing.T, out *fakeOutbox, subs ...Subscriber) *LocalBus {
	t.Helper()
	bus := NewLocalBus()
	f := NewFollower(bus, out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, s := range subs {
		f.Subscribe(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Run subscribes to the bus from its own goroutine: wait until it has.
	wait.For(t, 5*time.Second, "the follower to subscribe to the bus", func() bool {
		bus.mu.Lock()
		defer bus.mu.Unlock()
		return len(bus.subs) > 0
	})
	return bus
}

// An event announced twice (this process's commit hook, then the database's echo) is
// handed on once; control messages reach every subscriber.
func TestFollowerHandsEachEventOnOnce(t *testing.T) {
	out := &fakeOutbox{}
	a, b := newRecorder(true), newRecorder(true)
	bus := startFollower(t, out, a, b)
	out.add("evt_1", time.Now())
	bus.Committed([]string{"evt_1"})
	bus.Committed([]string{"evt_1"})
	_ = bus.Publish(context.Background(), Control{Kind: ControlConfig, ConfigID: "wsc_1"})
	for name, r := range map[string]*recorder{"a": a, "b": b} {
		got := r.wait(t, 2)
		if !slices.Equal(got, []string{"event evt_1", "control wsc_1"}) && !slices.Equal(got, []string{"control wsc_1", "event evt_1"}) {
			t.Errorf("subscriber %s was handed %v", name, got)
		}
	}
}

// While no subscriber wants events, the outbox is not read; control messages still pass.
func TestFollowerReadsNothingForIdleSubscribers(t *testing.T) {
	out := &fakeOutbox{}
	idle := newRecorder(false)
	bus := startFollower(t, out, idle)
	out.add("evt_1", time.Now())
	bus.Committed([]string{"evt_1"})
	_ = bus.Publish(context.Background(), Control{Kind: ControlConfig, ConfigID: "wsc_1"})
	if got := idle.wait(t, 1); !slices.Equal(got, []string{"control wsc_1"}) {
		t.Fatalf("an idle subscriber was handed %v", got)
	}
	if n := out.readCount(); n != 0 {
		t.Fatalf("the outbox was read %d times for nobody", n)
	}
}

// After notices were lost, a re-read hands on the events of the gap, once each, after
// telling subscribers to re-read their own state.
func TestFollowerRereadsAGap(t *testing.T) {
	out := &fakeOutbox{}
	r := newRecorder(true)
	bus := startFollower(t, out, r)
	start := time.Now()
	out.add("evt_1", start)
	bus.Committed([]string{"evt_1"})
	r.wait(t, 1)
	// Two events committed while the notices were lost.
	out.add("evt_2", start.Add(time.Millisecond))
	out.add("evt_3", start.Add(2*time.Millisecond))
	bus.deliver(Notice{ResyncSince: start.Add(-time.Second)})
	got := r.wait(t, 3)
	if want := []string{"event evt_1", "resynced", "event evt_2", "event evt_3"}; !slices.Equal(got, want) {
		t.Fatalf("handed %v, want %v", got, want)
	}
}
