package apitypes

import (
	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/events"
)

// AuditLog is one record of who did what (GET /audit-logs).
type AuditLog struct {
	auditchain.Record
	// Seq, PrevHash and Hash place the record in the organisation's audit chain
	// (docs/audit.md). They are absent from a record not yet placed: one an earlier
	// version of the service wrote during an upgrade, or one whose process stopped between
	// its commit and its placing, until the organisation's next write or the next start.
	Seq      int64  `json:"seq,omitempty"`
	PrevHash string `json:"prevHash,omitempty"`
	Hash     string `json:"hash,omitempty"`
}

// AuditLogPage is a page of GET /audit-logs, with the head of the organisation's audit
// chain as the answer found it: no record on the page comes after it.
type AuditLogPage struct {
	Page[AuditLog]
	// ChainHead is null before the organisation's first record.
	ChainHead *AuditChainHead `json:"chainHead"`
}

// AuditChainHead is where an organisation's audit chain ends: its last seq and hash.
type AuditChainHead = auditchain.Head

// AuditChainEntry is one line of GET /audit-logs/export: a record with its place in the
// chain, everything its hash covers.
type AuditChainEntry = auditchain.Entry

// AuditChainBreak is where a chain stops being one: the first entry that does not fit.
type AuditChainBreak = auditchain.Break

// AuditChainCheck is the answer of GET /audit-logs/verify: whether the organisation's
// stored chain is intact, from its first record to its head.
type AuditChainCheck struct {
	Intact bool `json:"intact"`
	// Entries is how many entries were checked (up to the first break).
	Entries int64 `json:"entries"`
	// Head is the stored head the chain was checked against; null before the first record.
	Head *AuditChainHead `json:"head"`
	// FirstBroken is null when the chain is intact.
	FirstBroken *AuditChainBreak `json:"firstBroken"`
}

// AuditVerification is a background check of the organisation's whole stored chain
// (POST /audit-logs/verifications): from its first entry to the head it had when the
// check started.
type AuditVerification struct {
	ID string `json:"id"`
	// Status is running, then intact, broken (FirstBroken says where) or failed (Error
	// says why the check could not be made).
	Status string `json:"status"`
	// Head is the head the chain must reach; null for a chain that had no entry.
	Head *AuditChainHead `json:"head"`
	// Checked is the seq of the last entry checked so far; Entries how many were checked
	// (up to the first break).
	Checked     int64            `json:"checked"`
	Entries     int64            `json:"entries"`
	FirstBroken *AuditChainBreak `json:"firstBroken"`
	Error       *string          `json:"error"`
	Creator
	CreatedAt   events.Time  `json:"createdAt"`
	UpdatedAt   events.Time  `json:"updatedAt"`
	CompletedAt *events.Time `json:"completedAt"`
}

// Actor is who acted: a key, an OAuth client or a person (Type key, oauth_client, user).
type Actor = auditchain.Actor
