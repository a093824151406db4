// Package batch collects rows that are written off the request path, and writes them
// in batches: a burst becomes one database transaction instead of one per row.
package batch

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Writer gathers items and hands them to flush in batches, at most every interval.
// When flush keeps failing, the oldest items beyond limit are dropped: what it writes
// is a recent-history log, not a record that must survive.
type Writer[T any] struct {
	name     string
	flush    func(ctx context.Context, items []T) error
	interval time.Duration
	limit    int
	log      *slog.Logger

	mu      sync.Mutex
	pending []T
	// spare is the slice of the batch written last, emptied, which the next batch fills:
	// a busy API adds a row a request, and growing a new slice every batch was most of
	// what adding one cost.
	spare []T
	wake  chan struct{}
	// Flushed, when set, is called after each flush (tests wait on it).
	Flushed func()
}

// New returns a writer; Run must be running for anything to be written.
func New[T any](name string, interval time.Duration, limit int, log *slog.Logger, flush func(context.Context, []T) error) *Writer[T] {
	return &Writer[T]{name: name, flush: flush, interval: interval, limit: limit, log: log, wake: make(chan struct{}, 1)}
}

// Add queues an item without waiting.
func (w *Writer[T]) Add(item T) {
	w.mu.Lock()
	if len(w.pending) >= w.limit {
		w.pending = w.pending[1:]
	}
	w.pending = append(w.pending, item)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run writes batches until ctx ends, then writes what is left (for up to two seconds).
func (w *Writer[T]) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			w.write(fctx)
			cancel()
			return
		case <-w.wake:
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.interval):
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		w.write(fctx)
		cancel()
	}
}

func (w *Writer[T]) write(ctx context.Context) {
	w.mu.Lock()
	items := w.pending
	w.pending, w.spare = w.spare, nil
	w.mu.Unlock()
	if len(items) == 0 {
		return
	}
	if err := w.flush(ctx, items); err != nil {
		w.log.Warn(w.name+" not written", "rows", len(items), "error", err)
	}
	clear(items) // flush keeps none of them
	w.mu.Lock()
	w.spare = items[:0]
	w.mu.Unlock()
	if w.Flushed != nil {
		w.Flushed()
	}
}
