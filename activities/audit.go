package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// AuditStore is what the verification of an audit chain needs of the store (*store.Store).
type AuditStore interface {
	AuditVerificationOf(ctx context.Context, orgID, id string) (*store.AuditVerification, error)
	AuditChain(ctx context.Context, orgID string, after, through int64, limit int) ([]store.AuditLog, error)
	AdvanceAuditVerification(ctx context.Context, v *store.AuditVerification, from int64) (bool, error)
}

// Audit holds the activity of the background verification of an audit chain.
type Audit struct {
	Store AuditStore
	// PageSize is how many entries a page checks (AuditPageSize when zero).
	PageSize int
	Now      func() time.Time
}

// AuditPageSize is how many entries one activity of a verification checks, by default.
const AuditPageSize = 5000

// VerifyAuditPage checks the next page of a verification's chain, going on from the last
// entry the page before checked, and saves where it got with what it found in one
// statement: a retry after a save finds the place moved and goes on from there. The last
// page also checks that the chain reaches the head read when the verification started.
func (a *Audit) VerifyAuditPage(ctx context.Context, in workflows.AuditVerificationInput) (workflows.AuditVerificationProgress, error) {
	v, err := a.Store.AuditVerificationOf(ctx, "", in.VerificationID)
	if errors.Is(err, store.ErrNotFound) {
		return workflows.AuditVerificationProgress{}, classify(fmt.Errorf("%w: %s", errUnknownJob, in.VerificationID))
	}
	if err != nil {
		return workflows.AuditVerificationProgress{}, err
	}
	progress := workflows.AuditVerificationProgress{Checked: v.CheckedSeq, Entries: v.Entries, Done: v.Status != store.AuditVerificationRunning}
	if progress.Done {
		return progress, nil
	}
	size := a.PageSize
	if size <= 0 {
		size = AuditPageSize
	}
	rows, err := a.Store.AuditChain(ctx, v.OrgID, v.CheckedSeq, v.HeadSeq, size)
	if err != nil {
		return progress, err
	}
	verifier := &auditchain.Verifier{FromGenesis: true, Want: &auditchain.Head{Seq: v.HeadSeq, Hash: v.HeadHash}}
	if v.CheckedSeq > 0 {
		verifier.After = &auditchain.Head{Seq: v.CheckedSeq, Hash: v.CheckedHash}
	}
	from := v.CheckedSeq
	var broken *auditchain.Break
	for i := range rows {
		e := rows[i].ChainEntry()
		v.Entries++
		if broken = verifier.Add(&e); broken != nil {
			break
		}
		v.CheckedSeq, v.CheckedHash = e.Seq, e.Hash
	}
	// A full page short of the head is a piece of the chain; anything else is its end.
	if broken == nil && (len(rows) < size || v.CheckedSeq >= v.HeadSeq) {
		broken = verifier.Result().Broken
		v.Status = store.AuditVerificationIntact
	}
	now := time.Now().UTC()
	if a.Now != nil {
		now = a.Now().UTC()
	}
	v.UpdatedAt = now
	if broken != nil {
		b, _ := json.Marshal(broken)
		v.Status, v.Broken = store.AuditVerificationBroken, string(b)
	}
	if v.Status != store.AuditVerificationRunning {
		v.CompletedAt = &now
	}
	saved, err := a.Store.AdvanceAuditVerification(ctx, v, from)
	if err != nil {
		return progress, err
	}
	if !saved {
		// Another attempt of this page saved first: where it got is what stands.
		if v, err = a.Store.AuditVerificationOf(ctx, "", in.VerificationID); err != nil {
			return progress, err
		}
	}
	return workflows.AuditVerificationProgress{Checked: v.CheckedSeq, Entries: v.Entries, Done: v.Status != store.AuditVerificationRunning}, nil
}
