package store

import (
	"cmp"
	"context"
	"errors"
	"time"

	"gorm.io/gorm/clause"

	"github.com/opentreasury/treasury/internal/orders"
)

// ApprovalItem is an order waiting for approvers.
type ApprovalItem struct {
	ID                string
	OrgID             string
	App               string
	Domain            string
	OrderID           string
	Status            string
	RequiredApprovals int
	Reason            string
	PayloadHash       string
	Summary           string
	// Statement is the canonical JSON of what is approved (approvers.Statement).
	Statement string
	// Simulation is what the chain's node said the legs would move when the item was made
	// (chain.Simulation, JSON); "" where the chain cannot simulate.
	Simulation string
	CreatedBy  string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	DecidedAt  *time.Time
}

func (ApprovalItem) TableName() string { return "approval_items" }

// ApprovalDecision is one approver's decision on an item. The approver is a person, or a
// credential no person made: one person is one approver, whatever credentials they
// decide through, so the quorum counts people.
type ApprovalDecision struct {
	ItemID string `gorm:"primaryKey"`
	// Approver is who the quorum counts: DecidedByUser when there is one, else DecidedBy.
	Approver string `gorm:"primaryKey"`
	// DecidedBy is the credential that recorded the decision (key_…, oac_…, or usr_… for
	// a signed-in person); DecidedByUser the person behind it, "" when none is.
	DecidedBy     string
	DecidedByUser string
	Decision      string
	Comment       string
	CorrelationID string
	DecidedAt     time.Time
	// KeyID and Signature, for a signed decision, are the approver key (apk_…) and its
	// signature (standard base64) over the item's statement; "" otherwise.
	KeyID     string
	Signature string
	// AuthenticatorData and ClientDataJSON, for a passkey's decision, are the rest of its
	// WebAuthn assertion (base64url); Signature is then the assertion's.
	AuthenticatorData string
	ClientDataJSON    string `gorm:"column:client_data_json"`
}

func (ApprovalDecision) TableName() string { return "approval_decisions" }

// SigningRequest is what one leg of an order needs signed.
type SigningRequest struct {
	ID       string
	OrgID    string
	App      string
	Domain   string
	OrderID  string
	Position int
	// Attempt is 0 for the leg's transaction, n for its nth replacement.
	Attempt    int
	Leg        string
	WalletID   string
	Chain      string
	UnsignedTx string
	// RawUnsignedTx is the hex of the transaction's unsigned bytes (chain.Unsigned.Raw).
	RawUnsignedTx string
	// Intent is the order's statement (approvers.Statement, canonical JSON) and Approvals
	// the decisions on it (approvers.Evidence, a JSON list), as the request was created.
	Intent    string
	Approvals string
	// Scheme is the wallet's signature scheme; Digest is signed in it.
	Scheme string `gorm:"default:ed25519"`
	Digest string
	// Nonce is the transaction's account nonce, on a chain that has them.
	Nonce *uint64
	// ReplacesTxHash names the stuck transaction this request's replaces, if it does.
	ReplacesTxHash *string
	Status         string
	Signature      *string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	SignedAt       *time.Time
}

func (SigningRequest) TableName() string { return "signing_requests" }

// Errors of approval decisions.
var (
	ErrItemClosed     = errors.New("store: the approval item is no longer pending")
	ErrAlreadyDecided = errors.New("store: this approver has already decided")
)

// CreateApprovalItem inserts an approval item; creating it again (a retry) keeps the first.
func (s *Store) CreateApprovalItem(ctx context.Context, it *ApprovalItem) error {
	it.CreatedAt, it.ExpiresAt = it.CreatedAt.UTC(), it.ExpiresAt.UTC()
	return s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(it).Error
}

// SetApprovalItemStatus closes a pending item (approved, rejected, expired); an item
// already closed keeps its outcome.
func (s *Store) SetApprovalItemStatus(ctx context.Context, id, status string, at time.Time) error {
	at = at.UTC()
	return s.with(ctx).Model(&ApprovalItem{}).Where("id = ? AND status = ?", id, orders.ItemPending).
		Updates(map[string]any{"status": status, "decided_at": at}).Error
}

// RecordApprovalDecision stores one approver's decision on a pending, unexpired item and
// decides the item in the same transaction: rejected at the first REJECT, approved once
// the APPROVEs of distinct approvers reach the quorum. The store is the authority on the
// outcome; the workflow is told it. An approver who has decided already gets
// ErrAlreadyDecided, with d set to that first decision (and the credential that made it).
// An audit record, when given, is written in the same transaction.
func (s *Store) RecordApprovalDecision(ctx context.Context, orgID string, d *ApprovalDecision, audit *AuditLog) (*ApprovalItem, error) {
	var it ApprovalItem
	err := s.Tx(ctx, func(tx *Store) error {
		if err := tx.forUpdate(ctx).Where("id = ? AND org_id = ?", d.ItemID, orgID).Take(&it).Error; err != nil {
			return notFound(err)
		}
		if d.Approver == "" {
			d.Approver = cmp.Or(d.DecidedByUser, d.DecidedBy)
		}
		var mine ApprovalDecision
		if err := tx.with(ctx).Where("item_id = ? AND approver = ?", d.ItemID, d.Approver).Take(&mine).Error; err == nil {
			*d = mine
			return ErrAlreadyDecided
		}
		if it.Status != orders.ItemPending || !d.DecidedAt.Before(it.ExpiresAt) {
			return ErrItemClosed
		}
		d.DecidedAt = d.DecidedAt.UTC()
		if err := tx.with(ctx).Create(d).Error; err != nil {
			return err
		}
		var approvals int64
		if err := tx.with(ctx).Model(&ApprovalDecision{}).Where("item_id = ? AND decision = ?", it.ID, orders.Approve).Count(&approvals).Error; err != nil {
			return err
		}
		it.Status = orders.ItemOutcome(d.Decision, int(approvals), it.RequiredApprovals)
		if it.Status != orders.ItemPending {
			it.DecidedAt = &d.DecidedAt
			if err := tx.SetApprovalItemStatus(ctx, it.ID, it.Status, d.DecidedAt); err != nil {
				return err
			}
		}
		if audit != nil {
			return tx.AppendAudit(ctx, audit)
		}
		return nil
	})
	return &it, err
}

// ApprovalItem returns an item of an organisation with its decisions, oldest first.
func (s *Store) ApprovalItem(ctx context.Context, orgID, id string) (*ApprovalItem, []ApprovalDecision, error) {
	var it ApprovalItem
	if err := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Take(&it).Error; err != nil {
		return nil, nil, notFound(err)
	}
	ds, err := s.ApprovalDecisions(ctx, id)
	return &it, ds, err
}

// ApprovalDecisions lists an item's decisions, oldest first.
func (s *Store) ApprovalDecisions(ctx context.Context, itemID string) ([]ApprovalDecision, error) {
	ds, err := s.DecisionsOf(ctx, []string{itemID})
	return ds[itemID], err
}

// DecisionsOf returns the decisions on several items, by item id, oldest first.
func (s *Store) DecisionsOf(ctx context.Context, itemIDs []string) (map[string][]ApprovalDecision, error) {
	var ds []ApprovalDecision
	if err := s.with(ctx).Where("item_id IN ?", itemIDs).Order("decided_at, approver").Find(&ds).Error; err != nil {
		return nil, err
	}
	out := make(map[string][]ApprovalDecision, len(itemIDs))
	for _, d := range ds {
		out[d.ItemID] = append(out[d.ItemID], d)
	}
	return out, nil
}

// ApprovalFilter selects approval items.
type ApprovalFilter struct {
	OrgID string
	Apps  []string
	// WalletIDs, when set, keeps only items of orders from these wallets.
	WalletIDs []string
	Domain    string
	Status    string
	AfterID   string
	Limit     int
}

// ListApprovalItems pages through items, newest first.
func (s *Store) ListApprovalItems(ctx context.Context, f ApprovalFilter) ([]ApprovalItem, error) {
	q := s.with(ctx).Where("org_id = ? AND app IN ?", f.OrgID, f.Apps)
	if len(f.WalletIDs) > 0 {
		q = q.Where("order_id IN (?)", s.ordersOfWallets(ctx, f.WalletIDs))
	}
	if f.Domain != "" {
		q = q.Where("domain = ?", f.Domain)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	return page[ApprovalItem](q, f.AfterID, newestFirst, f.Limit)
}

// CreateSigningRequest inserts a signing request; creating it again (a retry) keeps the
// first, which is returned.
func (s *Store) CreateSigningRequest(ctx context.Context, r *SigningRequest) (*SigningRequest, error) {
	r.CreatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.ExpiresAt.UTC()
	if err := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(r).Error; err != nil {
		return nil, err
	}
	var cur SigningRequest
	err := s.with(ctx).Where("order_id = ? AND position = ? AND attempt = ?", r.OrderID, r.Position, r.Attempt).Take(&cur).Error
	return &cur, err
}

// SigningRequest returns a signing request of an organisation.
func (s *Store) SigningRequest(ctx context.Context, orgID, id string) (*SigningRequest, error) {
	var r SigningRequest
	if err := s.with(ctx).Where("id = ? AND org_id = ?", id, orgID).Take(&r).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

// SetSigningRequestStatus marks a pending request signed (with its signature) or expired.
func (s *Store) SetSigningRequestStatus(ctx context.Context, id, status string, signature *string, at time.Time) error {
	updates := map[string]any{"status": status}
	if signature != nil {
		updates["signature"], updates["signed_at"] = *signature, at.UTC()
	}
	return s.with(ctx).Model(&SigningRequest{}).Where("id = ? AND status = ?", id, orders.SigningPending).Updates(updates).Error
}

// SigningFilter selects signing requests.
type SigningFilter struct {
	OrgID     string
	Apps      []string
	WalletIDs []string
	Status    string
	AfterID   string
	Limit     int
}

// ListSigningRequests pages through signing requests, oldest first.
func (s *Store) ListSigningRequests(ctx context.Context, f SigningFilter) ([]SigningRequest, error) {
	q := s.with(ctx)
	if f.OrgID != "" {
		q = q.Where("org_id = ? AND app IN ?", f.OrgID, f.Apps)
	}
	q = inWallets(q, "wallet_id", f.WalletIDs)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	return page[SigningRequest](q, f.AfterID, oldestFirst, f.Limit)
}
