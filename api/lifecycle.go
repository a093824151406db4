package api

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/workflows"
)

// OrderWorkflows is what the API asks of Temporal: start an order's workflow and learn its
// policy decision, and deliver decisions and signatures to it.
type OrderWorkflows interface {
	Submit(ctx context.Context, o *store.Order, legs []string, correlationID string) (workflows.PolicyDecision, error)
	SignalApproval(ctx context.Context, orderID string, d workflows.ApprovalDecision) error
	SignalSignature(ctx context.Context, orderID string, s workflows.Signature) error
}

// ErrWorkflowsUnavailable is what a missing Temporal connection answers.
var ErrWorkflowsUnavailable = errors.New("api: Temporal is not configured")

// submit answers POST /{collection}/{id}/submit: 202 once the workflow has accepted the
// order and its policy allows it, 422 policy_violation when the policy refused it.
func (h *orderHandlers) submit(c *gin.Context) {
	ctx := c.Request.Context()
	p := principalOf(c)
	o, legs, ok := h.visibleOrder(c)
	if !ok {
		return
	}
	if o.Status != orders.StatusDraft {
		fail(c, CodeConflict, "This "+h.domain.Name+" is "+o.Status+"; only a draft can be submitted.")
		return
	}
	names := make([]string, len(legs))
	for i, l := range legs {
		names[i] = l.Leg
	}
	if h.workflows == nil {
		requestFailed(c, h.log, ErrWorkflowsUnavailable)
		return
	}
	decision, err := h.workflows.Submit(ctx, o, names, correlationID(c))
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	auditOrLog(ctx, h.store, h.log, &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: p.OrgID,
		App: h.domain.App, ActorType: p.ActorType(), ActorID: p.ID, Action: h.domain.Name + ".submitted", ResourceType: "order",
		ResourceID: o.ID, CorrelationID: correlationID(c), Details: "{}", CreatedAt: time.Now().UTC()})
	if !decision.Allowed {
		prob := NewProblem(CodePolicyViolation, "The policy of the "+h.domain.App+" app refused this order; it is now rejected.")
		prob.Violations = decision.Violations
		abortProblem(c, prob)
		return
	}
	o, legs, err = h.store.OrderInApp(ctx, p.OrgID, h.domain.App, o.ID)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	h.writeOrder(c, http.StatusAccepted, o, legs, false)
}

type lifecycleHandlers struct {
	store     *store.Store
	log       *slog.Logger
	workflows OrderWorkflows
}

type decisionResponse struct {
	Decision  string `json:"decision"`
	DecidedBy string `json:"decidedBy"`
	DecidedAt string `json:"decidedAt"`
	Comment   string `json:"comment"`
}

func approvalJSON(it *store.ApprovalItem, ds []store.ApprovalDecision) map[string]any {
	decisions := make([]decisionResponse, len(ds))
	for i, d := range ds {
		decisions[i] = decisionResponse{Decision: d.Decision, DecidedBy: d.DecidedBy, DecidedAt: formatTime(d.DecidedAt), Comment: d.Comment}
	}
	return map[string]any{"id": it.ID, "domain": it.Domain, "orderId": it.OrderID, "status": it.Status,
		"requiredApprovals": it.RequiredApprovals, "decisions": decisions, "reason": it.Reason,
		"payloadHash": it.PayloadHash, "order": json.RawMessage(it.Summary), "createdAt": formatTime(it.CreatedAt),
		"expiresAt": formatTime(it.ExpiresAt)}
}

// appsFor are the apps whose approval items or signing requests a principal may see.
func appsFor(p *auth.Principal, actions ...string) []string {
	if p.Can("treasury", auth.ActionRead) {
		return auth.Apps
	}
	var out []string
	for _, app := range p.Apps() {
		if slices.ContainsFunc(actions, func(a string) bool { return p.Can(app, a) }) {
			out = append(out, app)
		}
	}
	return out
}

// listApprovals answers GET /approvals.
func (h *lifecycleHandlers) listApprovals(c *gin.Context) {
	pg, errs := listParams(c, "domain", "status", "limit", "cursor")
	status, domain := c.Query("status"), c.Query("domain")
	if status != "" && !slices.Contains(orders.ItemStatuses, status) {
		errs = append(errs, orders.FieldError{Field: "status", Message: "must be pending, approved, rejected or expired"})
	}
	if domain != "" && !slices.ContainsFunc(orders.Domains, func(d orders.DomainInfo) bool { return d.Name == domain }) {
		errs = append(errs, orders.FieldError{Field: "domain", Message: "must be payment, trade, earn or borrow"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	apps := appsFor(p, auth.ActionRead, auth.ActionApprove)
	if apps == nil {
		fail(c, CodePermissionDenied, "Listing approvals needs read or approve on the app.")
		return
	}
	ctx := c.Request.Context()
	items, err := h.store.ListApprovalItems(ctx, store.ApprovalFilter{OrgID: p.OrgID, Apps: apps, WalletIDs: p.ResourceIDs, Domain: domain,
		Status: status, AfterID: pg.After, Limit: pg.Limit + 1})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	items, more := trimPage(items, pg.Limit)
	itemIDs := make([]string, len(items))
	for i := range items {
		itemIDs[i] = items[i].ID
	}
	decisions, err := h.store.DecisionsOf(ctx, itemIDs)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	out := make([]map[string]any, len(items))
	for i := range items {
		out[i] = approvalJSON(&items[i], decisions[items[i].ID])
	}
	var cursor *string
	if more {
		cursor = encodeCursor(items[len(items)-1].ID)
	}
	c.JSON(http.StatusOK, listResponse[map[string]any]{Data: out, NextCursor: cursor})
}

// decide answers POST /approvals/{domain}/{id}/decide: the decision is recorded, then
// signalled to the order's workflow, which counts it.
func (h *lifecycleHandlers) decide(c *gin.Context) {
	domain := c.Param("domain")
	var app string
	for _, d := range orders.Domains {
		if d.Name == domain {
			app = d.App
		}
	}
	if app == "" {
		fail(c, CodeNotFound, "There is no order domain named "+domain+".")
		return
	}
	p := principalOf(c)
	if !p.Can(app, auth.ActionApprove) {
		fail(c, CodePermissionDenied, "Deciding needs the 'approve' action on the '"+app+"' app.")
		return
	}
	p = p.InApp(app)
	c.Set(principalContextKey, p)
	var req struct {
		Decision string `json:"decision"`
		Comment  string `json:"comment"`
	}
	if !bindStrict(c, &req, "decision", "comment") {
		return
	}
	if req.Decision != orders.Approve && req.Decision != orders.Reject {
		validationFailed(c, []orders.FieldError{{Field: "decision", Message: "must be APPROVE or REJECT"}})
		return
	}
	if len(req.Comment) > 1000 {
		validationFailed(c, []orders.FieldError{{Field: "comment", Message: "must be at most 1000 characters"}})
		return
	}
	ctx := c.Request.Context()
	item, _, err := h.store.ApprovalItem(ctx, p.OrgID, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && (item.Domain != domain || item.App != app)) {
		fail(c, CodeNotFound, "No approval item with this id.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	order, _, err := h.store.Order(ctx, item.OrderID)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	if order.CreatedBy == p.Actor() {
		fail(c, CodeMakerChecker, "The creator of an order may not decide it; another approver must.")
		return
	}
	if !p.CanReach(order.WalletID) {
		fail(c, CodeNotFound, "No approval item with this id.")
		return
	}
	now := time.Now().UTC()
	decision := &store.ApprovalDecision{ItemID: item.ID, DecidedBy: p.Actor(), Decision: req.Decision, Comment: req.Comment,
		CorrelationID: correlationID(c), DecidedAt: now}
	audit := &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: p.OrgID, App: app, ActorType: p.ActorType(), ActorID: p.ID,
		Action: "approval." + strings.ToLower(req.Decision), ResourceType: "approval_item", ResourceID: item.ID,
		CorrelationID: correlationID(c), Details: "{}", CreatedAt: now}
	decided, err := h.store.RecordApprovalDecision(ctx, p.OrgID, decision, audit)
	switch {
	case errors.Is(err, store.ErrAlreadyDecided):
		if decision.Decision != req.Decision {
			fail(c, CodeConflict, "You have already decided this item ("+decision.Decision+").")
			return
		}
		// The same decision again: a retry. Its signal may have been lost the first time,
		// so send it again (the workflow takes each outcome once) and answer as before.
	case errors.Is(err, store.ErrItemClosed):
		fail(c, CodeConflict, "This item is no longer pending (decided or expired).")
		return
	case err != nil:
		requestFailed(c, h.log, err)
		return
	}
	signal := workflows.ApprovalDecision{ItemID: item.ID, DecidedBy: p.Actor(), Decision: decision.Decision,
		Outcome: decided.Status, CorrelationID: decision.CorrelationID}
	if err := h.signalApproval(ctx, item.OrderID, signal); err != nil {
		// The decision is stored: the workflow also finds it in the store when its wait
		// ends, and a retry of this request signals again.
		requestFailed(c, h.log, err)
		return
	}
	item, ds, err := h.store.ApprovalItem(ctx, p.OrgID, item.ID)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.JSON(http.StatusAccepted, approvalJSON(item, ds))
}

// signalApproval delivers a stored decision, retrying briefly; it does not give up because
// the client went away, since the decision is already recorded.
func (h *lifecycleHandlers) signalApproval(ctx context.Context, orderID string, d workflows.ApprovalDecision) error {
	if h.workflows == nil {
		return ErrWorkflowsUnavailable
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = h.workflows.SignalApproval(ctx, orderID, d); err == nil {
			return nil
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return err
}

// bindStrict reads the request body into `into` with strictJSON, answering 413 or 422
// itself; it reports whether the handler may go on.
func bindStrict(c *gin.Context, into any, allowed ...string) bool {
	body, ok := readBody(c)
	if !ok {
		return false
	}
	if errs := strictJSON(body, into, allowed...); len(errs) > 0 {
		validationFailed(c, errs)
		return false
	}
	return true
}

// strictJSON decodes a JSON object whose field names must be among allowed, exactly.
func strictJSON(body []byte, into any, allowed ...string) []orders.FieldError {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return []orders.FieldError{{Field: "body", Message: "must be one JSON object"}}
	}
	var errs []orders.FieldError
	for k := range raw {
		if !slices.Contains(allowed, k) {
			errs = append(errs, orders.FieldError{Field: k, Message: "is not a field of this request"})
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b orders.FieldError) int { return strings.Compare(a.Field, b.Field) })
		return errs
	}
	if err := json.Unmarshal(body, into); err != nil {
		return []orders.FieldError{{Field: "body", Message: "has a field of the wrong type"}}
	}
	return nil
}

func signingJSON(r *store.SigningRequest) map[string]any {
	return map[string]any{"id": r.ID, "orderId": r.OrderID, "domain": r.Domain, "leg": r.Leg, "walletId": r.WalletID,
		"chain": r.Chain, "unsignedTx": r.UnsignedTx, "digest": r.Digest, "status": r.Status,
		"createdAt": formatTime(r.CreatedAt), "expiresAt": formatTime(r.ExpiresAt), "signedAt": formatTimePtr(r.SignedAt)}
}

// listSigning answers GET /signing-requests.
func (h *lifecycleHandlers) listSigning(c *gin.Context) {
	pg, errs := listParams(c, "status", "limit", "cursor")
	status := c.Query("status")
	if status != "" && !slices.Contains(orders.SigningStatuses, status) {
		errs = append(errs, orders.FieldError{Field: "status", Message: "must be pending, signed or expired"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	apps := appsFor(p, auth.ActionRead, auth.ActionSign)
	if apps == nil {
		fail(c, CodePermissionDenied, "Listing signing requests needs read or sign on the app.")
		return
	}
	list, err := h.store.ListSigningRequests(c.Request.Context(), store.SigningFilter{OrgID: p.OrgID, Apps: apps,
		WalletIDs: p.ResourceIDs, Status: status, AfterID: pg.After, Limit: pg.Limit + 1})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	list, more := trimPage(list, pg.Limit)
	out := make([]map[string]any, len(list))
	for i := range list {
		out[i] = signingJSON(&list[i])
	}
	var cursor *string
	if more {
		cursor = encodeCursor(list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, listResponse[map[string]any]{Data: out, NextCursor: cursor})
}

// signingRequestOf loads a signing request the principal may act on, or answers 404.
func (h *lifecycleHandlers) signingRequestOf(c *gin.Context, actions ...string) (*store.SigningRequest, bool) {
	p := principalOf(c)
	r, err := h.store.SigningRequest(c.Request.Context(), p.OrgID, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && (!slices.Contains(appsFor(p, actions...), r.App) || !p.CanReach(r.WalletID))) {
		fail(c, CodeNotFound, "No signing request with this id.")
		return nil, false
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return nil, false
	}
	c.Set(principalContextKey, p.InApp(r.App))
	return r, true
}

// getSigning answers GET /signing-requests/{id}.
func (h *lifecycleHandlers) getSigning(c *gin.Context) {
	if r, ok := h.signingRequestOf(c, auth.ActionRead, auth.ActionSign); ok {
		c.JSON(http.StatusOK, signingJSON(r))
	}
}

// sign answers POST /signing-requests/{id}/signature: a signature that verifies against
// the wallet's public key is signalled to the order's workflow (202); one that does not
// is refused (422) and the request stays pending.
func (h *lifecycleHandlers) sign(c *gin.Context) {
	r, ok := h.signingRequestOf(c, auth.ActionRead, auth.ActionSign)
	if !ok {
		return
	}
	p := principalOf(c)
	if !p.Can(r.App, auth.ActionSign) {
		fail(c, CodePermissionDenied, "Signing needs the 'sign' action on the '"+r.App+"' app.")
		return
	}
	var req struct {
		Signature string `json:"signature"`
	}
	if !bindStrict(c, &req, "signature") {
		return
	}
	err := SubmitSignature(c.Request.Context(), h.store, h.workflows, r, req.Signature, correlationID(c))
	switch {
	case errors.Is(err, ErrBadSignature):
		fail(c, CodeInvalidSignature, "The signature does not verify against the wallet's public key over the digest.")
		return
	case errors.Is(err, ErrNotPending):
		fail(c, CodeConflict, "This signing request is no longer pending (signed or expired).")
		return
	case err != nil:
		requestFailed(c, h.log, err)
		return
	}
	auditOrLog(c.Request.Context(), h.store, h.log, &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: p.OrgID,
		App: r.App, ActorType: p.ActorType(), ActorID: p.ID, Action: "signature.submitted", ResourceType: "signing_request",
		ResourceID: r.ID, CorrelationID: correlationID(c), Details: "{}", CreatedAt: time.Now().UTC()})
	c.JSON(http.StatusAccepted, signingJSON(r))
}

// Errors of SubmitSignature.
var (
	ErrBadSignature = errors.New("signature does not verify")
	ErrNotPending   = errors.New("signing request is not pending")
)

// SubmitSignature verifies an ed25519 signature (base64) over a pending request's digest
// against its wallet's public key and signals it to the order's workflow. The API's
// handler and the dev bundle's signer both come through here.
func SubmitSignature(ctx context.Context, s *store.Store, wf OrderWorkflows, r *store.SigningRequest, signatureB64, correlation string) error {
	if r.Status != orders.SigningPending || !time.Now().Before(r.ExpiresAt) {
		return ErrNotPending
	}
	sig, err := base64.StdEncoding.DecodeString(signatureB64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return ErrBadSignature
	}
	w, err := s.Wallet(ctx, r.OrgID, r.WalletID)
	if err != nil {
		return err
	}
	pub, err := base64.StdEncoding.DecodeString(w.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("wallet %s has no valid public key", w.ID)
	}
	digest, err := hex.DecodeString(r.Digest)
	if err != nil {
		return fmt.Errorf("signing request %s has a bad digest", r.ID)
	}
	if !ed25519.Verify(pub, digest, sig) {
		return ErrBadSignature
	}
	if wf == nil {
		return ErrWorkflowsUnavailable
	}
	return wf.SignalSignature(ctx, r.OrderID, workflows.Signature{SigningRequestID: r.ID, Signature: signatureB64, CorrelationID: correlation})
}

// auditOrLog writes an audit record for an action that has already happened (a workflow
// started, a signature signalled). It cannot be undone if the write fails, so the failure
// is logged with everything the record held.
func auditOrLog(ctx context.Context, s *store.Store, log *slog.Logger, a *store.AuditLog) {
	if err := s.AppendAudit(context.WithoutCancel(ctx), a); err != nil {
		log.Error("audit record not written", "action", a.Action, "actor", a.ActorID, "resourceId", a.ResourceID,
			"correlationId", a.CorrelationID, "error", err.Error())
	}
}
