package console

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// pageSize is how many rows a console list shows.
const pageSize = 50

func (c *console) orderRoutes() []route {
	return []route{
		{"GET /console/{app}/overview", "overview", c.overview},
		{"GET /console/{app}/orders", "orders", c.orders},
		{"GET /console/{app}/orders/{id}", "orders", c.order},
		{"POST /console/{app}/orders/{id}/submit", "orders", c.submitOrder},
		{"POST /console/{app}/batches", "orders", c.createBatch},
		{"GET /console/{app}/approvals", "approvals", c.approvals},
		{"POST /console/{app}/approvals/{id}/decide", "approvals", c.decide},
		{"GET /console/{app}/logs", "logs", c.logs},
	}
}

// usd renders a USD amount for display: rounded half-even to cents, in groups of three.
func usd(v any) string {
	switch d := v.(type) {
	case decimal.Decimal:
		return grouped(d.StringFixedBank(2))
	case *decimal.Decimal:
		if d != nil {
			return grouped(d.StringFixedBank(2))
		}
	}
	return "—"
}

// amount renders an exact amount of an asset, grouped.
func amount(d decimal.Decimal) string { return grouped(d.String()) }

// grouped puts a comma between each group of three digits of a decimal string's whole
// part; the digits themselves are left exactly as they are.
func grouped(amount string) string {
	sign, whole, frac := "", amount, ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	if i := strings.IndexByte(whole, '.'); i >= 0 {
		whole, frac = whole[:i], whole[i:]
	}
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return sign + b.String() + frac
}

// bar is one chain in the overview's chart, laid out in pixels.
type bar struct {
	Label, Value    string
	Y, Width, TextX int
}

// chartBars is the widest bar's length in pixels.
const chartBars = 420

type overviewPage struct {
	Portfolio   *service.Portfolio
	Bars        []bar
	ChartHeight int
	Wallets     []service.Wallet
	Positions   []service.Position
}

// overview shows the treasury: its total, by chain (with a small chart), wallets and
// positions.
func (c *console) overview(w http.ResponseWriter, r *http.Request, rq *request) {
	rq.v.Title = "Overview"
	ctx, who := r.Context(), rq.caller(r)
	p, err := c.Service.Portfolio(ctx, who)
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	page := overviewPage{Portfolio: p}
	largest := decimal.Zero
	for _, cv := range p.ChainRollup {
		largest = decimal.Max(largest, cv.USDValue)
	}
	for i, cv := range p.ChainRollup {
		width := 0
		if largest.IsPositive() {
			width = int(cv.USDValue.Mul(decimal.NewFromInt(chartBars)).Div(largest).IntPart())
		}
		page.Bars = append(page.Bars, bar{Label: cv.Chain, Value: usd(cv.USDValue), Y: i * 28, Width: max(width, 1), TextX: 96 + width})
	}
	page.ChartHeight = 28 * len(page.Bars)
	if page.Wallets, _, err = c.Service.Wallets(ctx, who, service.Page{Limit: 200}); err == nil {
		page.Positions, _, err = c.Service.Positions(ctx, who, service.Page{Limit: 200})
	}
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	c.render(w, r, rq, http.StatusOK, "overview", page)
}

type ordersPage struct {
	Domain string
	// Collection is the domain's path under /api/v1, as the router registers it.
	Collection string
	Status     string
	Statuses   []orders.Status
	Orders     []service.Order
	Next       string
	// Batch is the batch payment form, on the pay app's page for a person who may write.
	Batch *batchForm
}

// orders lists the app's orders, newest first, filtered by status.
func (c *console) orders(w http.ResponseWriter, r *http.Request, rq *request) {
	domain, _ := service.DomainOfApp(rq.app)
	rq.v.Title = "Orders"
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(orders.Statuses, orders.Status(status)) {
		status = ""
	}
	list, next, err := c.Service.ListOrders(r.Context(), rq.caller(r), domain, service.OrderFilter{Status: status,
		Page: service.Page{After: q.Get("after"), Limit: pageSize}})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	page := ordersPage{Domain: domain.Name, Collection: domain.Collection, Status: status, Statuses: orders.Statuses, Orders: list, Next: next}
	if domain.Name == orders.DomainPayment && canWrite(rq) {
		page.Batch = &batchForm{Wallets: c.batchWallets(r, rq), Asset: "USDC"}
	}
	c.render(w, r, rq, http.StatusOK, "orders", page)
}

type timelineEntry struct {
	Event, Leg, Status, CorrelationID, At string
	Sequence                              int
}

type orderPage struct {
	Order   *service.Order
	Details []keyValue
	// Recipients are a batch payment's, with where each one's part stands.
	Recipients []apitypes.Recipient
	// CanSubmit offers a draft's Submit button to a person who may write.
	CanSubmit bool
	Timeline  []timelineEntry
	Workflow  string
	Terminal  bool
}

type keyValue struct{ Key, Value string }

// order shows one order: its fields, legs, approval, the timeline of its events with
// their correlation ids, and a link to its workflow in the Temporal UI. While the order
// moves, the page reloads itself every two seconds.
func (c *console) order(w http.ResponseWriter, r *http.Request, rq *request) {
	domain, _ := service.DomainOfApp(rq.app)
	ctx, who := r.Context(), rq.caller(r)
	o, err := c.Service.GetOrder(ctx, who, domain, r.PathValue("id"))
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	rq.v.Title = strings.ToUpper(domain.Name[:1]) + domain.Name[1:] + " " + o.ID
	page := orderPage{Order: o, Terminal: o.Status == orders.StatusConfirmed || o.Status == orders.StatusFailed ||
		o.Status == orders.StatusRejected}
	fields, _ := json.Marshal(o.Details.Details) // the order's own fields, as its answer shows them
	page.Details = detailList(fields)
	page.Details = slices.DeleteFunc(page.Details, func(kv keyValue) bool { return kv.Key == "recipients" })
	page.Recipients = o.Answer().Recipients
	page.CanSubmit = o.Status == orders.StatusDraft && canWrite(rq)
	evs, _, err := c.Service.Events(ctx, who, service.EventFilter{OrderID: o.ID, Limit: 200})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	for _, ev := range evs {
		var data struct {
			OrderStatus string `json:"orderStatus"`
		}
		_ = json.Unmarshal([]byte(ev.Data), &data)
		page.Timeline = append(page.Timeline, timelineEntry{Event: ev.Event, Leg: ev.Leg, Status: data.OrderStatus,
			CorrelationID: ev.CorrelationID, At: ev.OccurredAt.UTC().Format("2006-01-02 15:04:05.000"), Sequence: ev.Sequence})
	}
	if c.TemporalUIURL != "" {
		ns := c.Namespace
		if ns == "" {
			ns = "default"
		}
		page.Workflow = strings.TrimSuffix(c.TemporalUIURL, "/") + "/namespaces/" + url.PathEscape(ns) + "/workflows/" +
			url.PathEscape(o.WorkflowID)
	}
	if !page.Terminal {
		rq.v.Refresh = 2
	}
	c.render(w, r, rq, http.StatusOK, "order", page)
}

// detailList is an order's details as the pages list them: one entry per field, a nested
// object (a destination) on one line.
func detailList(raw []byte) []keyValue {
	var details map[string]any
	_ = json.Unmarshal(raw, &details)
	var out []keyValue
	for _, k := range sortedKeys(details) {
		v := details[k]
		if m, ok := v.(map[string]any); ok {
			parts := make([]string, 0, len(m))
			for _, mk := range sortedKeys(m) {
				parts = append(parts, mk+" "+fmt.Sprint(m[mk]))
			}
			v = strings.Join(parts, ", ")
		}
		out = append(out, keyValue{Key: k, Value: fmt.Sprint(v)})
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type approvalsPage struct {
	Status     string
	Items      []approvalItem
	CanApprove bool
	Next       string
	// Passkeys, when the person holds any, lets the Approve and Reject buttons sign.
	Passkeys *passkeySigning
}

// approvalItem is an approval item with what it approves: the order as it was submitted.
type approvalItem struct {
	service.Approval
	AmountUSD, WalletID, Chain string
	Details                    []keyValue
	// ApproveChallenge and RejectChallenge are what a passkey signs for each decision.
	ApproveChallenge, RejectChallenge string
	// Signed is the statement's own account of what is approved, leg by leg, as the
	// chain will carry it: what a passkey's signature covers, and a signer checks.
	Signed *approvers.Statement
	// Simulated is what the chain's node said the legs would move when the item was made.
	Simulated *simulationView
}

// simulationView is an item's simulation as the approvals page lists it: one row per
// balance change, or per leg that would revert.
type simulationView struct {
	At, Error string
	Block     uint64
	Rows      []simulatedRow
}

type simulatedRow struct {
	Leg, Address, Asset, Amount string
	// Wallet marks the order's own wallet; Reverted a leg that would fail, with Reason.
	Wallet, Reverted bool
	Reason           string
}

// simulationOf reads an item's simulation for the page; nil when it has none.
func simulationOf(raw, wallet string) *simulationView {
	var sim chain.Simulation
	if raw == "" || json.Unmarshal([]byte(raw), &sim) != nil {
		return nil
	}
	v := &simulationView{At: sim.At, Error: sim.Error, Block: sim.Block}
	for _, l := range sim.Legs {
		if l.Reverted {
			v.Rows = append(v.Rows, simulatedRow{Leg: l.Leg, Reverted: true, Reason: l.Reason})
		}
		for _, c := range l.BalanceChanges {
			amount := c.Amount
			if !strings.HasPrefix(amount, "-") {
				amount = "+" + amount
			}
			v.Rows = append(v.Rows, simulatedRow{Leg: l.Leg, Address: c.Address, Asset: c.Asset, Amount: amount,
				Wallet: strings.EqualFold(c.Address, wallet)})
		}
	}
	return v
}

// approvals lists the app's approval items; those who hold Approve decide them here, by
// the same rules as POST /approvals/{domain}/{id}/decide.
func (c *console) approvals(w http.ResponseWriter, r *http.Request, rq *request) {
	domain, _ := service.DomainOfApp(rq.app)
	rq.v.Title = "Approvals"
	q := r.URL.Query()
	status := cmp.Or(q.Get("status"), orders.ItemPending)
	list, next, err := c.Service.ListApprovals(r.Context(), rq.caller(r), service.ApprovalFilter{Domain: domain.Name, Status: status,
		Page: service.Page{After: q.Get("after"), Limit: pageSize}})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	items := make([]approvalItem, len(list))
	for i, a := range list {
		items[i] = approvalItem{Approval: a}
		if a.Statement != "" {
			items[i].ApproveChallenge, items[i].RejectChallenge = challenge(orders.Approve, a.Statement), challenge(orders.Reject, a.Statement)
			var st approvers.Statement
			if json.Unmarshal([]byte(a.Statement), &st) == nil {
				items[i].Signed = &st
			}
		}
		from := ""
		if items[i].Signed != nil {
			from = items[i].Signed.From
		}
		items[i].Simulated = simulationOf(a.Simulation, from)
		var summary struct {
			AmountUSD string          `json:"amountUsd"`
			WalletID  string          `json:"walletId"`
			Chain     string          `json:"chain"`
			Details   json.RawMessage `json:"details"`
		}
		if json.Unmarshal([]byte(a.Summary), &summary) == nil {
			items[i].AmountUSD, items[i].WalletID, items[i].Chain = summary.AmountUSD, summary.WalletID, summary.Chain
			items[i].Details = detailList(summary.Details)
		}
	}
	c.render(w, r, rq, http.StatusOK, "approvals", approvalsPage{Status: status, Items: items,
		CanApprove: rq.p.Can(rq.app, auth.ActionApprove), Next: next, Passkeys: c.passkeySigning(r, rq)})
}

// decide records an Approve or Reject from the approvals page.
func (c *console) decide(w http.ResponseWriter, r *http.Request, rq *request) {
	domain, _ := service.DomainOfApp(rq.app)
	d := decisionOf(r)
	decision := d.Decision
	_, err := c.Service.Decide(r.Context(), rq.caller(r), domain.Name, r.PathValue("id"), d)
	done := "Approved: the order goes on once the quorum is reached."
	if decision == orders.Reject {
		done = "Rejected: the order ends rejected."
	}
	c.back(w, r, "/console/"+rq.app+"/approvals", err, done)
}

type logsPage struct {
	CorrelationID, Status string
	Rows                  []store.RequestLog
	Next                  string
}

// logs lists the app's recent API requests, filtered by correlation id and status.
func (c *console) logs(w http.ResponseWriter, r *http.Request, rq *request) {
	rq.v.Title = "Logs"
	q := r.URL.Query()
	page := logsPage{CorrelationID: strings.TrimSpace(q.Get("correlationId")), Status: strings.TrimSpace(q.Get("status"))}
	f := store.RequestLogFilter{CorrelationID: page.CorrelationID}
	if page.Status != "" {
		n, err := strconv.Atoi(page.Status)
		if err != nil {
			rq.v.Error = "The status filter is an HTTP status such as 404."
		}
		f.Status = n
	}
	rows, next, err := c.Service.ListRequestLogs(r.Context(), rq.caller(r), f, service.Page{After: q.Get("after"), Limit: pageSize})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	page.Rows, page.Next = rows, next
	c.render(w, r, rq, http.StatusOK, "logs", page)
}

// sampleOrder is an order body of the app's domain to start a dry run from, from a wallet
// of the organisation ("wal_…" to fill in when it has none the caller can see).
func sampleOrder(app, walletID string) string {
	w := cmp.Or(walletID, "wal_…")
	switch app {
	case "pay":
		return `{"walletId": "` + w + `", "asset": "USDC", "amount": "25000", "destination": {"address": "0x1111111111111111111111111111111111111111"}}`
	case "trade":
		return `{"walletId": "` + w + `", "sellAsset": "USDC", "buyAsset": "ETH", "sellAmount": "300", "maxSlippageBps": 50}`
	case "earn":
		return `{"walletId": "` + w + `", "protocol": "aave", "action": "deposit", "asset": "USDC", "amount": "1000"}`
	case "borrow":
		return `{"walletId": "` + w + `", "protocol": "aave", "action": "draw", "asset": "USDC", "amount": "2500"}`
	}
	return "{}"
}

// sampleWallet is the first wallet the caller sees on a chain whose orders the sample
// bodies fit (an EVM address, USDC), "" if none.
func (c *console) sampleWallet(r *http.Request, rq *request) string {
	ws, _, err := c.Service.WalletDirectory(r.Context(), rq.caller(r), service.Page{Limit: 50})
	if err != nil {
		return ""
	}
	for _, w := range ws {
		if w.ArchivedAt == nil && w.Scheme == chain.Secp256k1 {
			return w.ID
		}
	}
	return ""
}

func indent(doc string) string {
	var v any
	if json.Unmarshal([]byte(doc), &v) != nil {
		return doc
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
