package api

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/workflows"
)

type orderHandlers struct {
	store     *store.Store
	log       *slog.Logger
	domain    orders.DomainInfo
	workflows OrderWorkflows
}

type legResponse struct {
	Leg              string  `json:"leg"`
	Status           string  `json:"status"`
	SigningRequestID *string `json:"signingRequestId,omitempty"`
	TxHash           *string `json:"txHash,omitempty"`
}

type approvalResponse struct {
	Required  bool               `json:"required"`
	Quorum    int                `json:"quorum"`
	ItemID    *string            `json:"itemId,omitempty"`
	Decisions []decisionResponse `json:"decisions"`
}

type historyResponse struct {
	Status        string `json:"status"`
	Reason        string `json:"reason,omitempty"`
	CorrelationID string `json:"correlationId"`
	At            string `json:"at"`
}

// orderJSON renders an order (SPEC 3.2): the common fields, then the domain's own.
func orderJSON(o *store.Order, legs []store.OrderLeg, history []store.OrderStatusChange) (map[string]any, error) {
	out := map[string]any{}
	if err := json.Unmarshal([]byte(o.Details), &out); err != nil {
		return nil, err
	}
	ls := make([]legResponse, len(legs))
	for i, l := range legs {
		ls[i] = legResponse{Leg: l.Leg, Status: l.Status, SigningRequestID: l.SigningRequestID, TxHash: l.TxHash}
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
	out["approval"] = approvalResponse{Required: o.ApprovalRequired, Quorum: o.ApprovalQuorum, ItemID: o.ApprovalItemID, Decisions: []decisionResponse{}}
	if o.FailureCode != nil {
		out["failure"] = map[string]any{"code": *o.FailureCode, "message": deref(o.FailureMessage)}
	}
	if o.RejectionReason != nil {
		rej := map[string]any{}
		if o.RejectionDetail != nil {
			_ = json.Unmarshal([]byte(*o.RejectionDetail), &rej)
		}
		rej["reason"] = *o.RejectionReason
		out["rejection"] = rej
	}
	out["createdBy"] = o.CreatedBy
	out["correlationId"] = o.CorrelationID
	out["workflowId"] = o.WorkflowID
	out["createdAt"] = formatTime(o.CreatedAt)
	out["updatedAt"] = formatTime(o.UpdatedAt)
	out["submittedAt"] = formatTimePtr(o.SubmittedAt)
	out["completedAt"] = formatTimePtr(o.CompletedAt)
	if history != nil {
		hs := make([]historyResponse, len(history))
		for i, h := range history {
			hs[i] = historyResponse{Status: h.Status, Reason: h.Reason, CorrelationID: h.CorrelationID, At: formatTime(h.At)}
		}
		out["history"] = hs
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readBody reads a request body within the size limit, answering 413 when it is over.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			fail(c, CodePayloadTooLarge, "The request body is larger than 1 MiB.")
		} else {
			fail(c, CodeValidationFailed, "The request body could not be read.")
		}
		return nil, false
	}
	return body, true
}

// validOrder is an order body that passed every check, with what it refers to.
type validOrder struct {
	in        *orders.Input
	wallet    *store.Wallet
	amountUSD decimal.Decimal
}

// readOrder reads and validates an order body of a domain: its fields, the wallet (one of
// the caller's organisation), the wallet's chain, and the USD price of what it moves.
// On failure it has answered the request.
func readOrder(c *gin.Context, s *store.Store, log *slog.Logger, domain string) (*validOrder, bool) {
	body, ok := readBody(c)
	if !ok {
		return nil, false
	}
	in, errs := orders.Parse(domain, body)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return nil, false
	}
	ctx := c.Request.Context()
	p := principalOf(c)
	wallet, err := s.Wallet(ctx, p.OrgID, in.WalletID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !p.CanReach(in.WalletID)) {
		validationFailed(c, []orders.FieldError{{Field: "walletId", Message: "is not a wallet of your organisation"}})
		return nil, false
	}
	if err != nil {
		requestFailed(c, log, err)
		return nil, false
	}
	if errs := in.Check(wallet.Chain); len(errs) > 0 {
		validationFailed(c, errs)
		return nil, false
	}
	prices, err := s.Prices(ctx)
	if err != nil {
		requestFailed(c, log, err)
		return nil, false
	}
	asset, amount := in.Valued()
	price, ok := prices[asset]
	if !ok {
		validationFailed(c, []orders.FieldError{{Field: "asset", Message: asset + " has no USD price"}})
		return nil, false
	}
	return &validOrder{in: in, wallet: wallet, amountUSD: amount.Mul(price)}, true
}

// create answers POST /{collection}: a draft order and its Order.Created event.
func (h *orderHandlers) create(c *gin.Context) {
	v, ok := readOrder(c, h.store, h.log, h.domain.Name)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	p := principalOf(c)
	in, wallet := v.in, v.wallet
	id := ids.New(ids.Order)
	legNames := in.Legs(wallet.Chain)
	details := in.Details()
	_, hash, err := orders.Payload(id, h.domain.Name, wallet.ID, wallet.Chain, details, legNames)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	detailsJSON, err := json.Marshal(details)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	now := time.Now().UTC()
	o := &store.Order{
		ID: id, OrgID: p.OrgID, App: h.domain.App, Domain: h.domain.Name, Status: orders.StatusDraft,
		WalletID: wallet.ID, Chain: wallet.Chain, Details: string(detailsJSON), PayloadHash: hash,
		AmountUSD: v.amountUSD, CreatedBy: p.Actor(), CorrelationID: correlationID(c),
		WorkflowID: workflows.OrderWorkflowID(id), CreatedAt: now, UpdatedAt: now,
	}
	legs := make([]store.OrderLeg, len(legNames))
	for i, l := range legNames {
		legs[i] = store.OrderLeg{Position: i, Leg: l, Status: orders.LegPending}
	}
	audit := &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: p.OrgID, App: h.domain.App, ActorType: p.ActorType(),
		ActorID: p.ID, Action: h.domain.Name + ".created", ResourceType: "order", ResourceID: id,
		CorrelationID: correlationID(c), Details: string(detailsJSON), CreatedAt: now}
	created := store.EventSpec{Name: events.OrderCreated, Fields: map[string]any{
		"walletId": wallet.ID, "chain": wallet.Chain, "amountUsd": usd(o.AmountUSD), "createdBy": p.ID,
	}}
	if _, err := h.store.CreateOrder(ctx, o, legs, created, audit); err != nil {
		requestFailed(c, h.log, err)
		return
	}
	out, err := orderJSON(o, legs, nil)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.Header("Location", "/api/v1/"+h.domain.Collection+"/"+id)
	c.JSON(http.StatusCreated, out)
}

// visibleOrder loads the order of the path's {id}, answering 404 for any order the caller
// may not see (another organisation, app or domain, or a wallet outside its reach).
func (h *orderHandlers) visibleOrder(c *gin.Context) (*store.Order, []store.OrderLeg, bool) {
	p := principalOf(c)
	o, legs, err := h.store.OrderInApp(c.Request.Context(), p.OrgID, h.domain.App, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && (o.Domain != h.domain.Name || !p.CanReach(o.WalletID))) {
		fail(c, CodeNotFound, "No "+h.domain.Name+" with this id.")
		return nil, nil, false
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return nil, nil, false
	}
	return o, legs, true
}

// writeOrder answers with an order; detail adds its status history and approval decisions.
func (h *orderHandlers) writeOrder(c *gin.Context, status int, o *store.Order, legs []store.OrderLeg, detail bool) {
	ctx := c.Request.Context()
	var history []store.OrderStatusChange
	if detail {
		var err error
		if history, err = h.store.OrderHistory(ctx, o.ID); err != nil {
			requestFailed(c, h.log, err)
			return
		}
	}
	out, err := orderJSON(o, legs, history)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	if detail && o.ApprovalItemID != nil {
		ds, err := h.store.ApprovalDecisions(ctx, *o.ApprovalItemID)
		if err != nil {
			requestFailed(c, h.log, err)
			return
		}
		appr := out["approval"].(approvalResponse)
		for _, d := range ds {
			appr.Decisions = append(appr.Decisions, decisionResponse{Decision: d.Decision, DecidedBy: d.DecidedBy,
				DecidedAt: formatTime(d.DecidedAt), Comment: d.Comment})
		}
		out["approval"] = appr
	}
	c.JSON(status, out)
}

// get answers GET /{collection}/{id}, with the status history.
func (h *orderHandlers) get(c *gin.Context) {
	if o, legs, ok := h.visibleOrder(c); ok {
		h.writeOrder(c, http.StatusOK, o, legs, true)
	}
}

// list answers GET /{collection}: newest first, filtered by status and createdAfter.
func (h *orderHandlers) list(c *gin.Context) {
	pg, errs := listParams(c, "limit", "cursor", "status", "createdAfter")
	status := c.Query("status")
	if status != "" && !slices.Contains(orders.Statuses, status) {
		errs = append(errs, orders.FieldError{Field: "status", Message: "is not an order status"})
	}
	var after *time.Time
	if raw := c.Query("createdAfter"); raw != "" {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			errs = append(errs, orders.FieldError{Field: "createdAfter", Message: "must be an ISO 8601 timestamp such as 2026-11-22T01:24:34.123Z"})
		}
		after = &t
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	ctx := c.Request.Context()
	p := principalOf(c)
	list, err := h.store.ListOrders(ctx, store.OrderFilter{OrgID: p.OrgID, App: h.domain.App, Status: status,
		CreatedAfter: after, AfterID: pg.After, Limit: pg.Limit + 1})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	list, more := trimPage(list, pg.Limit)
	orderIDs := make([]string, len(list))
	for i := range list {
		orderIDs[i] = list[i].ID
	}
	legs, err := h.store.LegsOf(ctx, orderIDs)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	out := make([]map[string]any, 0, len(list))
	for i := range list {
		if !p.CanReach(list[i].WalletID) {
			continue
		}
		o, err := orderJSON(&list[i], legs[list[i].ID], nil)
		if err != nil {
			requestFailed(c, h.log, err)
			return
		}
		out = append(out, o)
	}
	var cursor *string
	if more {
		cursor = encodeCursor(list[len(list)-1].ID)
	}
	c.JSON(http.StatusOK, listResponse[map[string]any]{Data: out, NextCursor: cursor})
}
