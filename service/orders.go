package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/workflows"
)

// Order is an order with its legs and, when read in detail, its status history and the
// decisions on its approval item.
type Order struct {
	*store.Order
	Legs      []store.OrderLeg
	History   []store.OrderStatusChange
	Decisions []store.ApprovalDecision
}

// Page asks for one page of a list: at most Limit items after the one whose key is After.
type Page struct {
	After string
	Limit int
}

// trim takes a page read with one item more than its limit: the extra item only says that
// another page exists, so the last page never comes back empty. next is the key to read
// the following page after ("" when there is none): the key of the last item kept.
func trim[T any](items []T, limit int, key func(*T) string) (page []T, next string) {
	if len(items) > limit {
		return items[:limit], key(&items[limit-1])
	}
	return items, ""
}

// validOrder is an order body that passed every check, with what it refers to.
type validOrder struct {
	in        *orders.Input
	wallet    *store.Wallet
	amountUSD decimal.Decimal
}

// readOrder validates an order body of a domain: its fields, the wallet (one of the
// caller's organisation, within its reach), the wallet's chain, and the USD price of what
// it moves.
func (s *Service) readOrder(ctx context.Context, who Caller, domain string, body []byte) (*validOrder, error) {
	in, errs := orders.Parse(domain, body)
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	wallet, err := s.Store.Wallet(ctx, who.OrgID, in.WalletID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !who.CanReach(in.WalletID)) {
		return nil, invalid(field("walletId", "is not a wallet of your organisation"))
	}
	if err != nil {
		return nil, err
	}
	if errs := in.Check(wallet.Chain); len(errs) > 0 {
		return nil, invalid(errs...)
	}
	prices, err := s.currentPrices(ctx)
	if err != nil {
		return nil, err
	}
	asset, amount := in.Valued()
	price, ok := prices[asset]
	if !ok {
		return nil, invalid(field("asset", asset+" has no USD price"))
	}
	return &validOrder{in: in, wallet: wallet, amountUSD: amount.Mul(price)}, nil
}

// mayDo refuses a caller without the action on the app.
func mayDo(who Caller, app, action string) error {
	if !who.Can(app, action) {
		return refuse(PermissionDenied, "This credential does not have the '"+action+"' action on the '"+app+"' app.")
	}
	return nil
}

// CreateOrder stores a draft order of a domain and its Order.Created event (SPEC 3.2).
func (s *Service) CreateOrder(ctx context.Context, who Caller, domain orders.DomainInfo, body []byte) (*Order, error) {
	if err := mayDo(who, domain.App, auth.ActionWrite); err != nil {
		return nil, err
	}
	v, err := s.readOrder(ctx, who, domain.Name, body)
	if err != nil {
		return nil, err
	}
	in, wallet := v.in, v.wallet
	id := ids.New(ids.Order)
	legNames := in.Legs(wallet.Chain)
	details := in.Details()
	_, hash, err := orders.Payload(id, domain.Name, wallet.ID, wallet.Chain, details, legNames)
	if err != nil {
		return nil, err
	}
	detailsJSON, err := json.Marshal(details)
	if err != nil {
		return nil, err
	}
	now := s.now()
	o := &store.Order{
		ID: id, OrgID: who.OrgID, App: domain.App, Domain: domain.Name, Status: orders.StatusDraft,
		WalletID: wallet.ID, Chain: wallet.Chain, Details: string(detailsJSON), PayloadHash: hash,
		AmountUSD: v.amountUSD, CreatedBy: who.ID, CreatedByUser: who.Person, CorrelationID: who.CorrelationID,
		WorkflowID: workflows.OrderWorkflowID(id), CreatedAt: now, UpdatedAt: now,
	}
	legs := make([]store.OrderLeg, len(legNames))
	for i, l := range legNames {
		legs[i] = store.OrderLeg{Position: i, Leg: l, Status: orders.LegPending}
	}
	audit := s.audit(who, domain.App, domain.Name+".created", "order", id, json.RawMessage(detailsJSON))
	user := events.NullableString(o.CreatedByUser)
	created := store.EventSpec{Name: events.OrderCreated, Body: events.OrderEvent{
		Chain: wallet.Chain, AmountUSD: o.AmountUSD.StringFixedBank(2), CreatedBy: o.CreatedBy, CreatedByUser: &user,
	}}
	if _, err := s.Store.CreateOrder(ctx, o, legs, created, audit); err != nil {
		return nil, err
	}
	return &Order{Order: o, Legs: legs}, nil
}

// visibleOrder loads an order of the domain that the caller may see: any other order (of
// another organisation, app or domain, or of a wallet beyond its reach) is not found.
func (s *Service) visibleOrder(ctx context.Context, who Caller, domain orders.DomainInfo, id string) (*Order, error) {
	o, legs, err := s.Store.OrderInApp(ctx, who.OrgID, domain.App, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (o.Domain != domain.Name || !who.CanReach(o.WalletID))) {
		return nil, refuse(NotFound, "No "+domain.Name+" with this id.")
	}
	if err != nil {
		return nil, err
	}
	return &Order{Order: o, Legs: legs}, nil
}

// GetOrder reads an order of the domain with its status history and approval decisions.
func (s *Service) GetOrder(ctx context.Context, who Caller, domain orders.DomainInfo, id string) (*Order, error) {
	if err := mayDo(who, domain.App, auth.ActionRead); err != nil {
		return nil, err
	}
	o, err := s.visibleOrder(ctx, who, domain, id)
	if err != nil {
		return nil, err
	}
	if o.History, err = s.Store.OrderHistory(ctx, o.ID); err != nil {
		return nil, err
	}
	if o.ApprovalItemID != nil {
		if o.Decisions, err = s.Store.ApprovalDecisions(ctx, *o.ApprovalItemID); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// OrderFilter narrows a list of orders.
type OrderFilter struct {
	Status       string
	CreatedAfter *time.Time
	Page
}

// ListOrders pages through the domain's orders, newest first; next continues the list.
func (s *Service) ListOrders(ctx context.Context, who Caller, domain orders.DomainInfo, f OrderFilter) (list []Order, next string, err error) {
	if err := mayDo(who, domain.App, auth.ActionRead); err != nil {
		return nil, "", err
	}
	rows, err := s.Store.ListOrders(ctx, store.OrderFilter{OrgID: who.OrgID, App: domain.App, Status: f.Status,
		CreatedAfter: f.CreatedAfter, AfterID: f.After, Limit: f.Limit + 1})
	if err != nil {
		return nil, "", err
	}
	rows, next = trim(rows, f.Limit, func(o *store.Order) string { return o.ID })
	orderIDs := make([]string, len(rows))
	for i := range rows {
		orderIDs[i] = rows[i].ID
	}
	legs, err := s.Store.LegsOf(ctx, orderIDs)
	if err != nil {
		return nil, "", err
	}
	list = make([]Order, 0, len(rows))
	for i := range rows {
		// A key restricted to some wallets sees their orders only: the page may come out
		// short, and next still follows on from the last order read.
		if who.CanReach(rows[i].WalletID) {
			list = append(list, Order{Order: &rows[i], Legs: legs[rows[i].ID]})
		}
	}
	return list, next, nil
}

// SubmitOrder starts the order's workflow and waits for its policy decision (SPEC 3.2,
// 3.4): the order as it stands once the workflow accepted it, or a PolicyViolation naming
// the rules that refused it (the order is then rejected).
func (s *Service) SubmitOrder(ctx context.Context, who Caller, domain orders.DomainInfo, id string) (*Order, error) {
	if err := mayDo(who, domain.App, auth.ActionWrite); err != nil {
		return nil, err
	}
	o, err := s.visibleOrder(ctx, who, domain, id)
	if err != nil {
		return nil, err
	}
	if s.Workflows == nil {
		return nil, ErrWorkflowsUnavailable
	}
	submission := submissionID(who)
	var decision workflows.PolicyDecision
	if o.Status != orders.StatusDraft {
		// Not a draft any more: only the retry of the submission that moved it on (its
		// first try's answer lost, e.g. to a timeout) gets that submission's outcome.
		if submission == "" {
			return nil, refuse(Conflict, "This "+domain.Name+" is "+string(o.Status)+"; only a draft can be submitted.")
		}
		if decision, err = s.Workflows.SubmitOutcome(ctx, o.ID, submission); errors.Is(err, ErrUnknownSubmission) {
			return nil, refuse(Conflict, "This "+domain.Name+" is "+string(o.Status)+"; only a draft can be submitted.")
		}
	} else {
		names := make([]string, len(o.Legs))
		for i, l := range o.Legs {
			names[i] = l.Leg
		}
		decision, err = s.Workflows.Submit(ctx, workflows.Submission{OrderID: o.ID, OrgID: o.OrgID, WalletID: o.WalletID,
			Domain: o.Domain, AmountUSD: o.AmountUSD.StringFixedBank(2), Legs: names,
			CorrelationID: who.CorrelationID, SubmissionID: submission})
	}
	if err != nil {
		return nil, err
	}
	s.auditAfter(ctx, s.audit(who, domain.App, domain.Name+".submitted", "order", o.ID, nil))
	if o.Status == orders.StatusRejected && decision.Allowed {
		// A retried submission whose first answer was lost, of an order its policy refused.
		return nil, refuse(Conflict, "This "+domain.Name+" was rejected by its policy when it was submitted.")
	}
	if !decision.Allowed {
		return nil, &Error{Kind: PolicyViolation, Violations: decision.Violations,
			Detail: "The policy of the " + domain.App + " app refused this order; it is now rejected."}
	}
	return s.visibleOrder(ctx, who, domain, o.ID)
}
