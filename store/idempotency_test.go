package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/store/storetest"
)

func claim(s *store.Store, key, fp string, at, abandonedBefore time.Time) (*store.IdempotencyRecord, error) {
	return s.ClaimIdempotencyKey(ctx, &store.IdempotencyRecord{OrgID: "org_1", Key: key, Method: "POST", Path: "/api/v1/payments",
		Fingerprint: fp, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}, abandonedBefore)
}

func TestIdempotencyClaimCompleteReplay(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		t0 := time.Date(2026, 11, 22, 3, 0, 0, 123456789, time.UTC)
		if held, err := claim(s, "k1", "fp", t0, t0.Add(-time.Minute)); err != nil || held != nil {
			t.Fatalf("first claim: %v %v", held, err)
		}
		held, err := claim(s, "k1", "fp", t0.Add(time.Second), t0.Add(-time.Minute))
		if !errors.Is(err, store.ErrIdempotencyTaken) || held.State != store.IdempotencyInFlight {
			t.Fatalf("second claim while in flight: %+v %v", held, err)
		}
		if err := s.CompleteIdempotencyKey(ctx, "org_1", "k1", t0, 201, `{"Content-Type":"application/json"}`, []byte(`{"id":"ord_1"}`)); err != nil {
			t.Fatal(err)
		}
		held, err = claim(s, "k1", "fp", t0.Add(2*time.Second), t0.Add(-time.Minute))
		if !errors.Is(err, store.ErrIdempotencyTaken) || held.State != store.IdempotencyDone || held.StatusCode != 201 ||
			string(held.ResponseBody) != `{"id":"ord_1"}` || held.Fingerprint != "fp" {
			t.Fatalf("after completion: %+v %v", held, err)
		}
		// The same key in another organisation is another key.
		other := &store.IdempotencyRecord{OrgID: "org_2", Key: "k1", Method: "POST", Path: "/x", Fingerprint: "fp",
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		if held, err := s.ClaimIdempotencyKey(ctx, other, t0.Add(-time.Minute)); err != nil || held != nil {
			t.Fatalf("other org: %v %v", held, err)
		}
	})
}

func TestIdempotencyReleaseExpiryAndAbandonedClaims(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		t0 := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
		if _, err := claim(s, "released", "fp", t0, t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseIdempotencyKey(ctx, "org_1", "released", t0); err != nil {
			t.Fatal(err)
		}
		if held, err := claim(s, "released", "fp2", t0.Add(time.Second), t0.Add(-time.Minute)); err != nil || held != nil {
			t.Fatalf("claim after release: %v %v", held, err)
		}

		if _, err := claim(s, "abandoned", "fp", t0, t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		// Within the lease the claim holds; past it, a retry takes the key over.
		if _, err := claim(s, "abandoned", "fp", t0.Add(30*time.Second), t0.Add(30*time.Second-time.Minute)); !errors.Is(err, store.ErrIdempotencyTaken) {
			t.Fatalf("claim within lease: %v", err)
		}
		later := t0.Add(2 * time.Minute)
		if held, err := claim(s, "abandoned", "fp", later, later.Add(-time.Minute)); err != nil || held != nil {
			t.Fatalf("take over abandoned: %v %v", held, err)
		}
		// The first owner can no longer complete: its claim is gone.
		if err := s.CompleteIdempotencyKey(ctx, "org_1", "abandoned", t0, 200, "", nil); err != nil {
			t.Fatal(err)
		}
		held, err := claim(s, "abandoned", "fp", later.Add(time.Second), later.Add(-time.Minute))
		if !errors.Is(err, store.ErrIdempotencyTaken) || held.State != store.IdempotencyInFlight {
			t.Fatalf("the stale owner completed a claim it lost: %+v %v", held, err)
		}

		if _, err := claim(s, "old", "fp", t0, t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIdempotencyKey(ctx, "org_1", "old", t0, 201, "", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		dayLater := t0.Add(25 * time.Hour)
		if held, err := claim(s, "old", "other", dayLater, dayLater.Add(-time.Minute)); err != nil || held != nil {
			t.Fatalf("an expired key is free again: %v %v", held, err)
		}
		n, err := s.DeleteExpiredIdempotencyKeys(ctx, t0.Add(48*time.Hour))
		// "released" and "abandoned" are past their day; "old" was claimed anew at dayLater.
		if err != nil || n != 2 {
			t.Fatalf("cleanup removed %d (%v), want 2", n, err)
		}
		n, err = s.DeleteExpiredIdempotencyKeys(ctx, t0.Add(48*time.Hour))
		if err != nil || n != 0 {
			t.Fatalf("second cleanup removed %d (%v)", n, err)
		}
	})
}

func TestIdempotencyConcurrentClaimsHaveOneWinner(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		t0 := time.Now().UTC()
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners, taken := 0, 0
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held, err := claim(s, "race", "fp", t0, t0.Add(-time.Minute))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && held == nil:
					winners++
				case errors.Is(err, store.ErrIdempotencyTaken):
					taken++
				default:
					t.Errorf("claim: %v", err)
				}
			}()
		}
		wg.Wait()
		if winners != 1 || taken != 19 {
			t.Fatalf("winners %d, taken %d", winners, taken)
		}
	})
}
