package activities

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/activity"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// OrderStore is what the order activities need of the store: the order and what it refers to, and each step applied in one transaction (*store.Store).
type OrderStore interface {
	ApplyOrderStep(ctx context.Context, ch store.OrderChange) (*store.StepResult, error)
	MarkSubmitted(ctx context.Context, orderID, correlationID string, at time.Time) (*store.StepResult, error)
	StepApplied(ctx context.Context, orderID, step string) (bool, error)
	Order(ctx context.Context, id string) (*store.Order, []store.OrderLeg, error)
	Wallet(ctx context.Context, orgID, id string) (*store.Wallet, error)
	ApprovalItem(ctx context.Context, orgID, id string) (*store.ApprovalItem, []store.ApprovalDecision, error)
	SigningRequest(ctx context.Context, orgID, id string) (*store.SigningRequest, error)
}

// Orders holds the activities of the order workflow. Each applies one step through
// store.ApplyOrderStep, so a retried activity changes nothing twice and emits no second event.
type Orders struct {
	Store OrderStore
	Chain chain.Adapter
	Log   *slog.Logger
	Now   func() time.Time
	// ChainPoll is how often CheckLeg reads a pending transaction (50 ms by default).
	ChainPoll time.Duration
	// ReplaceAfter is how long a leg's latest transaction may stay below the fee market
	// before CheckLeg reports it for replacement (DefaultReplaceAfter when zero).
	ReplaceAfter time.Duration
}

// DefaultReplaceAfter is how long a transaction may stay below the fee market, by default,
// before its replacement is asked for.
const DefaultReplaceAfter = 3 * time.Minute

func (a *Orders) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// apply runs one step of the lifecycle as orders declares it (its key, the statuses it may
// start from, the status it leaves, its event's name), so no activity spells a transition
// of its own; ch brings the rest, and position names the leg of a leg step. It classifies
// the step's error once: a refused transition can never succeed on retry; anything else
// (the database) may.
func (a *Orders) apply(ctx context.Context, step orders.Step, position int, ch store.OrderChange) (*store.StepResult, error) {
	ch.Step, ch.From, ch.To = step.Key(position), step.From, step.To
	switch {
	case step.Event != "" && ch.Event == nil:
		ch.Event = &store.EventSpec{Name: step.Event}
	case step.Event != "":
		ch.Event.Name = step.Event
	case ch.Event != nil:
		return nil, classify(fmt.Errorf("%w: %s", errStepEvent, step.Name))
	}
	if ch.At.IsZero() {
		ch.At = a.now()
	}
	res, err := a.Store.ApplyOrderStep(ctx, ch)
	return res, classify(err)
}

// MarkSubmitted moves a draft into the pipeline and emits Order.Submitted. It fixes the
// version of the app's policy that will evaluate the order: the one in force now, whatever
// is published while the order waits.
func (a *Orders) MarkSubmitted(ctx context.Context, in workflows.StepInput) error {
	_, err := a.Store.MarkSubmitted(ctx, in.OrderID, in.CorrelationID, a.now())
	return classify(err)
}

// EvaluatePolicy decides the order against its app's policy as it stands now, and records
// whether approval is needed. It is the one place policy is evaluated for an order, inside
// the step's transaction with the order locked.
func (a *Orders) EvaluatePolicy(ctx context.Context, in workflows.StepInput) (workflows.PolicyDecision, error) {
	var d workflows.PolicyDecision
	res, err := a.apply(ctx, orders.StepPolicyEvaluated, 0, store.OrderChange{OrderID: in.OrderID, CorrelationID: in.CorrelationID,
		Also: func(tx *store.Store, o *store.Order, _ []store.OrderLeg) error {
			var err error
			if d, err = a.decide(ctx, tx, o); err != nil {
				return err
			}
			doc, err := d.Record()
			if err != nil {
				return err
			}
			o.ApprovalRequired, o.ApprovalQuorum, o.PolicyDecision = d.ApprovalRequired, d.Quorum, &doc
			return nil
		}})
	if err != nil {
		return workflows.PolicyDecision{}, err
	}
	// A retry returns the decision taken the first time, whatever the policy says now:
	// policy is decided once per order.
	if !res.Applied && res.Order.PolicyDecision != nil {
		return workflows.RecordedDecision(*res.Order.PolicyDecision)
	}
	return d, nil
}

// decide evaluates an order against the version of its app's policy fixed at submit (the
// one in force, for an order submitted before versions were recorded) and the volume
// counted against its limits. Where a rule limits volume it takes the organisation's turn
// for volume first, so that concurrent evaluations count each other. Where none does, it
// counts nothing and takes no turn: its decision depends on no other order, and an order
// it lets through is counted by later evaluations of other apps whichever way the two
// interleave. Counting a busy wallet's day at every submit, inside the transaction, would
// cost more the more the wallet pays (docs/benchmarks.md, As the data grows).
func (a *Orders) decide(ctx context.Context, tx *store.Store, o *store.Order) (workflows.PolicyDecision, error) {
	rules, version, err := tx.PolicyRules(ctx, o.OrgID, o.App, o.PolicyVersion)
	if err != nil {
		return workflows.PolicyDecision{}, err
	}
	pol := o.Details.PolicyOrder(o.App, o.WalletID, o.AmountUSD)
	var usage policy.Usage
	if rules.CountsVolume() {
		now := a.now()
		if err := tx.GuardPolicyWindows(ctx, o.OrgID, now); err != nil {
			return workflows.PolicyDecision{}, err
		}
		if usage, err = tx.PolicyUsage(ctx, o.OrgID, rules, pol, now, false, o.ID); err != nil {
			return workflows.PolicyDecision{}, err
		}
	}
	e := rules.Evaluate(pol, usage)
	o.PolicyAllowed = e.Allowed()
	o.PolicyAsset, _ = policy.WindowKey(policy.Window{Scope: policy.ScopeAsset}, pol)
	o.PolicyDestination, _ = policy.WindowKey(policy.Window{Scope: policy.ScopeDestination}, pol)
	d := workflows.PolicyDecision{Allowed: e.Allowed(), ApprovalRequired: e.ApprovalRequired, Quorum: e.Quorum, PolicyVersion: version}
	for _, v := range e.Violations() {
		d.Violations = append(d.Violations, policy.Violation{Rule: v.Rule, Message: v.Message})
	}
	return d, nil
}

// RequestApproval opens the approval item, bound to the order's payload hash, with what
// the chain's node says the order's legs would move now.
func (a *Orders) RequestApproval(ctx context.Context, in workflows.ApprovalRequest) (string, error) {
	itemID := ids.New(ids.ApprovalItem)
	simulation := a.simulate(ctx, in.OrderID)
	res, err := a.apply(ctx, orders.StepApprovalRequested, 0, store.OrderChange{OrderID: in.OrderID,
		Reason: fmt.Sprintf("needs %d approval(s)", in.Quorum), CorrelationID: in.CorrelationID,
		Mutate: func(o *store.Order, _ []store.OrderLeg) { o.ApprovalItemID = &itemID },
		Also: func(tx *store.Store, o *store.Order, legs []store.OrderLeg) error {
			summary, _ := json.Marshal(map[string]any{"amountUsd": o.AmountUSD.StringFixedBank(2), "walletId": o.WalletID,
				"chain": o.Chain, "details": o.Details.Details})
			w, err := tx.Wallet(ctx, o.OrgID, o.WalletID)
			if err != nil {
				return err
			}
			statement, err := a.statement(o, legs, w.Address, in)
			if err != nil {
				return err
			}
			return tx.CreateApprovalItem(ctx, &store.ApprovalItem{ID: itemID, OrgID: o.OrgID, App: o.App, Domain: o.Domain,
				OrderID: o.ID, Status: orders.ItemPending, RequiredApprovals: in.Quorum,
				Reason:      fmt.Sprintf("orders worth %s USD need %d approval(s)", o.AmountUSD.StringFixedBank(2), in.Quorum),
				PayloadHash: o.PayloadHash, Summary: string(summary), Statement: statement, Simulation: simulation, CreatedBy: o.CreatedBy,
				CreatedAt: a.now(), ExpiresAt: in.ExpiresAt})
		}})
	if err != nil {
		return "", err
	}
	return *res.Order.ApprovalItemID, nil
}

// SimulationTimeout bounds the simulation of an order's legs when its approval item is
// made: the step runs as a local activity, inside its workflow task.
const SimulationTimeout = 3 * time.Second

// simulate runs the order's legs on its chain's node (chain.Simulation, JSON) for the
// approvers to see beside the statement: "" where the chain cannot simulate, or once the
// item exists (a retried step keeps what the first run wrote). A node that fails or is
// slow leaves its error in the simulation instead of holding the order back.
func (a *Orders) simulate(ctx context.Context, orderID string) string {
	sim, ok := a.Chain.(chain.Simulator)
	if !ok {
		return ""
	}
	o, legs, err := a.Store.Order(ctx, orderID)
	if err != nil || o.ApprovalItemID != nil || len(legs) == 0 {
		return ""
	}
	w, err := a.Store.Wallet(ctx, o.OrgID, o.WalletID)
	if err != nil {
		return ""
	}
	chainLegs := make([]chain.Leg, len(legs))
	for i := range legs {
		if chainLegs[i], err = legOf(o, legs, i, w.Address); err != nil {
			return ""
		}
	}
	ctx, cancel := context.WithTimeout(ctx, SimulationTimeout)
	defer cancel()
	s, err := sim.Simulate(ctx, chainLegs)
	switch {
	case errors.Is(err, chain.ErrNoSimulator):
		return ""
	case err != nil:
		a.Log.Warn("the approval item shows no simulation: the node did not run it", "orderId", o.ID, "chain", o.Chain, "error", err.Error())
		s = chain.Simulation{Legs: []chain.SimulatedLeg{}, Error: err.Error()}
	}
	s.At = events.FormatTime(a.now())
	raw, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return string(raw)
}

// statement is what the approvers of the order approve (approvers.Statement), in its
// canonical JSON: every leg as its chain will carry it, read from the chain's
// configuration. A leg the chain cannot describe (an asset it lacks) leaves the statement
// empty: that leg is refused at its signing request anyway, and the approvers see why.
func (a *Orders) statement(o *store.Order, legs []store.OrderLeg, from string, in workflows.ApprovalRequest) (string, error) {
	st := approvers.Statement{OrgID: o.OrgID, App: o.App, Domain: o.Domain, OrderID: o.ID, Chain: o.Chain, WalletID: o.WalletID,
		From: from, RequiredApprovals: in.Quorum, Intent: make([]chain.Intent, len(legs))}
	if !in.ExpiresAt.IsZero() {
		st.ExpiresAt = events.FormatTime(in.ExpiresAt)
	}
	if o.PolicyVersion != nil {
		st.PolicyVersion = *o.PolicyVersion
	}
	for i := range legs {
		leg, err := legOf(o, legs, i, from)
		if err != nil {
			return "", err
		}
		if st.Intent[i], err = a.Chain.Describe(leg); err != nil {
			a.Log.Warn("no statement: a leg the chain cannot describe", "orderId", o.ID, "leg", leg.Kind, "error", err.Error())
			return "", nil
		}
	}
	canonical, err := st.Canonical()
	return string(canonical), err
}

// evidence is what a signing request carries for its signer to check (SPEC 3.5a): the
// intent, which is the statement the approvers decided on (or, for an order that needed
// no approval, the same statement with no quorum), and every decision on it as
// approvers.Evidence, JSON.
func (a *Orders) evidence(ctx context.Context, tx *store.Store, o *store.Order, legs []store.OrderLeg, from string) (intent, approvals string, err error) {
	if o.ApprovalItemID == nil {
		intent, err = a.statement(o, legs, from, workflows.ApprovalRequest{})
		return intent, "[]", err
	}
	item, decisions, err := tx.ApprovalItem(ctx, o.OrgID, *o.ApprovalItemID)
	if err != nil {
		return "", "", err
	}
	out := make([]approvers.Evidence, len(decisions))
	for i, d := range decisions {
		out[i] = approvers.Evidence{Decision: d.Decision, DecidedBy: d.DecidedBy, DecidedByUser: d.DecidedByUser, KeyID: d.KeyID,
			Signature: d.Signature, AuthenticatorData: d.AuthenticatorData, ClientDataJSON: d.ClientDataJSON, Statement: item.Statement,
			DecidedAt: events.FormatTime(d.DecidedAt)}
		if d.KeyID != "" {
			key, err := tx.ApproverKey(ctx, o.OrgID, d.KeyID)
			if err != nil {
				return "", "", err
			}
			out[i].Scheme = key.Scheme
		}
	}
	raw, err := json.Marshal(out)
	return item.Statement, string(raw), err
}

// MarkApproved closes the approval item and emits Order.Approved.
func (a *Orders) MarkApproved(ctx context.Context, in workflows.ApprovalRequest) error {
	_, err := a.apply(ctx, orders.StepApproved, 0, store.OrderChange{OrderID: in.OrderID, Reason: "quorum reached",
		CorrelationID: in.CorrelationID,
		Also: func(tx *store.Store, o *store.Order, _ []store.OrderLeg) error {
			return tx.SetApprovalItemStatus(ctx, *o.ApprovalItemID, orders.ItemApproved, a.now())
		},
		Event: &store.EventSpec{Body: events.OrderEvent{Quorum: in.Quorum}}})
	return err
}

// ApprovalOutcome reads the order's approval item as the store decided it.
func (a *Orders) ApprovalOutcome(ctx context.Context, in workflows.ApprovalRequest) (workflows.ApprovalOutcome, error) {
	o, _, err := a.Store.Order(ctx, in.OrderID)
	if err != nil {
		return workflows.ApprovalOutcome{}, classify(err)
	}
	if o.ApprovalItemID == nil {
		return workflows.ApprovalOutcome{Status: orders.ItemPending}, nil
	}
	it, ds, err := a.Store.ApprovalItem(ctx, o.OrgID, *o.ApprovalItemID)
	if err != nil {
		return workflows.ApprovalOutcome{}, err
	}
	out := workflows.ApprovalOutcome{Status: it.Status}
	for _, d := range ds {
		if d.Decision == orders.Reject && out.RejectedBy == "" {
			out.RejectedBy, out.RejectedByUser = d.DecidedBy, d.DecidedByUser
		}
		if (it.Status == orders.ItemRejected && d.Decision == orders.Reject) || (it.Status == orders.ItemApproved && d.Decision == orders.Approve) {
			out.CorrelationID = d.CorrelationID
		}
	}
	return out, nil
}

// RejectOrder ends the order rejected (policy, approver or expired) and emits Order.Rejected.
func (a *Orders) RejectOrder(ctx context.Context, in workflows.RejectInput) error {
	now := a.now()
	detail := map[string]any{}
	if len(in.Violations) > 0 {
		detail["violations"] = in.Violations
	}
	body := events.OrderEvent{Reason: in.Reason}
	if in.DecidedBy != "" {
		user := events.NullableString(in.DecidedByUser)
		detail["decidedBy"], detail["decidedByUser"] = in.DecidedBy, &user
		body.DecidedBy, body.DecidedByUser = in.DecidedBy, &user
	}
	detailJSON, _ := json.Marshal(detail)
	for _, v := range in.Violations {
		body.Violations = append(body.Violations, events.Violation(v))
	}
	_, err := a.apply(ctx, orders.StepRejected, 0, store.OrderChange{OrderID: in.OrderID,
		Reason: in.Reason, CorrelationID: in.CorrelationID, At: now,
		Mutate: func(o *store.Order, legs []store.OrderLeg) {
			reason, d := in.Reason, string(detailJSON)
			o.RejectionReason, o.RejectionDetail, o.CompletedAt = &reason, &d, &now
			// No leg of a rejected order will run: none is left pending.
			for i := range legs {
				if legs[i].Status == orders.LegPending {
					legs[i].Status = orders.StatusRejected
				}
			}
		},
		Also: func(tx *store.Store, _ *store.Order, _ []store.OrderLeg) error {
			if in.ItemID == "" {
				return nil
			}
			status := orders.ItemRejected
			if in.Reason == orders.RejectedExpired {
				status = orders.ItemExpired
			}
			return tx.SetApprovalItemStatus(ctx, in.ItemID, status, now)
		},
		Event: &store.EventSpec{Body: body}})
	return err
}

// legOf describes one leg of a stored order to its chain: the order's own fields and its
// canonical payload, which must still hash to what was approved.
func legOf(o *store.Order, legs []store.OrderLeg, pos int, from string) (chain.Leg, error) {
	names := make([]string, len(legs))
	for i, l := range legs {
		names[i] = l.Leg
	}
	payload, hash, err := orders.Payload(o.ID, o.WalletID, o.Chain, o.Details, names)
	if err != nil {
		return chain.Leg{}, err
	}
	if hash != o.PayloadHash {
		return chain.Leg{}, fmt.Errorf("order %s payload changed since it was created", o.ID)
	}
	leg := chain.Leg{Chain: o.Chain, OrderID: o.ID, Position: pos, Kind: legs[pos].Leg, From: from,
		Payload: json.RawMessage(payload), PayloadHash: hash}
	leg.Asset, leg.Amount = o.Details.Valued()
	switch d := o.Details.Details.(type) {
	case *orders.Payment:
		leg.To = d.Destination.Address
		if d.IsBatch() {
			part, _ := d.Part(o.Chain, pos)
			leg.To, leg.Amount = "", decimal.Zero
			for _, r := range part {
				leg.Recipients = append(leg.Recipients, chain.Payee{To: r.Address, Amount: r.Amount})
				leg.Amount = leg.Amount.Add(r.Amount)
			}
		}
	case *orders.Trade:
		leg.BuyAsset, leg.MaxSlippageBps = d.BuyAsset, d.MaxSlippageBps
	case *orders.Earn:
		leg.Protocol = d.Protocol
	case *orders.Borrow:
		leg.Protocol = d.Protocol
	}
	return leg, nil
}

// RequestSignature prepares the leg's transaction on its chain, creates its signing
// request and emits Wallet.SigningRequested. The transaction is priced before the step's
// transaction (it asks the node); its nonce is assigned inside it, so a step that rolls
// back or is retried takes no nonce.
func (a *Orders) RequestSignature(ctx context.Context, in workflows.LegInput) (workflows.SigningRequestRef, error) {
	o, legs, err := a.Store.Order(ctx, in.OrderID)
	if err != nil {
		return workflows.SigningRequestRef{}, classify(err)
	}
	if in.Attempt > 0 {
		return a.requestReplacement(ctx, in, o, legs)
	}
	if existing := legs[in.Position].SigningRequestID; existing != nil {
		return a.signingRequestRef(ctx, o.OrgID, *existing)
	}
	w, err := a.Store.Wallet(ctx, o.OrgID, o.WalletID)
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	leg, err := legOf(o, legs, in.Position, w.Address)
	leg.Scheme = w.Scheme
	if err != nil {
		return workflows.SigningRequestRef{}, classify(fmt.Errorf("%w: %w", errCorruptOrder, err))
	}
	draft, err := a.Chain.Prepare(ctx, leg)
	if err != nil {
		return workflows.SigningRequestRef{}, classify(err) // a refusal for good fails the order
	}
	if w.Scheme != draft.Scheme {
		// Retried, not failed: a configuration put right lets the order go on.
		return workflows.SigningRequestRef{}, fmt.Errorf("wallet %s signs with %s, but %s's adapter signs with %s", w.ID, w.Scheme, o.Chain, draft.Scheme)
	}
	reqID := ids.New(ids.SigningRequest)
	var created *store.SigningRequest
	res, err := a.apply(ctx, orders.StepSignatureRequested, in.Position, store.OrderChange{OrderID: in.OrderID,
		Reason: "signature requested for " + in.Leg, CorrelationID: in.CorrelationID,
		Mutate: func(o *store.Order, legs []store.OrderLeg) {
			legs[in.Position].SigningRequestID, legs[in.Position].Status = &reqID, orders.StatusPendingSignature
		},
		Also: func(tx *store.Store, o *store.Order, legs []store.OrderLeg) error {
			var nonce uint64
			if draft.Nonced {
				if nonce, err = tx.TakeNonce(ctx, o.Chain, w.Address, draft.NonceFloor); err != nil {
					return err
				}
			}
			unsigned, err := draft.Seal(nonce)
			if err != nil {
				return err
			}
			intent, approvals, err := a.evidence(ctx, tx, o, legs, w.Address)
			if err != nil {
				return err
			}
			created, err = tx.CreateSigningRequest(ctx, &store.SigningRequest{ID: reqID, OrgID: o.OrgID, App: o.App,
				Domain: o.Domain, OrderID: o.ID, Position: in.Position, Leg: in.Leg, WalletID: o.WalletID, Chain: o.Chain,
				UnsignedTx: string(unsigned.Fields), RawUnsignedTx: hex.EncodeToString(unsigned.Raw), Scheme: unsigned.Scheme, Digest: unsigned.Digest, Nonce: unsigned.Nonce,
				Intent: intent, Approvals: approvals, Status: orders.SigningPending, CreatedAt: a.now(), ExpiresAt: in.ExpiresAt})
			return err
		},
		Event: &store.EventSpec{Leg: &in.Position, Body: events.OrderEvent{
			SigningRequestID: reqID, ExpiresAt: events.TimeOf(in.ExpiresAt)}}})
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	if res.Applied {
		return workflows.SigningRequestRef{ID: created.ID, Digest: created.Digest}, nil
	}
	return a.signingRequestRef(ctx, res.Order.OrgID, *res.Legs[in.Position].SigningRequestID)
}

// requestReplacement asks for the signature of the transaction that replaces the leg's
// latest one: for one stuck below the fee market, the same call at the same nonce and a
// higher fee; for one that lapsed, the same call on a fresh blockhash. Its step is keyed by
// the attempt, so a retry makes no second request.
func (a *Orders) requestReplacement(ctx context.Context, in workflows.LegInput, o *store.Order, legs []store.OrderLeg) (workflows.SigningRequestRef, error) {
	step := orders.StepReplacementRequested.Attempt(in.Attempt)
	if done, err := a.Store.StepApplied(ctx, o.ID, step.Key(in.Position)); err != nil || done {
		if err != nil {
			return workflows.SigningRequestRef{}, err
		}
		return a.signingRequestRef(ctx, o.OrgID, *legs[in.Position].SigningRequestID)
	}
	stuck := legs[in.Position].TxHash
	if stuck == nil || legs[in.Position].SigningRequestID == nil {
		return workflows.SigningRequestRef{}, classify(fmt.Errorf("%w: the leg has no transaction to replace", errNotForThisStep))
	}
	prev, err := a.Store.SigningRequest(ctx, o.OrgID, *legs[in.Position].SigningRequestID)
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	w, err := a.Store.Wallet(ctx, o.OrgID, o.WalletID)
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	leg, err := legOf(o, legs, in.Position, w.Address)
	if err != nil {
		return workflows.SigningRequestRef{}, classify(fmt.Errorf("%w: %w", errCorruptOrder, err))
	}
	leg.Scheme, leg.Replaces = w.Scheme, json.RawMessage(prev.UnsignedTx)
	draft, err := a.Chain.Prepare(ctx, leg)
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	unsigned, err := draft.Seal(0)
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	reqID := ids.New(ids.SigningRequest)
	res, err := a.apply(ctx, step, in.Position, store.OrderChange{OrderID: in.OrderID, CorrelationID: in.CorrelationID,
		Mutate: func(_ *store.Order, legs []store.OrderLeg) { legs[in.Position].SigningRequestID = &reqID },
		Also: func(tx *store.Store, o *store.Order, legs []store.OrderLeg) error {
			intent, approvals, err := a.evidence(ctx, tx, o, legs, w.Address)
			if err != nil {
				return err
			}
			_, err = tx.CreateSigningRequest(ctx, &store.SigningRequest{ID: reqID, OrgID: o.OrgID, App: o.App,
				Domain: o.Domain, OrderID: o.ID, Position: in.Position, Attempt: in.Attempt, Leg: in.Leg, WalletID: o.WalletID,
				Chain: o.Chain, UnsignedTx: string(unsigned.Fields), RawUnsignedTx: hex.EncodeToString(unsigned.Raw), Scheme: unsigned.Scheme, Digest: unsigned.Digest, Nonce: unsigned.Nonce,
				Intent: intent, Approvals: approvals, ReplacesTxHash: stuck, Status: orders.SigningPending, CreatedAt: a.now(), ExpiresAt: in.ExpiresAt})
			return err
		},
		Event: &store.EventSpec{Leg: &in.Position, Body: events.OrderEvent{
			SigningRequestID: reqID, ExpiresAt: events.TimeOf(in.ExpiresAt), ReplacesTxHash: *stuck}}})
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	if !res.Applied {
		// An earlier attempt of this activity committed the step after all.
		return a.signingRequestRef(ctx, o.OrgID, *res.Legs[in.Position].SigningRequestID)
	}
	a.Log.Info("replacing a leg's transaction", "orderId", o.ID, "leg", in.Leg, "txHash", *stuck,
		"signingRequestId", reqID, "attempt", in.Attempt)
	return workflows.SigningRequestRef{ID: reqID, Digest: unsigned.Digest}, nil
}

func (a *Orders) signingRequestRef(ctx context.Context, orgID, id string) (workflows.SigningRequestRef, error) {
	r, err := a.Store.SigningRequest(ctx, orgID, id)
	if err != nil {
		return workflows.SigningRequestRef{}, err
	}
	return workflows.SigningRequestRef{ID: r.ID, Digest: r.Digest}, nil
}

// RecordSignature stores the verified signature and emits Wallet.TransactionSigned.
func (a *Orders) RecordSignature(ctx context.Context, in workflows.LegInput) error {
	now := a.now()
	sig := in.Signature
	if in.Attempt > 0 {
		// A replacement's signature: the order stays broadcast, its stuck transaction too.
		_, err := a.apply(ctx, orders.StepReplacementSigned.Attempt(in.Attempt), in.Position, store.OrderChange{OrderID: in.OrderID,
			CorrelationID: in.CorrelationID, At: now,
			Also: func(tx *store.Store, _ *store.Order, _ []store.OrderLeg) error {
				return tx.SetSigningRequestStatus(ctx, in.SigningRequestID, orders.SigningSigned, &sig, now)
			},
			Event: &store.EventSpec{Leg: &in.Position, Body: events.OrderEvent{SigningRequestID: in.SigningRequestID,
				ReplacesTxHash: in.TxHash}}})
		return err
	}
	_, err := a.apply(ctx, orders.StepSigned, in.Position, store.OrderChange{OrderID: in.OrderID, Reason: in.Leg + " signed",
		CorrelationID: in.CorrelationID, At: now,
		Mutate: func(_ *store.Order, legs []store.OrderLeg) { legs[in.Position].Status = orders.StatusSigned },
		Also: func(tx *store.Store, _ *store.Order, _ []store.OrderLeg) error {
			return tx.SetSigningRequestStatus(ctx, in.SigningRequestID, orders.SigningSigned, &sig, now)
		},
		Event: &store.EventSpec{Leg: &in.Position, Body: events.OrderEvent{SigningRequestID: in.SigningRequestID}}})
	return err
}

// BroadcastLeg sends the signed leg to the chain and emits Order.Broadcast. Broadcasting
// the same signed transaction again yields the same hash, so a retry cannot double-spend.
func (a *Orders) BroadcastLeg(ctx context.Context, in workflows.LegInput) (string, error) {
	o, legs, err := a.Store.Order(ctx, in.OrderID)
	if err != nil {
		return "", classify(err)
	}
	step := orders.StepBroadcast
	if in.Attempt > 0 {
		step = orders.StepReplacementBroadcast.Attempt(in.Attempt)
	}
	if done, err := a.Store.StepApplied(ctx, o.ID, step.Key(in.Position)); err != nil || done {
		if err != nil || legs[in.Position].TxHash == nil {
			return "", err
		}
		return *legs[in.Position].TxHash, nil
	}
	req, err := a.Store.SigningRequest(ctx, o.OrgID, in.SigningRequestID)
	if err != nil {
		return "", err
	}
	tx, err := a.signedTx(ctx, o, req, in.Signature)
	if err != nil {
		return "", err
	}
	// A retry after a worker died between the chain's answer and the step's commit finds
	// the transaction on the chain and records it, instead of sending it again.
	hash, known, err := a.Chain.Known(ctx, tx)
	if err != nil {
		return "", err
	}
	if !known {
		if hash, err = a.Chain.Broadcast(ctx, tx); err != nil {
			if in.Attempt > 0 && errors.Is(err, chain.ErrNonceUsed) {
				// The transaction this one replaces was mined meanwhile: nothing to send.
				return "", classify(fmt.Errorf("%w: %w", errReplacedMined, err))
			}
			return "", err
		}
	}
	ch := store.OrderChange{OrderID: in.OrderID, Reason: in.Leg + " broadcast", CorrelationID: in.CorrelationID,
		Mutate: func(_ *store.Order, legs []store.OrderLeg) {
			legs[in.Position].AddHash(hash)
			legs[in.Position].Status = orders.StatusBroadcast
		},
		Event: &store.EventSpec{Leg: &in.Position, Body: events.OrderEvent{TxHash: hash, ReplacesTxHash: in.TxHash}}}
	if in.Attempt > 0 {
		ch.Reason = in.Leg + " replacement broadcast"
	}
	_, err = a.apply(ctx, step, in.Position, ch)
	return hash, err
}

// signedTx is the transaction of a signing request with its signature (base64).
func (a *Orders) signedTx(ctx context.Context, o *store.Order, req *store.SigningRequest, signature string) (chain.SignedTx, error) {
	w, err := a.Store.Wallet(ctx, o.OrgID, o.WalletID)
	if err != nil {
		return chain.SignedTx{}, err
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return chain.SignedTx{}, classify(fmt.Errorf("%w: %w", errBadSignature, err))
	}
	tx := chain.SignedTx{Chain: o.Chain, Kind: req.Leg, From: w.Address, Fields: json.RawMessage(req.UnsignedTx),
		Digest: req.Digest, Signature: sig}
	tx.Asset, tx.Amount = o.Details.Valued()
	if p, ok := o.Details.Details.(*orders.Payment); ok {
		tx.To = p.Destination.Address
	}
	return tx, nil
}

// CheckLeg waits for a broadcast leg to be final on its chain, reading the status of
// each of its transactions (more than one once a stuck one was replaced) every ChainPoll,
// for up to workflows.LegWait; past that it reports the leg still pending. It reports the
// leg at once, pending and underpriced, when its latest transaction has stayed below the
// fee market (or out of the node) for ReplaceAfter since in.SentAt; and pending and lapsed
// when its latest transaction can never land (asked of the chain every lapseCheck, for a
// workflow that builds it again: in.Rebuilds). A latest transaction the node no longer
// holds is sent to it again, as signed, every resendEvery meanwhile: a node drops what it
// will not keep (one account's transactions beyond its queue, sent out of nonce order by
// concurrent orders), and a replacement would need a new signature.
func (a *Orders) CheckLeg(ctx context.Context, in workflows.LegInput) (workflows.LegStatus, error) {
	o, legs, err := a.Store.Order(ctx, in.OrderID)
	if err != nil {
		return workflows.LegStatus{}, classify(err)
	}
	hashes := legs[in.Position].Hashes()
	if len(hashes) == 0 || legs[in.Position].SigningRequestID == nil {
		return workflows.LegStatus{}, classify(fmt.Errorf("%w: the leg was never broadcast", errNotForThisStep))
	}
	// The latest request is read at the first lapse check or resend only: most legs never
	// need it.
	var latest *store.SigningRequest
	readLatest := func() (err error) {
		if latest == nil {
			latest, err = a.Store.SigningRequest(ctx, o.OrgID, *legs[in.Position].SigningRequestID)
		}
		return err
	}
	var lapseAsked, resent time.Time
	poll := a.ChainPoll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	replaceAfter := a.ReplaceAfter
	if replaceAfter <= 0 {
		replaceAfter = DefaultReplaceAfter
	}
	deadline := time.Now().Add(workflows.LegWait)
	for {
		st, mined, dropped, err := a.legStatus(ctx, o.Chain, hashes)
		if err != nil {
			return workflows.LegStatus{}, err
		}
		if st.State != chain.TxPending || time.Now().After(deadline) {
			return st, nil
		}
		// Only the transaction the workflow last saw sent is sent again: with a replacement
		// asked for and not sent, the latest request is not the latest transaction's. It is
		// sent again before any replacement is reported, and the node asked once more after
		// it: a check that starts late (a busy worker) must not skip straight to a new
		// signature.
		if dropped && time.Since(resent) >= resendEvery && in.TxHash == hashes[len(hashes)-1] &&
			in.SigningRequestID == *legs[in.Position].SigningRequestID {
			if err := readLatest(); err != nil {
				return workflows.LegStatus{}, err
			}
			a.resend(ctx, o, latest, in.TxHash, resent.IsZero())
			resent = time.Now()
		} else if st.Underpriced && !in.SentAt.IsZero() && time.Since(in.SentAt) >= replaceAfter {
			return st, nil
		}
		if in.Rebuilds && !mined && time.Since(lapseAsked) >= lapseCheck {
			lapseAsked = time.Now()
			if err := readLatest(); err != nil {
				return workflows.LegStatus{}, err
			}
			if st.Lapsed, err = a.Chain.Lapsed(ctx, o.Chain, hashes[len(hashes)-1], json.RawMessage(latest.UnsignedTx)); err != nil {
				return workflows.LegStatus{}, err
			}
			if st.Lapsed {
				a.Log.Info("a transaction lapsed before it landed", "orderId", o.ID, "leg", in.Leg, "txHash", hashes[len(hashes)-1])
				return st, nil
			}
		}
		activity.RecordHeartbeat(ctx, st.State)
		// Ask again when the chain expects the leg final, if it said, but never wait longer
		// than a poll: the expectation may be wrong.
		wait := poll
		if !st.Expected.IsZero() {
			wait = min(max(time.Until(st.Expected), time.Millisecond), poll)
		}
		select {
		case <-ctx.Done():
			return workflows.LegStatus{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// lapseCheck is how often CheckLeg asks whether a pending leg's transaction lapsed: it
// costs the node a read or two, and a lapse is not urgent to the second.
const lapseCheck = time.Second

// resendEvery is how often CheckLeg sends again a transaction its node no longer holds.
const resendEvery = 2 * time.Second

// resend sends the leg's latest transaction (hash, of the signing request latest) to the
// chain again, as it was signed. What the node answers is only logged, the first time at
// info or warn, later ones at debug (a crowd of one wallet's orders resends many): a
// transaction the node still refuses stays dropped, and is replaced after ReplaceAfter.
func (a *Orders) resend(ctx context.Context, o *store.Order, latest *store.SigningRequest, hash string, first bool) {
	if latest.Status != orders.SigningSigned || latest.Signature == nil {
		return
	}
	tx, err := a.signedTx(ctx, o, latest, *latest.Signature)
	if err == nil {
		var sent string
		if sent, err = a.Chain.Broadcast(ctx, tx); err == nil && !strings.EqualFold(sent, hash) {
			err = fmt.Errorf("the signing request's transaction is %s", sent)
		}
	}
	level, msg, attrs := slog.LevelInfo, "a transaction the node dropped was sent again", []any{"orderId", o.ID, "txHash", hash}
	if err != nil {
		level, msg, attrs = slog.LevelWarn, "a transaction the node dropped was not sent again", append(attrs, "error", err.Error())
	}
	if !first {
		level = slog.LevelDebug
	}
	a.Log.Log(ctx, level, msg, attrs...)
}

// legStatus is where a leg stands given all its transactions (one nonce, or one lapsed
// before the next was built: at most one of them can land): the one that is final decides;
// otherwise it is pending, underpriced if its latest transaction is. mined reports that one
// of them is in a block already, dropped that none is and the node no longer holds the
// latest.
func (a *Orders) legStatus(ctx context.Context, chainName string, hashes []string) (_ workflows.LegStatus, mined, dropped bool, _ error) {
	out := workflows.LegStatus{State: chain.TxPending}
	var expected time.Time
	minedSeen := false
	for i := len(hashes) - 1; i >= 0; i-- {
		st, err := a.Chain.Status(ctx, chainName, hashes[i])
		if err != nil {
			return workflows.LegStatus{}, false, false, err
		}
		if st.State != chain.TxPending {
			return workflows.LegStatus{State: st.State, Reason: st.Reason, TxHash: hashes[i]}, true, false, nil
		}
		if i == len(hashes)-1 {
			out.Underpriced, dropped = st.Underpriced, st.Dropped
		}
		if !st.Expected.IsZero() && (expected.IsZero() || st.Expected.Before(expected)) {
			expected = st.Expected
		}
		if st.Confirmations > 0 {
			// One of them is mined, on its way to its depth: nothing needs replacing.
			out.Underpriced = false
			minedSeen = true
		}
	}
	out.Underpriced = out.Underpriced && !minedSeen
	out.Expected = expected
	return out, minedSeen, dropped && !minedSeen, nil
}

// ConfirmLeg records a confirmed leg; the last one confirms the order (Order.Confirmed).
func (a *Orders) ConfirmLeg(ctx context.Context, in workflows.LegInput) error {
	now := a.now()
	step, ch := orders.StepLegConfirmed, store.OrderChange{OrderID: in.OrderID, CorrelationID: in.CorrelationID, At: now}
	confirmed := &store.EventSpec{Leg: &in.Position}
	if in.Last {
		step, ch.Reason, ch.Event = orders.StepConfirmed, "confirmed", confirmed
	}
	ch.Mutate = func(o *store.Order, legs []store.OrderLeg) {
		legs[in.Position].Status = orders.StatusConfirmed
		if in.TxHash != "" && in.TxHash != deref(legs[in.Position].TxHash) {
			// A replaced leg: the transaction that confirmed is the leg's.
			hash := in.TxHash
			legs[in.Position].TxHash = &hash
		}
		if h := legs[in.Position].TxHash; h != nil {
			confirmed.Body.TxHash = *h
		}
		if in.Last {
			o.CompletedAt = &now
		}
	}
	_, err := a.apply(ctx, step, in.Position, ch)
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// releaseNonce gives back the nonce of a transaction that expired unsigned, so that the
// wallet's nonces stay gap-free; a replacement's nonce is its stuck transaction's, still
// taken.
func releaseNonce(ctx context.Context, tx *store.Store, o *store.Order, requestID string) error {
	r, err := tx.SigningRequest(ctx, o.OrgID, requestID)
	if err != nil || r.Nonce == nil || r.ReplacesTxHash != nil {
		return err
	}
	w, err := tx.Wallet(ctx, o.OrgID, o.WalletID)
	if err != nil {
		return err
	}
	return tx.ReleaseNonce(ctx, o.Chain, w.Address, *r.Nonce)
}

// FailOrder ends the order failed (signing_expired, signer_refused, tx_reverted,
// tx_timeout) and emits Order.Failed. The leg's open signing request ends expired, or
// refused when its signer refused it; its nonce is given back.
func (a *Orders) FailOrder(ctx context.Context, in workflows.FailInput) error {
	now := a.now()
	_, err := a.apply(ctx, orders.StepFailed, in.Position, store.OrderChange{OrderID: in.OrderID,
		Reason: string(in.Code), CorrelationID: in.CorrelationID, At: now,
		Mutate: func(o *store.Order, legs []store.OrderLeg) {
			code, msg := string(in.Code), in.Message
			o.FailureCode, o.FailureMessage, o.CompletedAt = &code, &msg, &now
			legs[in.Position].Status = orders.StatusFailed
		},
		Also: func(tx *store.Store, o *store.Order, _ []store.OrderLeg) error {
			if in.SigningRequestID == "" {
				return nil
			}
			status := orders.SigningExpired
			if in.Code == orders.FailureSignerRefused {
				status = orders.SigningRefused
			}
			if err := tx.SetSigningRequestStatus(ctx, in.SigningRequestID, status, nil, now); err != nil {
				return err
			}
			return releaseNonce(ctx, tx, o, in.SigningRequestID)
		},
		Event: &store.EventSpec{Leg: &in.Position,
			Body: events.OrderEvent{Failure: &events.Failure{Code: string(in.Code), Message: in.Message, Reason: in.Reason}}}})
	return err
}
