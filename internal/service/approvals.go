package service

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// Approval is an approval item with the decisions recorded on it.
type Approval struct {
	*store.ApprovalItem
	Decisions []store.ApprovalDecision
}

// DomainNamed is the order domain of a name, as the paths spell it (payment, trade, …).
func DomainNamed(name string) (orders.DomainInfo, bool) {
	i := slices.IndexFunc(orders.Domains, func(d orders.DomainInfo) bool { return d.Name == name })
	if i < 0 {
		return orders.DomainInfo{}, false
	}
	return orders.Domains[i], true
}

// DomainOfApp is the order domain of an app (pay → payment, …); treasury has none.
func DomainOfApp(app string) (orders.DomainInfo, bool) {
	i := slices.IndexFunc(orders.Domains, func(d orders.DomainInfo) bool { return d.App == app })
	if i < 0 {
		return orders.DomainInfo{}, false
	}
	return orders.Domains[i], true
}

// ApprovalFilter narrows a list of approval items.
type ApprovalFilter struct {
	// Status is one of orders.ItemStatuses, ApprovalsAll for every status, or "" for
	// pending: the list is an approver's queue first (SPEC 3.3), and a bot that pages
	// through history meets items it can no longer decide.
	Domain, Status string
	Page
}

// ApprovalsAll asks a list of approval items for every status.
const ApprovalsAll = "all"

// queueStatus reads the status filter of a list that is a queue first (approvals, signing
// requests): "" is its pending items (statuses[0]), all (ApprovalsAll, SigningRequestsAll) every status
// ("" to the store), anything else one of statuses; ok is false for any other value.
func queueStatus(status string, statuses []string) (filter string, ok bool) {
	switch {
	case status == "":
		return statuses[0], true
	case status == ApprovalsAll:
		return "", true
	}
	return status, slices.Contains(statuses, status)
}

// ListApprovals pages through the approval items the caller may see (SPEC 3.3).
func (s *Service) ListApprovals(ctx context.Context, who Caller, f ApprovalFilter) (list []Approval, next string, err error) {
	var errs []orders.FieldError
	var ok bool
	if f.Status, ok = queueStatus(f.Status, orders.ItemStatuses); !ok {
		errs = append(errs, field("status", "must be pending (the default), approved, rejected, expired or all"))
	}
	if _, ok := DomainNamed(f.Domain); f.Domain != "" && !ok {
		errs = append(errs, field("domain", "must be payment, trade, earn or borrow"))
	}
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	apps := Reach(who.Principal, ApprovalItems)
	if apps == nil {
		return nil, "", refuse(PermissionDenied, "Listing approvals needs read or approve on an app that orders (pay, trade, earn, borrow).")
	}
	items, err := s.Store.ListApprovalItems(ctx, store.ApprovalFilter{OrgID: who.OrgID, Apps: apps, WalletIDs: who.ResourceIDs,
		Domain: f.Domain, Status: f.Status, AfterID: f.After, Limit: f.Limit + 1})
	if err != nil {
		return nil, "", err
	}
	items, next = trim(items, f.Limit, func(it *store.ApprovalItem) string { return it.ID })
	itemIDs := make([]string, len(items))
	for i := range items {
		itemIDs[i] = items[i].ID
	}
	decisions, err := s.Store.DecisionsOf(ctx, itemIDs)
	if err != nil {
		return nil, "", err
	}
	list = make([]Approval, len(items))
	for i := range items {
		list[i] = Approval{ApprovalItem: &items[i], Decisions: decisions[items[i].ID]}
	}
	return list, next, nil
}

// Decision is what an approver records on an item.
type Decision struct {
	Decision string // APPROVE or REJECT
	Comment  string
	// KeyID and Signature sign the decision (approvers.DecisionDigest of the item's
	// statement, base64): required where the app's policy sets signedApprovals.
	KeyID, Signature string
	// WebAuthn, for a passkey, is its assertion over the same digest as its challenge.
	WebAuthn *approvers.Assertion
}

// Decide records the caller's decision on a pending approval item of a domain and signals
// it to the order's workflow, which counts it (SPEC 3.3). An item beyond the caller's
// reach is NotFound before anything else is said of it; the creator of the order may not
// decide it (MakerChecker). One person is one approver: a person who has decided through
// another credential is told so (AlreadyDecided, naming it), and a credential no person
// made counts as its own approver. The same decision again through the same credential is
// a retry, answered as before, and another one a Conflict; a closed item is a Conflict.
func (s *Service) Decide(ctx context.Context, who Caller, domainName, itemID string, d Decision) (*Approval, error) {
	domain, ok := DomainNamed(domainName)
	if !ok {
		return nil, refuse(NotFound, "There is no order domain named "+domainName+".")
	}
	app := domain.App
	if !who.Can(app, auth.ActionApprove) {
		return nil, refuse(PermissionDenied, "Deciding needs the 'approve' action on the '"+app+"' app.")
	}
	if d.Decision != orders.Approve && d.Decision != orders.Reject {
		return nil, invalid(field("decision", "must be APPROVE or REJECT"))
	}
	if len(d.Comment) > 1000 {
		return nil, invalid(field("comment", "must be at most 1000 characters"))
	}
	item, _, err := s.Store.ApprovalItem(ctx, who.OrgID, itemID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (item.Domain != domain.Name || item.App != app)) {
		return nil, refuse(NotFound, "No approval item with this id.")
	}
	if err != nil {
		return nil, err
	}
	order, _, err := s.Store.Order(ctx, item.OrderID)
	if err != nil {
		return nil, err
	}
	if !who.CanReach(order.WalletID) {
		return nil, refuse(NotFound, "No approval item with this id.")
	}
	// People are compared, not credentials: a bot keyed by the person who created an
	// order may not approve it.
	if order.Maker() == who.Actor() {
		return nil, refuse(MakerChecker, "The creator of an order may not decide it; another approver must.")
	}
	if err := s.checkSigned(ctx, who, item, order, d); err != nil {
		return nil, err
	}
	now := s.now()
	decision := &store.ApprovalDecision{ItemID: item.ID, Approver: who.Actor(), DecidedBy: who.ID, DecidedByUser: who.Person,
		Decision: d.Decision, Comment: d.Comment, CorrelationID: who.CorrelationID, DecidedAt: now, KeyID: d.KeyID, Signature: d.Signature}
	if d.WebAuthn != nil {
		decision.Signature, decision.AuthenticatorData, decision.ClientDataJSON = d.WebAuthn.Signature, d.WebAuthn.AuthenticatorData, d.WebAuthn.ClientDataJSON
	}
	var signedWith map[string]any
	if d.KeyID != "" {
		signedWith = map[string]any{"keyId": d.KeyID}
	}
	audit := s.audit(who, app, "approval."+strings.ToLower(d.Decision), "approval_item", item.ID, signedWith)
	decided, err := s.Store.RecordApprovalDecision(ctx, who.OrgID, decision, audit)
	switch {
	case errors.Is(err, store.ErrAlreadyDecided) && decision.DecidedBy != who.ID:
		// A quorum of two bots made by one person is one approver: say so, rather than
		// let the caller believe a second approval was counted.
		return nil, refuse(AlreadyDecided, "This person has already decided this item ("+decision.Decision+") through "+
			decision.DecidedBy+"; one person is one approver, whatever credentials they hold. Another person must decide.")
	case errors.Is(err, store.ErrAlreadyDecided):
		if decision.Decision != d.Decision {
			return nil, refuse(Conflict, "You have already decided this item ("+decision.Decision+").")
		}
		// The same decision again: a retry. Its signal may have been lost the first time,
		// so send it again (the workflow takes each outcome once) and answer as before.
	case errors.Is(err, store.ErrItemClosed):
		return nil, refuse(Conflict, "This item is no longer pending (decided or expired).")
	case err != nil:
		return nil, err
	}
	signal := workflows.ApprovalDecision{ItemID: item.ID, DecidedBy: decision.DecidedBy, DecidedByUser: decision.DecidedByUser,
		Decision: decision.Decision, Outcome: decided.Status, CorrelationID: decision.CorrelationID}
	if err := s.signalApproval(ctx, item.OrderID, signal); err != nil {
		// The decision is stored: the workflow also finds it in the store when its wait
		// ends, and a retry of this request signals again.
		return nil, err
	}
	item, ds, err := s.Store.ApprovalItem(ctx, who.OrgID, item.ID)
	if err != nil {
		return nil, err
	}
	return &Approval{ApprovalItem: item, Decisions: ds}, nil
}

// checkSigned holds a decision to the policy's signedApprovals: where the order's policy
// version sets it, or where the decision is signed anyway, the signature must verify
// under an approver key of the deciding person or credential, not revoked, over the
// item's statement (approvers.DecisionDigest).
func (s *Service) checkSigned(ctx context.Context, who Caller, item *store.ApprovalItem, order *store.Order, d Decision) error {
	rules, _, err := s.Store.PolicyRules(ctx, order.OrgID, order.App, order.PolicyVersion)
	if err != nil {
		return err
	}
	if !rules.SignedApprovals && d.KeyID == "" && d.Signature == "" && d.WebAuthn == nil {
		return nil
	}
	unsigned := func(why string) error {
		return refuse(InvalidSignature, "The decision's signature is not accepted: "+why+" (SPEC 3.3: sign SHA-256 of "+
			"\"treasury-approval:v1:\" + decision + \":\" + the item's statement with an approver key of yours).")
	}
	if d.KeyID == "" || (d.Signature == "") == (d.WebAuthn == nil) {
		if !rules.SignedApprovals {
			return unsigned("a signed decision carries keyId and either signature or, for a passkey, webauthn")
		}
		return unsigned("this app's policy requires signed approvals, and the decision carries no keyId with a signature or a passkey's webauthn")
	}
	if item.Statement == "" {
		return unsigned("the item has no statement to sign")
	}
	key, err := s.Store.ApproverKey(ctx, who.OrgID, d.KeyID)
	if errors.Is(err, store.ErrNotFound) {
		return unsigned("no approver key " + d.KeyID)
	}
	if err != nil {
		return err
	}
	// A passkey is a person's, used signed in; any other key is its credential's.
	owned := key.CredentialID != nil && *key.CredentialID == who.ID && key.Kind == approvers.KindKey
	if key.Kind == approvers.KindPasskey {
		owned = key.UserID != nil && who.Kind == auth.KindUser && *key.UserID == who.Person
	}
	if !owned || key.RevokedAt != nil {
		return unsigned("the key " + key.ID + " is not a live approver key of the deciding person or credential")
	}
	pub, err := base64.StdEncoding.DecodeString(key.PublicKey)
	if err != nil {
		return fmt.Errorf("approver key %s is stored unreadably: %w", key.ID, err)
	}
	digest := approvers.DecisionDigest(d.Decision, []byte(item.Statement))
	if key.Kind == approvers.KindPasskey || d.WebAuthn != nil {
		if key.Kind != approvers.KindPasskey || d.WebAuthn == nil {
			return unsigned("a passkey signs with webauthn, any other approver key with signature")
		}
		passkey, err := approvers.VerifyAssertion(pub, digest, s.Passkeys.RPID, *d.WebAuthn)
		if err != nil {
			return unsigned("the passkey's assertion does not hold: " + err.Error())
		}
		if !s.Passkeys.allows(passkey.Origin) {
			return unsigned("the passkey signed at " + passkey.Origin + ", not at the console")
		}
		return nil
	}
	sig, err := base64.StdEncoding.DecodeString(d.Signature)
	if err != nil {
		return unsigned("the signature is not base64")
	}
	if err := approvers.Verify(key.Scheme, pub, digest, sig); err != nil {
		return unsigned("it does not verify under " + key.ID + " over the statement and the decision " + d.Decision)
	}
	return nil
}

// signalApproval delivers a stored decision. The Temporal client retries what fails on
// the way (its gRPC calls back off and retry until the deadline), so the request holds no
// loop of its own; it does not give up because the caller went away, since the decision
// is already recorded.
func (s *Service) signalApproval(ctx context.Context, orderID string, d workflows.ApprovalDecision) error {
	if s.Workflows == nil {
		return ErrWorkflowsUnavailable
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return s.Workflows.SignalApproval(ctx, orderID, d)
}
