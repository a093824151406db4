package activities

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// verificationAnswerLost saves a page and then fails, as an activity whose worker died after its
// commit: the retry must go on from the saved place, counting nothing twice.
type verificationAnswerLost struct {
	*store.Store
	lose int
}

func (a *verificationAnswerLost) AdvanceAuditVerification(ctx context.Context, v *store.AuditVerification, from int64) (bool, error) {
	saved, err := a.Store.AdvanceAuditVerification(ctx, v, from)
	if err == nil && a.lose > 0 {
		a.lose--
		return saved, errors.New("the worker stopped before it answered")
	}
	return saved, err
}

func TestAVerificationGoesOnFromItsSavedPlace(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		creds, err := seed.Ensure(ctx, s, t.TempDir(), seed.URLs{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		head, err := s.AuditHead(ctx, creds.OrgID)
		if err != nil || head == nil || head.Seq < 20 {
			t.Fatalf("the seeded chain's head: %+v %v", head, err)
		}
		now := time.Now().UTC()
		v := &store.AuditVerification{ID: ids.New(ids.AuditVerification), OrgID: creds.OrgID, Status: store.AuditVerificationRunning,
			HeadSeq: head.Seq, HeadHash: head.Hash, Creator: store.Creator{CreatedBy: "test"}, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateAuditVerification(ctx, v); err != nil {
			t.Fatal(err)
		}
		lossy := &verificationAnswerLost{Store: s, lose: 2}
		acts := &Audit{Store: lossy, PageSize: 6}
		in := workflows.AuditVerificationInput{VerificationID: v.ID}
		var p workflows.AuditVerificationProgress
		for calls := 0; !p.Done; calls++ {
			if calls > 100 {
				t.Fatal("the verification does not end")
			}
			was := p
			if p, err = acts.VerifyAuditPage(ctx, in); err != nil {
				p = was
				continue
			}
			if p.Checked <= was.Checked && !p.Done {
				t.Fatalf("a page did not move: %+v after %+v", p, was)
			}
		}
		if lossy.lose != 0 {
			t.Fatalf("%d answers still to lose: the verification ended in fewer pages than expected", lossy.lose)
		}
		got, err := s.AuditVerificationOf(ctx, creds.OrgID, v.ID)
		if err != nil || got.Status != store.AuditVerificationIntact || got.Entries != head.Seq || got.CheckedSeq != head.Seq ||
			got.CheckedHash != head.Hash || got.Broken != "" || got.CompletedAt == nil {
			t.Fatalf("after lost answers: %+v %v (head %+v)", got, err, head)
		}
		// A page of a finished verification changes nothing.
		if again, err := acts.VerifyAuditPage(ctx, in); err != nil || !again.Done || again.Entries != head.Seq {
			t.Fatalf("a page after the end: %+v %v", again, err)
		}
		// An unknown verification is no use retrying.
		if _, err := acts.VerifyAuditPage(ctx, workflows.AuditVerificationInput{VerificationID: "avf_missing"}); !nonRetryable(err) {
			t.Fatalf("an unknown verification: %v", err)
		}
	})
}

func nonRetryable(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}
