package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// The first claim of a run fixes its order's id: every later claim of the same nominal
// time, however many race, gets that id, and another time gets its own.
func TestARunOfAScheduleIsClaimedOnce(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org, now := mustOrg(t, s), time.Now()
		p := &store.PayoutSchedule{ID: ids.New(ids.PayoutSchedule), OrgID: org, App: "pay", Payment: "{}", Every: "PT2S",
			ActorKind: "sk", Creator: store.Creator{CreatedBy: "key_1"}, CreatedAt: now, UpdatedAt: now}
		if err := s.CreatePayoutSchedule(ctx, p); err != nil {
			t.Fatal(err)
		}
		const at = "2026-12-01T09:00:00Z"
		var wg sync.WaitGroup
		got := make([]string, 8)
		for i := range got {
			wg.Go(func() {
				run, err := s.ClaimPayoutRun(ctx, &store.PayoutRun{ScheduleID: p.ID, NominalTime: at, OrderID: ids.New(ids.Order),
					CreatedAt: now, UpdatedAt: now})
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = run.OrderID
			})
		}
		wg.Wait()
		for _, id := range got {
			if id != got[0] || id == "" {
				t.Fatalf("claims of one run got orders %v", got)
			}
		}
		other, err := s.ClaimPayoutRun(ctx, &store.PayoutRun{ScheduleID: p.ID, NominalTime: "2026-12-01T09:00:02Z", OrderID: "ord_other",
			CreatedAt: now, UpdatedAt: now})
		if err != nil || other.OrderID != "ord_other" {
			t.Fatalf("the next run: %+v %v", other, err)
		}
		if err := s.FailPayoutRun(ctx, p.ID, "2026-12-01T09:00:02Z", "the wallet is archived", now); err != nil {
			t.Fatal(err)
		}
		runs, err := s.PayoutRuns(ctx, p.ID, "", 10)
		if err != nil || len(runs) != 2 || runs[0].NominalTime != "2026-12-01T09:00:02Z" || runs[0].Error == "" || runs[1].OrderID != got[0] {
			t.Fatalf("runs %+v %v", runs, err)
		}
		if runs, err := s.PayoutRuns(ctx, p.ID, runs[0].NominalTime, 10); err != nil || len(runs) != 1 || runs[0].NominalTime != at {
			t.Fatalf("the page after the latest: %+v %v", runs, err)
		}
		if err := s.SetPayoutSchedulePaused(ctx, org, p.ID, true, now); err != nil {
			t.Fatal(err)
		}
		if err := s.DeletePayoutSchedule(ctx, org, p.ID, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PayoutScheduleOf(ctx, "", p.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a deleted schedule is found: %v", err)
		}
		if err := s.SetPayoutSchedulePaused(ctx, org, p.ID, false, now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a deleted schedule resumed: %v", err)
		}
	})
}
