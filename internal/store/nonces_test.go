package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// take assigns one nonce in a transaction of its own, as the signing step does.
func take(t *testing.T, s *store.Store, address string, floor uint64) uint64 {
	t.Helper()
	var n uint64
	err := s.Tx(context.Background(), func(tx *store.Store) error {
		var err error
		n, err = tx.TakeNonce(context.Background(), "ethereum", address, floor)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConcurrentSigningStepsTakeConsecutiveNonces(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		const n = 50
		var mu sync.Mutex
		var got []uint64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				v := take(t, s, "0xAbC0000000000000000000000000000000000001", 0)
				mu.Lock()
				got = append(got, v)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(got)
		for i, v := range got {
			if v != uint64(i) {
				t.Fatalf("nonces %v: want 0..%d, each once", got, n-1)
			}
		}
		// Another address counts on its own; the address is matched whatever its case.
		if v := take(t, s, "0xdef0000000000000000000000000000000000002", 0); v != 0 {
			t.Fatalf("another address starts at %d", v)
		}
		if v := take(t, s, "0xABC0000000000000000000000000000000000001", 0); v != n {
			t.Fatalf("the same address in capitals continues at %d, want %d", v, n)
		}
	})
}

func TestARolledBackStepTakesNoNonce(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		boom := errors.New("the step failed after taking its nonce")
		err := s.Tx(ctx, func(tx *store.Store) error {
			if _, err := tx.TakeNonce(ctx, "ethereum", "0xa1", 0); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if v := take(t, s, "0xa1", 0); v != 0 {
			t.Fatalf("after a rolled-back step the next nonce is %d, want 0", v)
		}
	})
}

func TestNoncesGivenBackLeaveNoGap(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		for i := range 5 {
			if v := take(t, s, "0xa2", 0); v != uint64(i) {
				t.Fatalf("nonce %d, want %d", v, i)
			}
		}
		release := func(n uint64) {
			t.Helper()
			if err := s.Tx(ctx, func(tx *store.Store) error { return tx.ReleaseNonce(ctx, "ethereum", "0xa2", n) }); err != nil {
				t.Fatal(err)
			}
		}
		// 1 and 2 expire unsigned while 3 and 4 are out: holes, filled lowest first.
		release(2)
		release(1)
		release(1) // given back twice (a retried step): still one hole
		for _, want := range []uint64{1, 2, 5} {
			if v := take(t, s, "0xa2", 0); v != want {
				t.Fatalf("next nonce %d, want %d", v, want)
			}
		}
		// The highest out is simply taken back, with the holes just below it.
		release(4)
		release(5)
		if v := take(t, s, "0xa2", 0); v != 4 {
			t.Fatalf("after giving back the top two, the next nonce is %d, want 4", v)
		}
		release(3)
		release(4)
		if v := take(t, s, "0xa2", 0); v != 3 {
			t.Fatalf("after 4 then 3 came back, the next nonce is %d, want 3", v)
		}
		// The chain's own count wins: nonces it has mined (sent outside the service) are
		// never assigned, and holes below it are dropped.
		release(1)
		if v := take(t, s, "0xa2", 10); v != 10 {
			t.Fatalf("with 10 mined, the next nonce is %d, want 10", v)
		}
		if v := take(t, s, "0xa2", 10); v != 11 {
			t.Fatalf("then %d, want 11", v)
		}
	})
}
