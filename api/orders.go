package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
)

// orderHandlers serve one domain's collection: /payments, /trade-orders, …
type orderHandlers struct {
	svc    *service.Service
	log    *slog.Logger
	domain orders.DomainInfo
}

func decisionsJSON(ds []store.ApprovalDecision) []apitypes.ApprovalDecision {
	out := make([]apitypes.ApprovalDecision, len(ds))
	for i, d := range ds {
		out[i] = apitypes.ApprovalDecision{Decision: d.Decision, DecidedBy: d.DecidedBy, DecidedByUser: nullable(d.DecidedByUser),
			DecidedAt: timeOf(d.DecidedAt), Comment: d.Comment}
	}
	return out
}

// orderJSON renders an order (SPEC 3.2): the common fields, then the domain's own; read in
// detail, its status history too. It stays a map, keys sorted as encoding/json writes a
// map's: the domain's own fields come as the JSON they were stored as, merged in whole.
func orderJSON(o *service.Order) map[string]any {
	out := map[string]any{}
	// Details were written from a validated body: they always decode.
	_ = json.Unmarshal([]byte(o.Details), &out)
	ls := make([]apitypes.Leg, len(o.Legs))
	for i, l := range o.Legs {
		ls[i] = apitypes.Leg{Leg: l.Leg, Status: string(l.Status), SigningRequestID: l.SigningRequestID, TxHash: l.TxHash}
		for _, h := range l.Hashes() {
			if l.TxHash == nil || h != *l.TxHash {
				ls[i].ReplacedTxHashes = append(ls[i].ReplacedTxHashes, h)
			}
		}
	}
	out["id"] = o.ID
	out["domain"] = o.Domain
	out["app"] = o.App
	out["status"] = o.Status
	out["walletId"] = o.WalletID
	out["chain"] = o.Chain
	out["legs"] = ls
	out["amountUsd"] = usd(o.AmountUSD)
	out["payloadHash"] = o.PayloadHash
	// The version of the app's policy that evaluates the order, fixed at submit; null
	// before.
	out["policyVersion"] = o.PolicyVersion
	out["approval"] = apitypes.OrderApproval{Required: o.ApprovalRequired, Quorum: o.ApprovalQuorum, ItemID: o.ApprovalItemID,
		Decisions: decisionsJSON(o.Decisions)}
	if o.FailureCode != nil {
		out["failure"] = events.Failure{Code: *o.FailureCode, Message: deref(o.FailureMessage)}
	}
	if o.RejectionReason != nil {
		rej := map[string]any{}
		if o.RejectionDetail != nil {
			_ = json.Unmarshal([]byte(*o.RejectionDetail), &rej)
		}
		rej["reason"] = *o.RejectionReason
		out["rejection"] = rej
	}
	if o.PolicyDecision != "" {
		// A submit's answer only: whether the policy decided within the submit's wait.
		out["policyDecision"] = o.PolicyDecision
	}
	out["createdBy"] = o.CreatedBy
	out["createdByUser"] = nullable(o.CreatedByUser)
	out["correlationId"] = o.CorrelationID
	out["workflowId"] = o.WorkflowID
	out["createdAt"] = timeOf(o.CreatedAt)
	out["updatedAt"] = timeOf(o.UpdatedAt)
	out["submittedAt"] = timeOrNull(o.SubmittedAt)
	out["completedAt"] = timeOrNull(o.CompletedAt)
	if o.History != nil {
		hs := make([]apitypes.StatusChange, len(o.History))
		for i, h := range o.History {
			hs[i] = apitypes.StatusChange{Status: string(h.Status), Reason: h.Reason, CorrelationID: h.CorrelationID,
				At: timeOf(h.At)}
		}
		out["history"] = hs
	}
	return out
}

// create answers POST /{collection}: a draft order and its Order.Created event.
func (h *orderHandlers) create(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	f := foldedIdempotency(c)
	if f != nil {
		f.Render = h.created
		ctx = store.WithFoldedIdempotency(ctx, f)
	}
	o, err := h.svc.CreateOrder(ctx, caller(c), h.domain, body)
	if f != nil && f.Held != nil {
		return // another request holds the key: the idempotency middleware answers from its record
	}
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.Header("Location", h.location(o.ID))
	if f != nil && f.Stored {
		// The answer is the one stored for the retries, byte for byte.
		c.Data(f.Record.StatusCode, jsonContentType, f.Record.ResponseBody)
		return
	}
	c.PureJSON(http.StatusCreated, orderJSON(o))
}

// jsonContentType is what gin's JSON rendering sends.
const jsonContentType = "application/json; charset=utf-8"

func (h *orderHandlers) location(id string) string {
	return apiBase + "/" + h.domain.Collection + "/" + id
}

// created renders the answer to the create of o, inside the transaction that stores it
// with the request's Idempotency-Key record.
func (h *orderHandlers) created(o *store.Order, legs []store.OrderLeg) (int, string, []byte, error) {
	body, err := json.Marshal(orderJSON(&service.Order{Order: o, Legs: legs}))
	if err != nil {
		return 0, "", nil, err
	}
	headers, err := json.Marshal(map[string]string{"Content-Type": jsonContentType, "Location": h.location(o.ID)})
	return http.StatusCreated, string(headers), body, err
}

// submit answers POST /{collection}/{id}/submit: 202 once the workflow has accepted the
// order and its policy allows it, 422 policy_violation when the policy refused it.
func (h *orderHandlers) submit(c *gin.Context) {
	o, err := h.svc.SubmitOrder(c.Request.Context(), caller(c), h.domain, c.Param("id"))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusAccepted, orderJSON(o))
}

// get answers GET /{collection}/{id}, with the status history.
func (h *orderHandlers) get(c *gin.Context) {
	o, err := h.svc.GetOrder(c.Request.Context(), caller(c), h.domain, c.Param("id"))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, orderJSON(o))
}

// list answers GET /{collection}: newest first, filtered by status and createdAfter.
func (h *orderHandlers) list(c *gin.Context) {
	pg, errs := listParams(c)
	f := service.OrderFilter{Status: c.Query("status"), Page: pg}
	if f.Status != "" && !slices.Contains(orders.Statuses, orders.Status(f.Status)) {
		errs = append(errs, orders.FieldError{Field: "status", Message: "is not an order status"})
	}
	if raw := c.Query("createdAfter"); raw != "" {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			errs = append(errs, orders.FieldError{Field: "createdAfter", Message: "must be an ISO 8601 timestamp such as 2026-11-22T01:24:34.123Z"})
		}
		f.CreatedAfter = &t
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	list, next, err := h.svc.ListOrders(c.Request.Context(), caller(c), h.domain, f)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	writeList(c, list, next, orderJSON)
}
