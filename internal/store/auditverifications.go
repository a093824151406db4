package store

import (
	"context"
	"time"
)

// Audit verification states: running, then intact, broken (the chain breaks: Broken says
// where) or failed (the check could not be made: Error says why).
const (
	AuditVerificationRunning = "running"
	AuditVerificationIntact  = "intact"
	AuditVerificationBroken  = "broken"
	AuditVerificationFailed  = "failed"
)

// AuditVerification is a check of an organisation's stored audit chain, from its first
// entry to the head read when it started, made a page at a time in the background.
type AuditVerification struct {
	ID    string
	OrgID string
	// Status is one of the AuditVerification states.
	Status string
	// HeadSeq and HeadHash are the head the chain must reach.
	HeadSeq  int64
	HeadHash string
	// CheckedSeq and CheckedHash are the last entry checked: the next page goes on from it.
	CheckedSeq  int64
	CheckedHash string
	// Entries counts the entries checked, the broken one included.
	Entries int64
	// Broken is the first break (auditchain.Break, JSON) of a broken chain; "" otherwise.
	Broken      string
	Error       string
	Creator     `gorm:"embedded"`
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt *time.Time
}

func (AuditVerification) TableName() string { return "audit_verifications" }

// CreateAuditVerification stores a new verification.
func (s *Store) CreateAuditVerification(ctx context.Context, v *AuditVerification) error {
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	return s.with(ctx).Create(v).Error
}

// AuditVerificationOf returns one verification; orgID "" finds it in any organisation
// (the worker).
func (s *Store) AuditVerificationOf(ctx context.Context, orgID, id string) (*AuditVerification, error) {
	q := s.with(ctx).Where("id = ?", id)
	if orgID != "" {
		q = q.Where("org_id = ?", orgID)
	}
	var v AuditVerification
	if err := q.Take(&v).Error; err != nil {
		return nil, notFound(err)
	}
	return &v, nil
}

// AdvanceAuditVerification saves a verification's next page, unless a page from the same
// place was saved already (a retried activity): it reports whether it saved. from is the
// CheckedSeq the page started from; v holds where it ends and what it found.
func (s *Store) AdvanceAuditVerification(ctx context.Context, v *AuditVerification, from int64) (bool, error) {
	res := s.with(ctx).Model(&AuditVerification{}).
		Where("id = ? AND checked_seq = ? AND status = ?", v.ID, from, AuditVerificationRunning).
		Updates(map[string]any{"status": v.Status, "checked_seq": v.CheckedSeq, "checked_hash": v.CheckedHash,
			"entries": v.Entries, "broken": v.Broken, "error": v.Error, "updated_at": v.UpdatedAt.UTC(), "completed_at": v.CompletedAt})
	return res.RowsAffected == 1, res.Error
}
