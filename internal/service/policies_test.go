package service_test

import (
	"context"
	"errors"
	. "github.com/opentreasury/treasury/internal/service"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A PUT that runs beside a publish asking for change approvals is refused once that
// publish commits, rather than published over it: publishers of an app take turns, and
// each reads the policy in force only in its turn. On PostgreSQL, where both run at once.
func TestAPutDoesNotPublishOverAGuardedPolicyPublishedMeanwhile(t *testing.T) {
	s := storetest.NewPostgres(t)
	f := newFixtureOn(t, s)
	ctx := context.Background()
	who := f.as(t, f.creds.Keys["pay"].SK)
	held, release, guarded := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		guarded <- s.Tx(ctx, func(tx *store.Store) error {
			if err := tx.LockPolicy(ctx, f.creds.OrgID, "pay", time.Now()); err != nil {
				return err
			}
			p := &store.Policy{OrgID: f.creds.OrgID, App: "pay", Document: `{"changeApprovals":1}`, UpdatedBy: "key_other", UpdatedAt: time.Now()}
			if err := tx.PublishPolicy(ctx, p, &store.PolicyVersion{}); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	put := make(chan error, 1)
	go func() {
		_, err := f.svc.PutPolicy(ctx, who, "pay", []byte(`{"maxOrderUsd":"1"}`))
		put <- err
	}()
	// The publish commits only once the PUT waits on it.
	storetest.AwaitLockWaiter(t, `"policies"`)
	close(release)
	if err := <-guarded; err != nil {
		t.Fatal(err)
	}
	if err := <-put; KindOf(err) != Conflict {
		t.Fatalf("the PUT answered %v, want a conflict: the policy in force asks for approvals", err)
	}
	p, err := s.Policy(ctx, f.creds.OrgID, "pay")
	if err != nil || p.Document != `{"changeApprovals":1}` {
		t.Fatalf("in force: %+v (%v)", p, err)
	}
}

type unstartable struct{}

func (unstartable) StartPolicyDryRun(context.Context, string) error {
	return errors.New("temporal is away")
}

// A dry run whose workflow cannot be started ends failed, saying why, instead of showing
// as running for ever.
func TestADryRunThatCannotStartEndsFailed(t *testing.T) {
	f := newFixture(t)
	f.svc.DryRuns = unstartable{}
	ctx := context.Background()
	who := f.as(t, f.creds.Keys["pay"].SK)
	d, err := f.svc.CreatePolicyDraft(ctx, who, "pay", PolicyDraftInput{Rules: []byte(`{"maxOrderUsd":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.StartPolicyDryRun(ctx, who, "pay", PolicyDryRunInput{DraftID: d.ID}); KindOf(err) != Unavailable {
		t.Fatalf("start: %v, want unavailable", err)
	}
	runs, _, err := f.svc.PolicyDryRuns(ctx, who, "pay", d.ID, Page{Limit: 10})
	if err != nil || len(runs) != 1 || runs[0].Status != store.DryRunFailed || runs[0].Error == "" || runs[0].CompletedAt == nil {
		t.Fatalf("runs %+v (%v), want one failed", runs, err)
	}
}
