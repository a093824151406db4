package api

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

type signingHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func signingJSON(r *store.SigningRequest) apitypes.SigningRequest {
	approvals := []apitypes.SigningApproval{}
	_ = json.Unmarshal([]byte(r.Approvals), &approvals) // written by the activity from this type
	return apitypes.SigningRequest{Intent: nullable(r.Intent), Approvals: approvals, ID: r.ID, OrderID: r.OrderID, Domain: r.Domain, Leg: r.Leg, Position: r.Position, WalletID: r.WalletID,
		Chain: r.Chain, UnsignedTx: r.UnsignedTx, RawUnsignedTx: r.RawUnsignedTx, Scheme: r.Scheme, ReplacesTxHash: r.ReplacesTxHash, Digest: r.Digest, Status: r.Status,
		CreatedAt: timeOf(r.CreatedAt), ExpiresAt: timeOf(r.ExpiresAt), SignedAt: timeOrNull(r.SignedAt), Message: messageOf(r)}
}

// messageOf is an ed25519 request's message in base64: the bytes its signature covers.
func messageOf(r *store.SigningRequest) string {
	if r.Scheme != chain.Ed25519 {
		return ""
	}
	raw, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// list answers GET /signing-requests.
func (h *signingHandlers) list(c *gin.Context) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, signingJSON)(h.svc.ListSigningRequests(c.Request.Context(), caller(c), service.SigningFilter{Status: c.Query("status"), Page: pg}))
}

// request finds the signing request of the path among those the caller may see, and
// narrows a person to its app; or it answers.
func (h *signingHandlers) request(c *gin.Context) (*store.SigningRequest, bool) {
	r, err := h.svc.SigningRequest(c.Request.Context(), caller(c), c.Param("id"))
	if err != nil {
		failed(c, h.log, err)
		return nil, false
	}
	narrow(c, r.App)
	return r, true
}

// get answers GET /signing-requests/{id}.
func (h *signingHandlers) get(c *gin.Context) {
	if r, ok := h.request(c); ok {
		c.PureJSON(http.StatusOK, signingJSON(r))
	}
}

// sign answers POST /signing-requests/{id}/signature: a signature that verifies against
// the wallet's public key is signalled to the order's workflow (202); one that does not
// is refused (422) and the request stays pending.
func (h *signingHandlers) sign(c *gin.Context) {
	// The service judges the caller as it came: narrowed to the request's app, a person
	// who sees it through treasury read would no longer see it at all.
	who := caller(c)
	if _, ok := h.request(c); !ok {
		return
	}
	var req struct {
		Signature string `json:"signature"`
	}
	if !bindStrict(c, &req, "signature") {
		return
	}
	r, err := h.svc.SubmitSignature(c.Request.Context(), who, c.Param("id"), req.Signature)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusAccepted, signingJSON(r))
}

// refuse answers POST /signing-requests/{id}/refusal {reason, detail?}: the signer
// refuses the request; the order fails signer_refused.
func (h *signingHandlers) refuse(c *gin.Context) {
	who := caller(c)
	if _, ok := h.request(c); !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	}
	if !bindStrict(c, &req, "reason", "detail") {
		return
	}
	respond(c, h.log, http.StatusAccepted, signingJSON)(h.svc.RefuseSigningRequest(c.Request.Context(), who, c.Param("id"), req.Reason, req.Detail))
}
