package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// Order is an order with its legs and, when read in detail, its status history and the
// decisions on its approval item.
type Order struct {
	*store.Order
	Legs      []store.OrderLeg
	History   []store.OrderStatusChange
	Decisions []store.ApprovalDecision
	// PolicyDecision, in the answer to a submit only, is whether the policy had decided
	// within the submit's wait (PolicyAllowed) or not yet (PolicyPending).
	PolicyDecision string
}

// What a submit's answer says of the policy's decision.
const (
	PolicyAllowed = apitypes.PolicyAllowed
	PolicyPending = apitypes.PolicyPending
)

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
	in        orders.Draft
	wallet    *store.Wallet
	amountUSD decimal.Decimal
}

// readOrder validates an order body of a domain: its fields, the wallet (one of the
// caller's organisation, within its reach), the wallet's chain, and the USD price of what
// it moves.
func (s *Service) readOrder(ctx context.Context, who Caller, domain string, body []byte) (*validOrder, error) {
	in, wallet, err := s.readDraft(ctx, who, domain, body)
	if err != nil {
		return nil, err
	}
	prices, err := s.currentPrices(ctx)
	if err != nil {
		return nil, err
	}
	asset, amount := in.Valued()
	price, err := s.usablePrice(prices, in.Domain(), asset)
	if err != nil {
		return nil, err
	}
	return &validOrder{in: in, wallet: wallet, amountUSD: amount.Mul(price)}, nil
}

// readDraft validates an order body's fields and its wallet: one of the caller's
// organisation, within its reach, not archived, on a chain that carries the order.
func (s *Service) readDraft(ctx context.Context, who Caller, domain string, body []byte) (orders.Draft, *store.Wallet, error) {
	in, errs := orders.Parse(domain, body)
	if len(errs) > 0 {
		return in, nil, invalid(errs...)
	}
	wallet, err := s.Store.Wallet(ctx, who.OrgID, in.WalletID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !who.CanReach(in.WalletID)) {
		return in, nil, invalid(field("walletId", "is not a wallet of your organisation"))
	}
	if err != nil {
		return in, nil, err
	}
	if wallet.ArchivedAt != nil {
		return in, nil, invalid(field("walletId", "is archived: it takes no new orders"))
	}
	if errs := in.Check(wallet.Chain); len(errs) > 0 {
		return in, nil, invalid(errs...)
	}
	if p, ok := in.Details.(*orders.Payment); ok && p.IsBatch() {
		// Fixed now, so that a later configuration or release changes none of its parts.
		p.PartSize = cmp.Or(s.BatchPartSizes[wallet.Chain], orders.DefaultPartSize(wallet.Chain))
	}
	return in, wallet, nil
}

// usablePrice is the asset's USD price when it is fresh. Limits are in USD, so an order
// whose asset has no fresh price fails closed (SPEC 3.1a): 422 price_unavailable naming
// the field of the asset (sellAsset for a trade) and when the price was last set.
func (s *Service) usablePrice(prices map[string]store.Price, domain, asset string) (decimal.Decimal, error) {
	name := "asset"
	if domain == orders.DomainTrade {
		name = "sellAsset"
	}
	price, ok := prices[asset]
	switch {
	case !ok:
		e := refuse(PriceUnavailable, asset+" has no USD price: no price source names it, or none has been read yet.")
		e.Fields = []orders.FieldError{field(name, asset+" has no USD price")}
		return decimal.Decimal{}, e
	case price.Stale(s.now()):
		at := price.UpdatedAt.UTC().Format(time.RFC3339)
		e := refuse(PriceUnavailable, asset+"'s USD price is stale: last updated "+at+" by its source ("+price.Source+
			"), past its heartbeat twice over. Orders in "+asset+" resume once the source posts a new price.")
		e.Fields = []orders.FieldError{field(name, asset+"'s USD price is stale (last updated "+at+")")}
		return decimal.Decimal{}, e
	}
	return price.USDPrice, nil
}

// mayDo refuses a caller without the action on the app.
func mayDo(who Caller, app, action string) error {
	if !who.Can(app, action) {
		return refuse(PermissionDenied, "This credential does not have the '"+action+"' action on the '"+app+"' app.")
	}
	return nil
}

// OrderLocation is the path of an order of the domain.
func OrderLocation(domain orders.DomainInfo, id string) string {
	return apitypes.BasePath + "/" + domain.Collection + "/" + id
}

// JSONContentType is the Content-Type of the API's JSON answers.
const JSONContentType = "application/json; charset=utf-8"

// CreateOrder stores a draft order of a domain and its Order.Created event (SPEC 3.2).
// claim, when not nil, is the request's Idempotency-Key record, which no record held when
// the request began: it is completed with the answer (201, the order, its Location) and
// stored by the order's own transaction, so that a retry is answered with exactly that.
// A *store.KeyHeldError says another request took the key meanwhile; no order was made.
func (s *Service) CreateOrder(ctx context.Context, who Caller, domain orders.DomainInfo, body []byte, claim *store.IdempotencyRecord) (*Order, error) {
	return s.createOrder(ctx, who, domain, body, claim, draftOrigin{})
}

// draftOrigin is where a draft comes from when a payout schedule's run makes it: the
// order's id, fixed by the run before the order is made, and the schedule. Its zero value
// is a request's draft, with a new id.
type draftOrigin struct {
	orderID, scheduleID string
}

func (s *Service) createOrder(ctx context.Context, who Caller, domain orders.DomainInfo, body []byte, claim *store.IdempotencyRecord, origin draftOrigin) (*Order, error) {
	if err := mayDo(who, domain.App, auth.ActionWrite); err != nil {
		return nil, err
	}
	v, err := s.readOrder(ctx, who, domain.Name, body)
	if err != nil {
		return nil, err
	}
	in, wallet := v.in, v.wallet
	id := cmp.Or(origin.orderID, ids.New(ids.Order))
	legNames := in.Legs(wallet.Chain)
	detailsJSON, err := json.Marshal(in.Details)
	if err != nil {
		return nil, err
	}
	_, hash, err := orders.PayloadOfJSON(id, wallet.ID, wallet.Chain, in.Details, detailsJSON, legNames)
	if err != nil {
		return nil, err
	}
	now := s.now()
	o := &store.Order{
		ID: id, OrgID: who.OrgID, App: domain.App, Domain: domain.Name, Status: orders.StatusDraft,
		WalletID: wallet.ID, Chain: wallet.Chain, Details: orders.Fields{Details: in.Details}, PayloadHash: hash,
		AmountUSD: v.amountUSD, CreatedBy: who.ID, CreatedByUser: who.Person, CorrelationID: who.CorrelationID,
		WorkflowID: workflows.OrderWorkflowID(id), ScheduleID: origin.scheduleID, CreatedAt: now, UpdatedAt: now,
	}
	legs := make([]store.OrderLeg, len(legNames))
	for i, l := range legNames {
		legs[i] = store.OrderLeg{Position: i, Leg: l, Status: orders.LegPending}
	}
	audit := s.audit(who, domain.App, domain.Name+".created", "order", id, json.RawMessage(detailsJSON))
	user := events.NullableString(o.CreatedByUser)
	created := store.EventSpec{Name: events.OrderCreated, Body: events.OrderEvent{
		Chain: wallet.Chain, AmountUSD: o.AmountUSD.StringFixedBank(2), CreatedBy: o.CreatedBy, CreatedByUser: &user,
		ScheduleID: origin.scheduleID,
	}}
	answer := &Order{Order: o, Legs: legs}
	if claim != nil {
		// Every field of the answer is known now: the created step only numbers its event.
		if claim.ResponseBody, err = json.Marshal(answer.Answer()); err != nil {
			return nil, err
		}
		headers, err := json.Marshal(map[string]string{"Content-Type": JSONContentType, "Location": OrderLocation(domain, id)})
		if err != nil {
			return nil, err
		}
		claim.StatusCode, claim.ResponseHeaders = http.StatusCreated, string(headers)
	}
	if _, err := s.Store.CreateOrder(ctx, o, legs, created, audit, claim); err != nil {
		return nil, err
	}
	return answer, nil
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

// SubmitOrder accepts a draft into the pipeline and answers with its policy's decision,
// waited for a bounded time (SPEC 3.2, 3.4). The acceptance is durable first: one
// transaction marks the order submitted (Order.Submitted) and queues its workflow's start.
// Then the workflow is started and its decision awaited, the two within the submit's wait:
// the order as it stands once the workflow accepted it (PolicyDecision allowed), a
// PolicyViolation naming the rules that refused it (the order is then rejected), or, when
// the decision has not come in time, the order submitted with PolicyDecision pending: a
// workflow not started yet is started by a worker from the queue (StartQueuedOrders), and
// a later refusal is Order.Rejected. So a burst of submits is answered within the wait
// while the database answers, never timed out behind Temporal.
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
	if o.Status != orders.StatusDraft {
		return s.earlierSubmission(ctx, who, domain, o, submission)
	}
	now := s.now()
	accepted, err := s.Store.SubmitOrder(ctx, &store.OrderStart{OrderID: o.ID, SubmissionID: submission, CorrelationID: who.CorrelationID,
		DueAt: now.Add(s.startGrace())}, now, s.audit(who, domain.App, domain.Name+".submitted", "order", o.ID, nil))
	if err != nil {
		return nil, err
	}
	if !accepted.Applied {
		// Another submission of the draft got there first.
		return s.earlierSubmission(ctx, who, domain, &Order{Order: accepted.Order, Legs: accepted.Legs}, submission)
	}
	decision, err := s.Workflows.Submit(ctx, submissionOf(o.Order, o.Legs, who.CorrelationID, submission))
	if errors.Is(err, workflows.ErrNotStarted) {
		// Accepted, and queued: a worker starts it, from now on.
		s.Log.Warn("order workflow not started in time; a worker will start it", "orderId", o.ID,
			"correlationId", who.CorrelationID, "error", err.Error())
		if derr := s.Store.OrderStartDue(ctx, o.ID, s.now()); derr != nil {
			// Still queued, due when its grace ends.
			s.Log.Warn("queued start not brought forward", "orderId", o.ID, "error", derr.Error())
		}
		return s.submitted(ctx, who, domain, o.ID, PolicyPending)
	}
	// Started: the workflow's first step forgets its queued start.
	switch {
	case errors.Is(err, workflows.ErrDecisionPending):
		return s.submitted(ctx, who, domain, o.ID, PolicyPending)
	case err != nil:
		// Its decision could not be read: it comes as the workflow's events.
		s.Log.Warn("policy decision not read", "orderId", o.ID, "correlationId", who.CorrelationID, "error", err.Error())
		return s.submitted(ctx, who, domain, o.ID, PolicyPending)
	}
	return s.decided(ctx, who, domain, o.ID, decision)
}

// earlierSubmission answers a submit of an order that is no longer a draft: only the
// retry of the submission that moved it on (its first try's answer lost, e.g. to a
// timeout) gets that submission's outcome; anything else is a Conflict. The order names
// its submission, so that no answer of Temporal's, nor its silence, decides which.
func (s *Service) earlierSubmission(ctx context.Context, who Caller, domain orders.DomainInfo, o *Order, submission string) (*Order, error) {
	conflict := refuse(Conflict, "This "+domain.Name+" is "+string(o.Status)+"; only a draft can be submitted.")
	// An order submitted before the order kept its submission is asked of its workflow.
	if submission == "" || (o.SubmissionID != "" && o.SubmissionID != submission) {
		return nil, conflict
	}
	decision, err := s.Workflows.SubmitOutcome(ctx, o.ID, submission)
	switch {
	case errors.Is(err, workflows.ErrUnknownSubmission) && o.SubmissionID == submission:
		// Its workflow is queued, not started yet.
		return s.submitted(ctx, who, domain, o.ID, PolicyPending)
	case errors.Is(err, workflows.ErrUnknownSubmission):
		return nil, conflict
	case errors.Is(err, workflows.ErrDecisionPending):
		return s.submitted(ctx, who, domain, o.ID, PolicyPending)
	case err != nil:
		return nil, err
	}
	if o.Status == orders.StatusRejected && decision.Allowed {
		// A retried submission whose first answer was lost, of an order its policy refused.
		return nil, refuse(Conflict, "This "+domain.Name+" was rejected by its policy when it was submitted.")
	}
	return s.decided(ctx, who, domain, o.ID, decision)
}

// decided answers a submission its policy has decided: the order, or the refusal.
func (s *Service) decided(ctx context.Context, who Caller, domain orders.DomainInfo, id string, d workflows.PolicyDecision) (*Order, error) {
	if !d.Allowed {
		return nil, refusedByPolicy(domain, d)
	}
	return s.submitted(ctx, who, domain, id, PolicyAllowed)
}

func refusedByPolicy(domain orders.DomainInfo, d workflows.PolicyDecision) error {
	return &Error{Kind: PolicyViolation, Violations: d.Violations,
		Detail: "The policy of the " + domain.App + " app refused this order; it is now rejected."}
}

// submitted is the answer to an accepted submission: the order as it stands now. When the
// submit's wait ended before the decision but the order, read now, holds it (the workflow
// decided in between), the recorded decision answers: an order already awaiting its
// signature never says its policy is pending, and a refusal is still a refusal.
func (s *Service) submitted(ctx context.Context, who Caller, domain orders.DomainInfo, id, policyDecision string) (*Order, error) {
	answer, err := s.visibleOrder(ctx, who, domain, id)
	if err != nil {
		return nil, err
	}
	if policyDecision == PolicyPending && answer.Order.PolicyDecision != nil {
		d, err := workflows.RecordedDecision(*answer.Order.PolicyDecision)
		if err != nil {
			return nil, fmt.Errorf("the order's recorded policy decision: %w", err)
		}
		if !d.Allowed {
			return nil, refusedByPolicy(domain, d)
		}
		policyDecision = PolicyAllowed
	}
	answer.PolicyDecision = policyDecision
	return answer, nil
}

// submissionOf is what an order's workflow is started with.
func submissionOf(o *store.Order, legs []store.OrderLeg, correlationID, submissionID string) workflows.Submission {
	names := make([]string, len(legs))
	for i, l := range legs {
		names[i] = l.Leg
	}
	return workflows.Submission{OrderID: o.ID, OrgID: o.OrgID, WalletID: o.WalletID, Domain: o.Domain,
		AmountUSD: o.AmountUSD.StringFixedBank(2), Legs: names, CorrelationID: correlationID, SubmissionID: submissionID}
}

// DefaultStartGrace is how long an accepted order's workflow has to run its first step
// (which forgets the queued start) before a worker starts it from the queue: a start the
// submit made finds the workflow running, and one it could not make starts it.
const DefaultStartGrace = 30 * time.Second

func (s *Service) startGrace() time.Duration {
	if s.StartGrace > 0 {
		return s.StartGrace
	}
	return DefaultStartGrace
}

// A worker's claim on queued starts, each start's share of it, and the attempts after which
// a start that keeps failing is logged as an error.
const (
	queuedStartLease = time.Minute
	queuedStartWait  = 10 * time.Second
	queuedStartAlarm = 5
)

// StartQueuedOrders starts the workflows of accepted submissions that their submits did not
// start (Temporal slow or down, the process gone): up to limit of those due, each claimed
// for a minute so that workers share them. A start that fails is due again when its claim
// ends. It answers how many it started.
func (s *Service) StartQueuedOrders(ctx context.Context, limit int) (int, error) {
	if s.Workflows == nil {
		return 0, ErrWorkflowsUnavailable
	}
	due, err := s.Store.ClaimDueOrderStarts(ctx, s.now(), queuedStartLease, limit)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, st := range due {
		o, legs, err := s.Store.Order(ctx, st.OrderID)
		if err != nil {
			return started, err
		}
		// Each start within its share of the claim, so that a Temporal that does not
		// answer holds the batch no longer than the claim lasts.
		sctx, cancel := context.WithTimeout(ctx, queuedStartWait)
		err = s.Workflows.Start(sctx, submissionOf(o, legs, st.CorrelationID, st.SubmissionID))
		cancel()
		if err != nil {
			log := s.Log.Warn
			if st.Attempts >= queuedStartAlarm {
				// An accepted order that will not start: someone must look (a search
				// attribute missing, a namespace gone).
				log = s.Log.Error
			}
			log("queued order workflow not started; it is retried", "orderId", st.OrderID, "attempts", st.Attempts,
				"error", err.Error())
			if err := s.Store.OrderStartFailed(ctx, st.OrderID, err.Error()); err != nil {
				return started, err
			}
			continue
		}
		if err := s.Store.OrderStarted(ctx, st.OrderID); err != nil {
			return started, err
		}
		s.Log.Info("queued order workflow started", "orderId", st.OrderID, "attempts", st.Attempts)
		started++
	}
	return started, nil
}
