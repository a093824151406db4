package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWriterGateLetsOneInAtATime(t *testing.T) {
	g := newWriterGate(30 * time.Millisecond)
	release, err := g.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.enter(context.Background()); !errors.Is(err, errWriterGateTimeout) || !Unavailable(err) {
		t.Fatalf("a second writer past the timeout: %v (unavailable %v)", err, Unavailable(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.enter(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a writer whose request ended: %v", err)
	}

	// The next writer goes in the moment the first leaves.
	entered := make(chan struct{})
	go func() {
		// The same gate, with a timeout long enough to wait for its turn.
		r, err := (&writerGate{turn: g.turn, timeout: time.Minute}).enter(context.Background())
		if err == nil {
			r()
		}
		close(entered)
	}()
	release()
	<-entered
	if r, err := g.enter(context.Background()); err != nil {
		t.Fatalf("after both left: %v", err)
	} else {
		r()
	}
}
