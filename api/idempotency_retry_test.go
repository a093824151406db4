package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/opentreasury/treasury/internal/service"
)

// An outcome the database refused (it was restarting) is recorded on a retry, so that the
// request's own retries are not told idempotency_key_in_use for the whole lease.
func TestAnOutcomeTheDatabaseRefusedIsRecordedOnARetry(t *testing.T) {
	m := &idempotency{log: slog.New(slog.NewTextHandler(io.Discard, nil)), lease: time.Minute, now: time.Now}
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.recordLater(func(context.Context) error {
			if calls.Add(1) < 3 {
				return errors.New("the database system is shutting down")
			}
			return nil
		}, "corr")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("recordLater never recorded")
	}
	if got := calls.Load(); got != 3 {
		t.Fatalf("recorded after %d tries, want 3 (two refusals, then the record)", got)
	}
}

// Past the lease it gives up: the lease has freed the key by then.
func TestARecordRetryEndsWithTheLease(t *testing.T) {
	m := &idempotency{log: slog.New(slog.NewTextHandler(io.Discard, nil)), lease: 300 * time.Millisecond, now: time.Now}
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.recordLater(func(context.Context) error { calls.Add(1); return errors.New("down") }, "corr")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("recordLater kept retrying past the lease")
	}
	if calls.Load() == 0 {
		t.Fatal("no retry at all")
	}
}

// What Temporal and the database answer while they restart is a 503 (safe to retry),
// whatever wraps it; anything else is a 500.
func TestDependenciesRestartingAreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("start order workflow: %w", serviceerror.NewNamespaceNotFound("default")), true},
		{fmt.Errorf("start order workflow: %w", serviceerror.NewUnavailable("shard status unknown")), true},
		{fmt.Errorf("policy decision: %w", serviceerror.NewDeadlineExceeded("deadline")), true},
		{service.ErrWorkflowsUnavailable, true},
		{errors.New("a defect"), false},
		{serviceerror.NewInvalidArgument("bad"), false},
	} {
		if got := unavailable(tc.err); got != tc.want {
			t.Errorf("unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
