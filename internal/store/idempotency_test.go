package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
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
		d, err := s.DeleteExpired(ctx, store.ExpiringIdempotencyRecords, t0.Add(48*time.Hour), 1000, nil)
		// "released" and "abandoned" are past their day; "old" was claimed anew at dayLater.
		if err != nil || d.Rows != 2 {
			t.Fatalf("cleanup removed %+v (%v), want 2", d, err)
		}
		d, err = s.DeleteExpired(ctx, store.ExpiringIdempotencyRecords, t0.Add(48*time.Hour), 1000, nil)
		if err != nil || d.Rows != 0 {
			t.Fatalf("second cleanup removed %+v (%v)", d, err)
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

// answerRecord is a create's Idempotency-Key record holding its answer, the order's id.
func answerRecord(org, key string, at time.Time, o *store.Order) *store.IdempotencyRecord {
	return &store.IdempotencyRecord{OrgID: org, Key: key, Method: "POST", Path: "/api/v1/payments", Fingerprint: "fp",
		CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour), StatusCode: 201,
		ResponseHeaders: `{"Location":"/api/v1/payments/` + o.ID + `"}`, ResponseBody: []byte(`{"id":"` + o.ID + `"}`)}
}

// The record that answers a create's retries commits with the order, done, or neither
// does: no crash leaves an order without it, nor a claim for an order never made.
func TestAnOrderAndItsIdempotencyRecordCommitTogether(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		now := time.Now()

		o, legs := newDraft(t, s, org, "TRANSFER")
		if _, err := s.CreateOrder(ctx, o, legs, store.EventSpec{Name: "Order.Created"}, nil, answerRecord(org, "k-fold", now, o)); err != nil {
			t.Fatal(err)
		}
		rec, err := s.IdempotencyRecordOf(ctx, org, "k-fold")
		if err != nil || rec == nil {
			t.Fatalf("record: %v %v", rec, err)
		}
		if rec.State != store.IdempotencyDone || rec.StatusCode != 201 || string(rec.ResponseBody) != `{"id":"`+o.ID+`"}` {
			t.Fatalf("record %+v", rec)
		}

		// The same key again: the key's record answers, and no second order is made.
		again, againLegs := newDraft(t, s, org, "TRANSFER")
		_, err = s.CreateOrder(ctx, again, againLegs, store.EventSpec{Name: "Order.Created"}, nil, answerRecord(org, "k-fold", now.Add(time.Second), again))
		var held *store.KeyHeldError
		if !errors.Is(err, store.ErrIdempotencyTaken) || !errors.As(err, &held) || string(held.Held.ResponseBody) != string(rec.ResponseBody) {
			t.Fatalf("repeat: %v", err)
		}
		if _, _, err := s.Order(ctx, again.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the repeat's order must not exist: %v", err)
		}

		// An order that cannot be stored (its id is taken) leaves no record either.
		broken, brokenLegs := newDraft(t, s, org, "TRANSFER")
		broken.ID = o.ID
		if _, err := s.CreateOrder(ctx, broken, brokenLegs, store.EventSpec{Name: "Order.Created"}, nil, answerRecord(org, "k-broken", now, broken)); err == nil {
			t.Fatal("an order with a taken id was stored")
		}
		if rec, err := s.IdempotencyRecordOf(ctx, org, "k-broken"); rec != nil || err != nil {
			t.Fatalf("no record for an order never made: %+v %v", rec, err)
		}
	})
}

// Concurrent creates under one key: one order, one record, and every other create told
// that the key is taken, with nothing of its own left behind.
func TestConcurrentFoldedCreatesMakeOneOrder(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		const n = 8
		drafts := make([]*store.Order, n)
		legs := make([][]store.OrderLeg, n)
		for i := range n {
			drafts[i], legs[i] = newDraft(t, s, org, "TRANSFER")
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = s.CreateOrder(ctx, drafts[i], legs[i], store.EventSpec{Name: "Order.Created"}, nil,
					answerRecord(org, "k-race", time.Now(), drafts[i]))
			})
		}
		wg.Wait()
		winner := -1
		helds := make([]*store.KeyHeldError, n)
		for i := range n {
			_, _, found := s.Order(ctx, drafts[i].ID)
			switch {
			case errs[i] == nil && found == nil:
				if winner >= 0 {
					t.Fatalf("two creates stored orders: %d and %d", winner, i)
				}
				winner = i
			case errors.As(errs[i], &helds[i]) && errors.Is(found, store.ErrNotFound):
			default:
				t.Fatalf("create %d: %v, order %v", i, errs[i], found)
			}
		}
		if winner < 0 {
			t.Fatal("no create stored its order")
		}
		for i := range n {
			if i != winner && string(helds[i].Held.ResponseBody) != `{"id":"`+drafts[winner].ID+`"}` {
				t.Fatalf("create %d was held by %s", i, helds[i].Held.ResponseBody)
			}
		}
	})
}
