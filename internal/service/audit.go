package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
)

// AuditChainHead is the head of the caller's organisation's audit chain, for a caller
// who reads audit records (GET /audit-logs shows it beside them); nil before the first.
func (s *Service) AuditChainHead(ctx context.Context, who Caller) (*auditchain.Head, error) {
	if _, err := readableApps(who, AuditRecords); err != nil {
		return nil, err
	}
	return s.Store.AuditHead(ctx, who.OrgID)
}

// readsWholeAuditChain refuses a caller who may not read the organisation's whole audit
// chain. The chain is the organisation's, every app's records in one, and only a whole
// run of it can be verified; so it is read with read on treasury (the dashboard's
// credential), and not by a key restricted to some wallets, which reaches only the
// records about them.
func readsWholeAuditChain(who Caller) error {
	if !who.Can(events.TreasuryApp, auth.ActionRead) {
		return refuse(PermissionDenied, "The audit chain holds every app's records: reading it needs read on the treasury app.")
	}
	if len(who.ResourceIDs) > 0 {
		return refuse(PermissionDenied, "The audit chain holds every app's records: a key restricted to some wallets cannot read it.")
	}
	return nil
}

// AuditExportFilter chooses a run of the chain: the records written from Since (zero:
// from the first) until Until (zero: to the head), after the seq After (the cursor), at
// most Limit of them.
type AuditExportFilter struct {
	Since, Until time.Time
	After        int64
	Limit        int
}

// AuditRun is a run of consecutive entries of an organisation's chain, seq From through
// Through (none when Through < From), read a page at a time as it is written out.
type AuditRun struct {
	From, Through int64
	// Next is the seq the next run of the same window starts after; 0 when this run
	// reaches the window's end.
	Next int64

	store *store.Store
	orgID string
}

// auditPage is how many entries one query reads, for an export or a check.
const auditPage = 500

// ExportAuditLog chooses the run of the caller's organisation's chain that f asks for
// (GET /audit-logs/export). A window is cut at whole entries of the chain, never between
// them: it runs from the first record written at or after Since to the record before the
// first written at or after Until, so that consecutive windows make consecutive runs,
// even where records written at the same moment took their places in another order.
func (s *Service) ExportAuditLog(ctx context.Context, who Caller, f AuditExportFilter) (*AuditRun, error) {
	if err := readsWholeAuditChain(who); err != nil {
		return nil, err
	}
	run := &AuditRun{store: s.Store, orgID: who.OrgID}
	head, err := s.Store.AuditHead(ctx, who.OrgID)
	if err != nil || head == nil {
		return run, err
	}
	first, last := int64(1), head.Seq
	if !f.Since.IsZero() {
		if first, err = s.Store.AuditSeqFrom(ctx, who.OrgID, f.Since); err != nil {
			return nil, err
		}
		if first == 0 {
			return run, nil // nothing written since
		}
	}
	if !f.Until.IsZero() {
		end, err := s.Store.AuditSeqFrom(ctx, who.OrgID, f.Until)
		if err != nil {
			return nil, err
		}
		if end != 0 {
			last = min(last, end-1)
		}
	}
	run.From = max(first, f.After+1)
	run.Through = min(last, run.From+int64(f.Limit)-1)
	if run.Through < last {
		run.Next = run.Through
	}
	return run, nil
}

// Pages reads the run in seq order, a page of entries at a time, and hands each page to
// write.
func (r *AuditRun) Pages(ctx context.Context, write func([]auditchain.Entry) error) error {
	for after := r.From - 1; after < r.Through; {
		rows, err := r.store.AuditChain(ctx, r.orgID, after, r.Through, auditPage)
		if err != nil || len(rows) == 0 {
			return err
		}
		page := make([]auditchain.Entry, len(rows))
		for i := range rows {
			page[i] = rows[i].ChainEntry()
		}
		if err := write(page); err != nil {
			return err
		}
		after = rows[len(rows)-1].Seq
	}
	return nil
}

// AuditChainCheck is what checking an organisation's stored chain found.
type AuditChainCheck struct {
	// Head is the stored head the chain was checked against; nil before the first record.
	Head *auditchain.Head
	// Entries is how many entries were checked, up to the first break.
	Entries int64
	// Broken is the first break; nil when the chain is intact.
	Broken *auditchain.Break
}

// AuditVerifyLimit is the longest chain GET /audit-logs/verify checks within its request,
// by default (Service.AuditVerifyLimit); a longer one is verified in the background
// (StartAuditVerification).
const AuditVerifyLimit = 100_000

// VerifyAuditChain checks the caller's organisation's stored chain, a page at a time,
// from its first record to the head as the check began (GET /audit-logs/verify): every
// seq present once and in order, every entry's fields hashing to its hash, every entry
// linked to the one before it, the last one the head. A chain longer than
// AuditVerifyLimit is refused: its check would outlast the request.
func (s *Service) VerifyAuditChain(ctx context.Context, who Caller) (*AuditChainCheck, error) {
	if err := readsWholeAuditChain(who); err != nil {
		return nil, err
	}
	head, err := s.Store.AuditHead(ctx, who.OrgID)
	if err != nil {
		return nil, err
	}
	if limit := cmp.Or(s.AuditVerifyLimit, AuditVerifyLimit); head != nil && head.Seq > limit {
		return nil, refuse(Conflict, fmt.Sprintf("The chain holds %d entries, more than the %d checked within a request: verify it in the background with POST /api/v1/audit-logs/verifications.",
			head.Seq, limit))
	}
	v := &auditchain.Verifier{FromGenesis: true, Want: head}
	if head != nil {
		run := &AuditRun{From: 1, Through: head.Seq, store: s.Store, orgID: who.OrgID}
		err := run.Pages(ctx, func(page []auditchain.Entry) error {
			for i := range page {
				if v.Add(&page[i]) != nil {
					return errChainBroken
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errChainBroken) {
			return nil, err
		}
	}
	res := v.Result()
	return &AuditChainCheck{Head: head, Entries: res.Entries, Broken: res.Broken}, nil
}

// errChainBroken stops reading a chain at its first break: nothing after it is needed.
var errChainBroken = errors.New("service: the audit chain is broken")

// AuditVerifications starts the background verifications of audit chains.
type AuditVerifications interface {
	StartAuditVerification(ctx context.Context, id string) error
}

// StartAuditVerification starts checking the caller's organisation's whole stored chain
// in the background, from its first entry to its head as of now (POST
// /audit-logs/verifications): the check of GET /audit-logs/verify for a chain of any
// length, resumed where it stopped after a crash. An empty chain is intact at once.
func (s *Service) StartAuditVerification(ctx context.Context, who Caller) (*store.AuditVerification, error) {
	if err := readsWholeAuditChain(who); err != nil {
		return nil, err
	}
	if s.AuditVerifications == nil {
		return nil, ErrWorkflowsUnavailable
	}
	head, err := s.Store.AuditHead(ctx, who.OrgID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	v := &store.AuditVerification{ID: s.newID(ids.AuditVerification), OrgID: who.OrgID, Status: store.AuditVerificationRunning,
		Creator: creatorOf(who), CreatedAt: now, UpdatedAt: now}
	if head == nil {
		v.Status, v.CompletedAt = store.AuditVerificationIntact, &now
	} else {
		v.HeadSeq, v.HeadHash = head.Seq, head.Hash
	}
	if err := s.Store.CreateAuditVerification(ctx, v); err != nil {
		return nil, err
	}
	if head == nil {
		return v, nil
	}
	// Started after the commit, so that the workflow finds its verification; one that
	// could not be started ends failed, saying so, rather than stay running for ever.
	if err := s.AuditVerifications.StartAuditVerification(ctx, v.ID); err != nil {
		s.Log.Error("audit verification not started", "verificationId", v.ID, "error", err)
		v.Status, v.Error, v.CompletedAt, v.UpdatedAt = store.AuditVerificationFailed, "its background job could not be started", &now, now
		// A start that failed in answering may have started the job all the same: one that
		// has saved a page already is left to run.
		if saved, err := s.Store.AdvanceAuditVerification(context.WithoutCancel(ctx), v, 0); err != nil || !saved {
			s.Log.Error("audit verification not marked failed", "verificationId", v.ID, "saved", saved, "error", err)
		}
		return nil, refuse(Unavailable, "The verification could not be started; try again.")
	}
	return v, nil
}

// AuditVerification reads a background verification of the caller's organisation's
// chain: where it stands, and what it found.
func (s *Service) AuditVerification(ctx context.Context, who Caller, id string) (*store.AuditVerification, error) {
	if err := readsWholeAuditChain(who); err != nil {
		return nil, err
	}
	v, err := s.Store.AuditVerificationOf(ctx, who.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "No verification of your organisation's audit chain has this id.")
	}
	return v, err
}
