package batch

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// Each batch hands flush exactly the items added since the one before, in order, though
// the batches share one slice.
func TestEveryBatchHoldsTheItemsAddedSinceTheLast(t *testing.T) {
	var (
		mu      sync.Mutex
		batches [][]string
	)
	w := New("test", time.Hour, 100, slog.New(slog.DiscardHandler), func(_ context.Context, items []string) error {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, slices.Clone(items))
		return nil
	})
	want := [][]string{{"a", "b", "c"}, {"d"}, {"e", "f"}}
	for _, b := range want {
		for _, item := range b {
			w.Add(item)
		}
		w.write(context.Background())
	}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("batches %q, want %q", batches, want)
	}
	if cap(w.spare) < 3 || len(w.spare) != 0 {
		t.Fatalf("spare len %d cap %d: the written batch's slice is not kept for the next", len(w.spare), cap(w.spare))
	}
}
