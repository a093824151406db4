package service_test

import (
	"context"
	"errors"
	"testing"

	"github.com/opentreasury/treasury/internal/ids"
	. "github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

type failingStarter struct{}

func (failingStarter) StartAuditVerification(context.Context, string) error {
	return errors.New("temporal is away")
}

// A chain longer than the limit is not checked within the request, which points to the
// background verification; a verification whose job cannot start ends failed, saying so.
func TestALongChainIsVerifiedInTheBackgroundOnly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dashboard := f.as(t, f.creds.Keys["treasury"].Read)
	within, err := f.svc.VerifyAuditChain(ctx, dashboard)
	if err != nil || within.Broken != nil || within.Head == nil {
		t.Fatalf("the seeded chain: %+v %v", within, err)
	}
	f.svc.AuditVerifyLimit = within.Head.Seq - 1
	if _, err := f.svc.VerifyAuditChain(ctx, dashboard); KindOf(err) != Conflict {
		t.Fatalf("a chain over the limit checked within the request: %v", err)
	}

	if _, err := f.svc.StartAuditVerification(ctx, dashboard); !errors.Is(err, ErrWorkflowsUnavailable) {
		t.Fatalf("without Temporal: %v", err)
	}
	f.svc.AuditVerifications = failingStarter{}
	var id string
	f.svc.NewID = func(prefix string) string {
		if prefix == ids.AuditVerification {
			id = ids.New(prefix)
			return id
		}
		return ids.New(prefix)
	}
	if _, err := f.svc.StartAuditVerification(ctx, dashboard); KindOf(err) != Unavailable {
		t.Fatalf("a job that cannot start: %v", err)
	}
	v, err := f.svc.Store.AuditVerificationOf(ctx, f.creds.OrgID, id)
	if err != nil || v.Status != store.AuditVerificationFailed || v.Error == "" || v.CompletedAt == nil {
		t.Fatalf("the verification that could not start: %+v %v", v, err)
	}
}
