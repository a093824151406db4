package api

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

type approvalHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func approvalJSON(a *service.Approval) map[string]any {
	var simulation any
	if a.Simulation != "" {
		simulation = json.RawMessage(a.Simulation)
	}
	return map[string]any{"simulation": simulation, "id": a.ID, "domain": a.Domain, "orderId": a.OrderID, "status": a.Status,
		"requiredApprovals": a.RequiredApprovals, "decisions": service.DecisionAnswers(a.Decisions), "reason": a.Reason,
		"payloadHash": a.PayloadHash, "statement": nullable(a.Statement), "order": json.RawMessage(a.Summary), "createdAt": timeOf(a.CreatedAt),
		"expiresAt": timeOf(a.ExpiresAt)}
}

// list answers GET /approvals.
func (h *approvalHandlers) list(c *gin.Context) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, approvalJSON)(h.svc.ListApprovals(c.Request.Context(), caller(c),
		service.ApprovalFilter{Domain: c.Query("domain"), Status: c.Query("status"), Page: pg}))
}

// approverKeys answers GET /approver-keys: the organisation's approver keys, newest first.
func (h *approvalHandlers) approverKeys(c *gin.Context) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, approverKeyJSON)(h.svc.ListApproverKeys(c.Request.Context(), caller(c), pg))
}

func approverKeyJSON(k *store.ApproverKey) apitypes.ApproverKey {
	return apitypes.ApproverKey{ID: k.ID, Scheme: k.Scheme, PublicKey: k.PublicKey, Kind: k.Kind, CredentialID: k.CredentialID,
		UserID: k.UserID, CreatedAt: timeOf(k.CreatedAt), RevokedAt: timeOrNull(k.RevokedAt)}
}

// decide answers POST /approvals/{domain}/{id}/decide: the decision is recorded, then
// signalled to the order's workflow, which counts it.
func (h *approvalHandlers) decide(c *gin.Context) {
	if d, ok := service.DomainNamed(c.Param("domain")); ok {
		narrow(c, d.App)
	}
	var req apitypes.Decision
	if !bindStrict(c, &req, "decision", "comment", "keyId", "signature", "webauthn") {
		return
	}
	a, err := h.svc.Decide(c.Request.Context(), caller(c), c.Param("domain"), c.Param("id"),
		service.Decision{Decision: req.Decision, Comment: req.Comment, KeyID: req.KeyID, Signature: req.Signature, WebAuthn: assertionOf(req.WebAuthn)})
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusAccepted, approvalJSON(a))
}

// assertionOf is a passkey's assertion in a decision, if it carries one.
func assertionOf(a *apitypes.WebAuthnAssertion) *approvers.Assertion {
	if a == nil {
		return nil
	}
	return &approvers.Assertion{AuthenticatorData: a.AuthenticatorData, ClientDataJSON: a.ClientDataJSON, Signature: a.Signature}
}
