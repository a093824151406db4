// Package service holds the rules of what callers ask of the treasury: create and submit
// orders, decide approvals, submit signatures, and manage an app's developer resources
// (keys, OAuth clients, WebSocket configs, team, policy). Each operation takes the
// principal who asks and returns typed errors (*Error). The HTTP API, the console and the
// dev bundle's signer call the same functions, so no rule is written twice.
//
// Authorisation here is authoritative: the API's route checks answer early, but every
// operation checks again what its caller may do and reach.
package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// Workflows is what the service asks of Temporal: start an order's workflow and learn its
// policy decision, and deliver decisions and signatures to it.
type Workflows interface {
	// Submit starts the workflow (or finds it started) and delivers the submission, whose
	// id ("" for none) makes a repeat of the same submission return the first outcome;
	// within a bounded wait, past which it answers workflows.ErrNotStarted or
	// workflows.ErrDecisionPending.
	Submit(ctx context.Context, s workflows.Submission) (workflows.PolicyDecision, error)
	// Start starts the workflow (or finds it started), without waiting for it to run.
	Start(ctx context.Context, s workflows.Submission) error
	// SubmitOutcome is the policy decision of an earlier submission of the order, or
	// ErrUnknownSubmission when that submission never reached its workflow.
	SubmitOutcome(ctx context.Context, orderID, submissionID string) (workflows.PolicyDecision, error)
	SignalApproval(ctx context.Context, orderID string, d workflows.ApprovalDecision) error
	SignalSignature(ctx context.Context, orderID string, s workflows.Signature) error
	SignalRefusal(ctx context.Context, orderID string, f workflows.Refusal) error
}

// DryRunStarter starts the workflow of a policy dry run against history.
type DryRunStarter interface {
	StartPolicyDryRun(ctx context.Context, dryRunID string) error
}

// LiveCounts counts the live WebSocket connections of configs (on every replica).
type LiveCounts interface {
	LiveConnections(ctx context.Context, configIDs []string) map[string]int
}

// ErrWorkflowsUnavailable is what a missing Temporal connection answers.
var ErrWorkflowsUnavailable = errors.New("service: Temporal is not configured")

// Service runs the operations over the store, Temporal and the bus.
type Service struct {
	Store *store.Store
	// Workflows starts and signals order workflows; nil fails those operations with
	// ErrWorkflowsUnavailable.
	Workflows Workflows
	// DryRuns starts the background dry runs of policy drafts against history; nil fails
	// them with ErrWorkflowsUnavailable.
	DryRuns DryRunStarter
	// Recoveries starts the background recoveries of webhook messages; nil fails them with
	// ErrWorkflowsUnavailable.
	Recoveries RecoveryStarter
	// AuditVerifications starts the background verifications of audit chains; nil fails
	// them with ErrWorkflowsUnavailable.
	AuditVerifications AuditVerifications
	// Payouts keeps the Temporal Schedules of payout schedules; nil fails their changes
	// with ErrWorkflowsUnavailable.
	Payouts PayoutScheduler
	// PayoutMinInterval is the shortest every a payout schedule may have
	// (DefaultPayoutMinInterval when zero).
	PayoutMinInterval time.Duration
	// AuditVerifyLimit is the longest chain checked within a request (AuditVerifyLimit
	// when zero).
	AuditVerifyLimit int64
	// WalletSync reads a registered wallet's balances at once; nil leaves it to the
	// schedule.
	WalletSync WalletSyncer
	// Chains are the chains served here, which wallets may be registered on; empty
	// takes any (Solana's wallets are ed25519 keys, every other chain's EVM ones).
	Chains []string
	// BatchPartSizes are how many recipients a batch payment's part pays, by chain, from
	// the chains' configuration; orders.DefaultBatchPartSize where not set.
	BatchPartSizes map[string]int
	// Bus tells every process about config changes and revoked credentials.
	Bus events.Bus
	// Live counts WebSocket connections; nil counts none.
	Live LiveCounts
	// Webhooks seal signing secrets and vet endpoint URLs.
	Webhooks WebhookOptions
	Log      *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// ValuationMaxAge is how old the prices and portfolio valuations that answer a read
	// may be; 0 reads them afresh every time.
	ValuationMaxAge time.Duration
	// StartGrace is how long a submit has to start its order's workflow before a worker
	// starts it from the queue (DefaultStartGrace when zero).
	StartGrace time.Duration
	// Passkeys is the relying party of people's passkeys; its zero value registers none.
	Passkeys PasskeyConfig
	// NewID makes the id of a new organisation, wallet, OAuth client or credential's approver key
	// (ids.New when nil), and NewSecret a new key's or client's secret (auth.NewSecret when
	// nil). The dev seed gives both, so that the demo organisation it makes through these
	// same operations keeps the ids and secrets its credentials file names.
	NewID     func(prefix string) string
	NewSecret func(kind string) (string, error)

	valuations valuations
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) newID(prefix string) string {
	if s.NewID != nil {
		return s.NewID(prefix)
	}
	return ids.New(prefix)
}

func (s *Service) newSecret(kind string) (string, error) {
	if s.NewSecret != nil {
		return s.NewSecret(kind)
	}
	return auth.NewSecret(kind)
}

// creatorOf is who makes a record the caller creates: its credential and the person
// behind it.
func creatorOf(who Caller) store.Creator {
	if who.Kind == auth.KindSystem {
		return store.Creator{} // no credential: createdBy is null, as the API says of the seed's records
	}
	return store.Creator{CreatedBy: who.ID, CreatedByUser: who.Person}
}

// Caller is who asks: the authenticated principal, and the correlation id of the request,
// which the audit log, events and workflows carry.
type Caller struct {
	*auth.Principal
	CorrelationID string
	// IdempotencyKey of the request, when it carried one: a retried submit with the same
	// key is the same submission.
	IdempotencyKey string
}

// submissionID names the caller's submission when the request can be retried as the same
// one (it carries an Idempotency-Key); the credential is part of it, as it is of the
// key's scope.
func submissionID(who Caller) string {
	if who.IdempotencyKey == "" || who.Principal == nil {
		return ""
	}
	sum := sha256.Sum256([]byte(who.Principal.ID + "\n" + who.IdempotencyKey))
	return "submit-" + hex.EncodeToString(sum[:16])
}

// audit is the audit record of an action the caller took in app.
func (s *Service) audit(who Caller, app, action, resourceType, resourceID string, details any) *store.AuditLog {
	d, err := json.Marshal(details)
	if err != nil || string(d) == "null" {
		d = []byte("{}")
	}
	return &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: who.OrgID, App: app, ActorType: who.ActorType(),
		ActorID: who.ID, Action: action, ResourceType: resourceType, ResourceID: resourceID,
		CorrelationID: who.CorrelationID, Details: string(d), CreatedAt: s.now()}
}

// auditAfter writes the audit record of an action that has already happened (a workflow
// started, a signature signalled). It cannot be undone if the write fails, so the failure
// is logged with everything the record held.
func (s *Service) auditAfter(ctx context.Context, a *store.AuditLog) {
	if err := s.Store.AppendAudit(context.WithoutCancel(ctx), a); err != nil {
		s.Log.Error("audit record not written", "action", a.Action, "actor", a.ActorID, "resourceId", a.ResourceID,
			"correlationId", a.CorrelationID, "error", err.Error())
	}
}

// writeAudited runs write and the audit record of the caller's change to its app's
// resources in one transaction.
func (s *Service) writeAudited(ctx context.Context, who Caller, write func(tx *store.Store) error,
	action, resourceType, id string, details any) error {
	return s.Store.Tx(ctx, func(tx *store.Store) error {
		if err := write(tx); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.audit(who, who.App, action, resourceType, id, details))
	})
}

// announce tells every process about a change. It reports false when the bus could not
// take it (the change itself is stored, and a retry announces it again).
func (s *Service) announce(ctx context.Context, who Caller, c events.Control) bool {
	if s.Bus == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.Bus.Publish(ctx, c); err != nil {
		s.Log.Error("bus: control message not sent", "kind", c.Kind, "configId", c.ConfigID,
			"credentialId", c.CredentialID, "correlationId", who.CorrelationID, "error", err)
		return false
	}
	return true
}
