package activities

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/fakechain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

type lifecycle struct {
	store  *store.Store
	chain  *fakechain.Chain
	creds  *seed.Credentials
	keys   map[string]*keys.Key
	acts   *Orders
	wallet *store.Wallet
	// signAt says when (in workflow time) the signer signs the ith signing request, and
	// signings how many it signs (the legs' when zero, none when negative).
	signAt   func(i int) time.Duration
	signings int
	// refuse, when set, is the reason the signer refuses every request with instead of
	// signing it.
	refuse string
	// startAt is when the workflow starts, in its own time (now when zero).
	startAt time.Time
	// meanwhile runs each function at its time into the workflow.
	meanwhile map[time.Duration]func()
}

func newLifecycle(t *testing.T, s *store.Store) *lifecycle {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds, err := seed.Ensure(context.Background(), s, dir, seed.URLs{}, log)
	if err != nil {
		t.Fatal(err)
	}
	signerKeys, err := seed.LoadSignerKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := fakechain.NewFunded(context.Background(), s.ChainHoldings)
	if err != nil {
		t.Fatal(err)
	}
	dev.BlockTime = 0
	w, err := s.Wallet(context.Background(), creds.OrgID, creds.Wallets[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return &lifecycle{store: s, creds: creds, keys: signerKeys, acts: &Orders{Store: s, Chain: dev, Log: log}, wallet: w, chain: dev}
}

// draft stores a draft order of a domain as the API would.
func (l *lifecycle) draft(t *testing.T, domain, body string) (*store.Order, []string) {
	t.Helper()
	in, errs := orders.Parse(domain, []byte(body))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if errs := in.Check(l.wallet.Chain); len(errs) > 0 {
		t.Fatal(errs)
	}
	prices, _ := l.store.Prices(context.Background())
	asset, amount := in.Valued()
	id := ids.New(ids.Order)
	legs := in.Legs(l.wallet.Chain)
	_, hash, _ := orders.Payload(id, l.wallet.ID, l.wallet.Chain, in.Details, legs)
	app := map[string]string{"payment": "pay", "trade": "trade", "earn": "earn", "borrow": "borrow"}[domain]
	now := time.Now().UTC()
	o := &store.Order{ID: id, OrgID: l.creds.OrgID, App: app, Domain: domain, Status: "draft", WalletID: l.wallet.ID,
		Chain: l.wallet.Chain, Details: orders.Fields{Details: in.Details}, PayloadHash: hash, AmountUSD: amount.Mul(prices[asset].USDPrice),
		CreatedBy: "key_maker", CorrelationID: "corr-1", WorkflowID: "order-" + id, CreatedAt: now, UpdatedAt: now}
	var ls []store.OrderLeg
	for i, name := range legs {
		ls = append(ls, store.OrderLeg{Position: i, Leg: name, Status: "pending"})
	}
	if _, err := l.store.CreateOrder(context.Background(), o, ls, store.EventSpec{Name: "Order.Created"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	return o, legs
}

// run executes the real workflow with the real activities; the signer signs every
// signing request a minute after it appears, with the wallet's own key.
func (l *lifecycle) run(t *testing.T, o *store.Order, legs []string, approvers ...string) workflows.OrderState {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	if !l.startAt.IsZero() {
		env.SetStartTime(l.startAt)
	}
	env.RegisterWorkflowWithOptions(workflows.OrderLifecycle, workflow.RegisterOptions{Name: workflows.OrderWorkflow})
	for name, fn := range map[string]any{
		orders.StepSubmitted.Activity: l.acts.MarkSubmitted, orders.StepPolicyEvaluated.Activity: l.acts.EvaluatePolicy,
		orders.StepApprovalRequested.Activity: l.acts.RequestApproval, orders.StepApproved.Activity: l.acts.MarkApproved,
		workflows.ApprovalOutcomeActivity: l.acts.ApprovalOutcome,
		orders.StepRejected.Activity:      l.acts.RejectOrder, orders.StepSignatureRequested.Activity: l.acts.RequestSignature,
		orders.StepSigned.Activity: l.acts.RecordSignature, orders.StepBroadcast.Activity: l.acts.BroadcastLeg,
		workflows.CheckLegActivity: l.acts.CheckLeg, orders.StepConfirmed.Activity: l.acts.ConfirmLeg,
		orders.StepFailed.Activity: l.acts.FailOrder,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	for at, fn := range l.meanwhile {
		env.RegisterDelayedCallback(fn, at)
	}
	for i, by := range approvers {
		env.RegisterDelayedCallback(func() {
			v, _ := env.QueryWorkflow(workflows.QueryState)
			var st workflows.OrderState
			_ = v.Get(&st)
			item, err := l.store.RecordApprovalDecision(context.Background(), l.creds.OrgID,
				&store.ApprovalDecision{ItemID: st.ItemID, DecidedBy: by, Decision: "APPROVE", CorrelationID: "corr-approve", DecidedAt: time.Now()}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			env.SignalWorkflow(workflows.SignalApprovalDecision, workflows.ApprovalDecision{ItemID: st.ItemID, DecidedBy: by,
				Decision: "APPROVE", Outcome: item.Status, CorrelationID: "corr-approve"})
		}, time.Duration(i+1)*time.Minute)
	}
	signAt := l.signAt
	if signAt == nil {
		signAt = func(i int) time.Duration { return time.Duration(len(approvers)+i+1) * time.Hour }
	}
	signings := len(legs)
	if l.signings != 0 {
		signings = max(l.signings, 0)
	}
	for i := range signings {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(workflows.QueryState)
			if err != nil {
				t.Error(err)
				return
			}
			var st workflows.OrderState
			_ = v.Get(&st)
			if len(st.Requests) <= i {
				return
			}
			req, err := l.store.SigningRequest(context.Background(), l.creds.OrgID, st.Requests[i])
			if err != nil {
				t.Error(err)
				return
			}
			if l.refuse != "" {
				env.SignalWorkflow(workflows.SignalRefusal, workflows.Refusal{SigningRequestID: req.ID, Reason: l.refuse, Detail: "seen by the test"})
				return
			}
			digest, _ := hex.DecodeString(req.Digest)
			raw, _ := hex.DecodeString(req.RawUnsignedTx)
			signed, err := keys.Signed(req.Scheme, digest, raw)
			if err != nil {
				t.Error(err)
				return
			}
			sig, err := l.keys[l.wallet.ID].Sign(signed)
			if err != nil {
				t.Error(err)
				return
			}
			env.SignalWorkflow(workflows.SignalSignature, workflows.Signature{SigningRequestID: req.ID, Signature: base64.StdEncoding.EncodeToString(sig)})
		}, signAt(i))
	}
	env.ExecuteWorkflow(workflows.OrderWorkflow, workflows.OrderInput{OrderID: o.ID, CorrelationID: "corr-submit", Legs: legs})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st workflows.OrderState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// replaced checks the events of an order whose one leg confirmed on a second transaction
// that replaced its first, each event of the second naming the first, and returns both.
func (l *lifecycle) replaced(t *testing.T, orderID string) (first, second string) {
	t.Helper()
	names, data := l.events(t, orderID)
	want := "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast " +
		"Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	first, second = fmt.Sprint(data[4]["txHash"]), fmt.Sprint(data[7]["txHash"])
	if first == second || data[5]["replacesTxHash"] != first || data[7]["replacesTxHash"] != first || data[8]["txHash"] != second {
		t.Fatalf("the second transaction's events name the first, and the order confirms on the second: %v", data)
	}
	return first, second
}

func (l *lifecycle) events(t *testing.T, orderID string) (names []string, data []map[string]any) {
	t.Helper()
	evs, err := l.store.OrderEvents(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Sequence != i+1 {
			t.Fatalf("sequence gap at %d: %d", i, ev.Sequence)
		}
		var d map[string]any
		_ = json.Unmarshal([]byte(ev.Data), &d)
		names, data = append(names, ev.Event), append(data, d)
	}
	return names, data
}

func TestPaymentLifecycleOnAFakeChain(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		l := newLifecycle(t, s)
		ctx := context.Background()
		const to = "0x1111111111111111111111111111111111111111"
		o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"500","destination":{"address":"`+to+`"}}`)
		st := l.run(t, o, legs)
		if st.Status != "confirmed" {
			t.Fatalf("state %+v", st)
		}
		names, data := l.events(t, o.ID)
		want := "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
		if strings.Join(names, " ") != want {
			t.Fatalf("events %v", names)
		}
		for _, d := range data {
			if _, ok := d["leg"]; ok {
				t.Fatalf("a single-leg order's events carry no leg: %v", d)
			}
		}
		if data[5]["orderStatus"] != "confirmed" || data[4]["txHash"] == nil || data[1]["correlationId"] != "corr-submit" {
			t.Fatalf("event data %v", data)
		}
		got, legsNow, _ := s.Order(ctx, o.ID)
		if got.Status != "confirmed" || got.CompletedAt == nil || got.SubmittedAt == nil || legsNow[0].Status != "confirmed" || legsNow[0].TxHash == nil {
			t.Fatalf("order %+v legs %+v", got, legsNow)
		}
		received, _ := l.chain.Balances(ctx, "ethereum", to)
		if !received["USDC"].Equal(decimal.RequireFromString("500")) {
			t.Fatalf("the destination received %s", received["USDC"])
		}
		hist, _ := s.OrderHistory(ctx, o.ID)
		var statuses []string
		for _, h := range hist {
			statuses = append(statuses, string(h.Status))
		}
		if strings.Join(statuses, ",") != "draft,submitted,pending_signature,signed,broadcast,confirmed" {
			t.Fatalf("history %v", statuses)
		}
	})
}

// A payment of more than the wallet holds ends failed with insufficient_funds instead of
// retrying its step: its approvals stand, its Order.Failed says why, and it has no signing
// request.
func TestAPaymentOfMoreThanTheWalletHoldsFails(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		l := newLifecycle(t, s)
		ctx := context.Background()
		const to = "0x1111111111111111111111111111111111111111"
		// The wallet holds 1,000 ETH on the fake chain; 1,000.5 ETH needs two approvers.
		o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"ETH","amount":"1000.5","destination":{"address":"`+to+`"}}`)
		st := l.run(t, o, legs, "key_a", "key_b")
		got, legsNow, err := s.Order(ctx, o.ID)
		if err != nil || st.Status != "failed" || got.Status != "failed" || got.FailureCode == nil || *got.FailureCode != "insufficient_funds" ||
			legsNow[0].Status != "failed" || legsNow[0].SigningRequestID != nil {
			t.Fatalf("state %+v order %+v legs %+v %v", st, got, legsNow, err)
		}
		names, _ := l.events(t, o.ID)
		if strings.Join(names, " ") != "Order.Created Order.Submitted Order.Approved Order.Failed" {
			t.Fatalf("events %v", names)
		}
	})
}

func TestLifecycleWithApprovalRevertAndTwoLegs(t *testing.T) {
	s := storetest.NewSQLite(t)
	l := newLifecycle(t, s)
	ctx := context.Background()

	big, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"20000","destination":{"address":"0x2222222222222222222222222222222222222222"}}`)
	if st := l.run(t, big, legs, "key_approver"); st.Status != "confirmed" {
		t.Fatalf("approved payment: %+v", st)
	}
	names, _ := l.events(t, big.ID)
	if strings.Join(names, " ") != "Order.Created Order.Submitted Order.Approved Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed" {
		t.Fatalf("events %v", names)
	}
	o, _, _ := s.Order(ctx, big.ID)
	item, decisions, err := s.ApprovalItem(ctx, l.creds.OrgID, *o.ApprovalItemID)
	if err != nil || item.Status != "approved" || item.PayloadHash != o.PayloadHash || item.RequiredApprovals != 1 || len(decisions) != 1 {
		t.Fatalf("approval item %+v %v", item, err)
	}
	if item.Simulation != "" {
		t.Fatalf("the fake chain cannot simulate, yet the item shows %s", item.Simulation)
	}
	// The item states what is approved, canonically: the leg as its chain carries it.
	var st approvers.Statement
	if err := json.Unmarshal([]byte(item.Statement), &st); err != nil {
		t.Fatalf("statement %q: %v", item.Statement, err)
	}
	want := []chain.Intent{{Leg: "TRANSFER", To: "0x2222222222222222222222222222222222222222", Asset: "USDC", Amount: "20000000000"}}
	if canonical, _ := st.Canonical(); string(canonical) != item.Statement || st.OrderID != big.ID || st.From != l.wallet.Address ||
		st.RequiredApprovals != 1 || st.PolicyVersion == 0 || !reflect.DeepEqual(st.Intent, want) || st.ExpiresAt == "" {
		t.Fatalf("statement %s", item.Statement)
	}
	// Its signing request carries the statement as its intent, and the decision on it.
	_, bigLegs, _ := s.Order(ctx, big.ID)
	req, err := s.SigningRequest(ctx, l.creds.OrgID, *bigLegs[0].SigningRequestID)
	var evidence []approvers.Evidence
	if err != nil || req.Intent != item.Statement || json.Unmarshal([]byte(req.Approvals), &evidence) != nil || len(evidence) != 1 ||
		evidence[0].Decision != "APPROVE" || evidence[0].DecidedBy != "key_approver" || evidence[0].Statement != item.Statement {
		t.Fatalf("signing request %+v %v", req, err)
	}

	dead, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"5","destination":{"address":"`+fakechain.RevertAddress+`"}}`)
	if st := l.run(t, dead, legs); st.Status != "failed" {
		t.Fatalf("reverted payment: %+v", st)
	}
	// An order that needed no approval: its intent is the statement without a quorum.
	_, deadLegs, _ := s.Order(ctx, dead.ID)
	deadReq, err := s.SigningRequest(ctx, l.creds.OrgID, *deadLegs[0].SigningRequestID)
	var deadIntent approvers.Statement
	if err != nil || json.Unmarshal([]byte(deadReq.Intent), &deadIntent) != nil || deadIntent.RequiredApprovals != 0 ||
		deadIntent.ExpiresAt != "" || len(deadIntent.Intent) != 1 || deadIntent.Intent[0].To != fakechain.RevertAddress || deadReq.Approvals != "[]" {
		t.Fatalf("the unapproved order's signing request %+v %v", deadReq, err)
	}
	names, data := l.events(t, dead.ID)
	if names[len(names)-1] != "Order.Failed" || data[len(data)-1]["failure"].(map[string]any)["code"] != "tx_reverted" {
		t.Fatalf("revert events %v %v", names, data[len(data)-1])
	}

	swap, legs := l.draft(t, "trade", `{"walletId":"`+l.wallet.ID+`","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"100","maxSlippageBps":30}`)
	if st := l.run(t, swap, legs); st.Status != "confirmed" {
		t.Fatalf("trade: %+v", st)
	}
	names, data = l.events(t, swap.ID)
	if strings.Join(names, " ") != "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast "+
		"Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed" {
		t.Fatalf("trade events %v", names)
	}
	if data[2]["leg"] != "APPROVE" || data[5]["leg"] != "SWAP" || data[8]["leg"] != "SWAP" || data[1]["leg"] != nil {
		t.Fatalf("multi-leg events carry their leg: %v", data)
	}

	over, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"6000000","destination":{"address":"0x2222222222222222222222222222222222222222"}}`)
	if st := l.run(t, over, legs); st.Status != "rejected" || st.Decision.Allowed {
		t.Fatalf("over the limit: %+v", st)
	}
	names, data = l.events(t, over.ID)
	if strings.Join(names, " ") != "Order.Created Order.Submitted Order.Rejected" || data[2]["reason"] != "policy" {
		t.Fatalf("policy rejection events %v %v", names, data)
	}
	if _, kept, err := l.store.Order(context.Background(), over.ID); err != nil || len(kept) != 1 || kept[0].Status != orders.StatusRejected {
		t.Fatalf("a rejected order's legs: %+v %v (want each rejected, none left pending)", kept, err)
	}
}

func TestRetriedActivitiesDoNotEmitTwice(t *testing.T) {
	s := storetest.NewSQLite(t)
	l := newLifecycle(t, s)
	o, _ := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	in := workflows.StepInput{OrderID: o.ID, CorrelationID: "c"}
	ctx := context.Background()
	for range 3 {
		if err := l.acts.MarkSubmitted(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	var first string
	for range 2 {
		ref, err := l.acts.RequestSignature(ctx, workflows.LegInput{OrderID: o.ID, CorrelationID: "c", Position: 0, Leg: "TRANSFER",
			ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if first != "" && ref.ID != first {
			t.Fatalf("a retry made a second signing request: %s then %s", first, ref.ID)
		}
		first = ref.ID
	}
	names, _ := l.events(t, o.ID)
	if strings.Join(names, " ") != "Order.Created Order.Submitted Wallet.SigningRequested" {
		t.Fatalf("events after retries: %v", names)
	}
	// A step from the wrong status is final: retrying cannot fix it.
	err := l.acts.MarkApproved(ctx, workflows.ApprovalRequest{OrderID: o.ID})
	if err == nil || !workflows.IsInvalidState(err) {
		t.Fatalf("want a non-retryable invalid-state error, got %v", err)
	}
}

// answerLost is a chain whose first broadcast reaches the chain but whose answer never
// comes back, as when the worker dies right after sending.
type answerLost struct {
	chain.Adapter
	lost bool
}

func (a *answerLost) Broadcast(ctx context.Context, tx chain.SignedTx) (string, error) {
	hash, err := a.Adapter.Broadcast(ctx, tx)
	if err == nil && !a.lost {
		a.lost = true
		return "", errors.New("connection reset after the chain took the transaction")
	}
	return hash, err
}

// The broadcast step retried after a lost answer finds its transaction on the chain and
// does not send it again: the chain was handed it once.
func TestABroadcastRetriedAfterALostAnswerIsNotSentAgain(t *testing.T) {
	s := storetest.NewSQLite(t)
	l := newLifecycle(t, s)
	lossy := &answerLost{Adapter: l.acts.Chain}
	l.acts.Chain = lossy
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	if st := l.run(t, o, legs); st.Status != "confirmed" || !lossy.lost {
		t.Fatalf("state %+v, answer lost %v", st, lossy.lost)
	}
	reqs, err := s.ListSigningRequests(context.Background(), store.SigningFilter{OrgID: o.OrgID, Apps: []string{"pay"}, Limit: 10})
	if err != nil || len(reqs) != 1 {
		t.Fatalf("signing requests %d %v", len(reqs), err)
	}
	if tx := l.chain.Transaction(reqs[0].Digest); tx == nil || tx.Submissions != 1 {
		t.Fatalf("the chain was handed the transaction %+v; want once", tx)
	}
}
