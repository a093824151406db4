package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	treasury "github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/signer"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// waitStatus polls an order until it reaches status, and returns its last body.
func waitStatus(t *testing.T, url, token, status string) map[string]any {
	t.Helper()
	return waitStatusWithin(t, url, token, status, 30*time.Second)
}

// waitStatusWithin is waitStatus giving up after d.
func waitStatusWithin(t *testing.T, url, token, status string, d time.Duration) map[string]any {
	t.Helper()
	var last reply
	reached := false
	defer func() { // the order as last seen, should it never reach status
		if !reached {
			t.Logf("the order, last seen: %s", last.raw)
		}
	}()
	wait.For(t, d, "the order to reach "+status, func() bool {
		last = call(t, "GET", url, token)
		return last.body["status"] == status
	})
	reached = true
	return last.body
}

// eventNames lists an order's events and checks their sequence has no gap.
func eventNames(t *testing.T, api, token, orderID string) string {
	t.Helper()
	r := call(t, "GET", api+"/events?orderId="+orderID, token)
	var names []string
	for i, e := range r.body["data"].([]any) {
		ev := e.(map[string]any)
		if ev["sequence"] != float64(i+1) {
			t.Fatalf("event %d has sequence %v", i, ev["sequence"])
		}
		names = append(names, ev["event"].(string))
	}
	return strings.Join(names, " ")
}

func TestPaymentsReachTheirEnd(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { paymentsReachTheirEnd(t, "") })
	t.Run("postgres", func(t *testing.T) { paymentsReachTheirEnd(t, storetest.PostgresSchemaURL(t)) })
}

func paymentsReachTheirEnd(t *testing.T, databaseURL string) {
	b := startBundle(t, t.TempDir(), databaseURL)
	defer func() { _ = b.Shutdown() }()
	creds := b.Credentials
	api := b.APIURL + "/api/v1"
	pay := creds.Keys["pay"]
	wallet := creds.Wallets[0].ID
	body := func(amount, to string) string {
		return fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q}}`, wallet, amount, to)
	}
	create := func(amount, to string) string {
		r := send(t, "POST", api+"/payments", pay.SK, body(amount, to))
		if r.status != 201 {
			t.Fatalf("create %d %s", r.status, r.raw)
		}
		return r.body["id"].(string)
	}

	t.Run("500 USDC without approval", func(t *testing.T) {
		id := create("500", "0x1111111111111111111111111111111111111111")
		r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}", "X-Correlation-Id", "e2e-pay-500")
		if r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		if o["legs"].([]any)[0].(map[string]any)["txHash"] == nil {
			t.Fatalf("confirmed without a tx hash: %v", o)
		}
		want := "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
		if got := eventNames(t, api, pay.Read, id); got != want {
			t.Fatalf("events %s", got)
		}
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 409 {
			t.Fatalf("a second submit: %d", r.status)
		}
		c, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wait.For(t, 20*time.Second, "the workflow to be searchable by OrderDomain and CorrelationId", func() bool {
			found, err := c.CountWorkflow(context.Background(), countRequest("OrderDomain = 'payment' AND CorrelationId = 'e2e-pay-500'"))
			return err == nil && found.GetCount() == 1
		})
	})

	t.Run("20,000 USDC needs an approver who is not the maker", func(t *testing.T) {
		id := create("20000", "0x2222222222222222222222222222222222222222")
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "pending_approval")
		item := o["approval"].(map[string]any)["itemId"].(string)
		list := call(t, "GET", api+"/approvals?status=pending&domain=payment", pay.Approve)
		if len(list.body["data"].([]any)) != 1 {
			t.Fatalf("pending approvals: %s", list.raw)
		}
		decide := api + "/approvals/payment/" + item + "/decide"
		if r := send(t, "POST", decide, pay.SK, `{"decision":"APPROVE"}`); r.status != 403 || r.body["code"] != "maker_checker_violation" {
			t.Fatalf("the maker approving: %d %s", r.status, r.raw)
		}
		if r := send(t, "POST", decide, pay.Read, `{"decision":"APPROVE"}`); r.status != 403 || r.body["code"] != "permission_denied" {
			t.Fatalf("a read key approving: %d %s", r.status, r.raw)
		}
		if r := send(t, "POST", decide, pay.Approve, `{"decision":"APPROVE","comment":"ok"}`, "X-Correlation-Id", "e2e-approve"); r.status != 202 {
			t.Fatalf("approve %d %s", r.status, r.raw)
		}
		if r := send(t, "POST", decide, pay.Approve, `{"decision":"REJECT"}`); r.status != 409 {
			t.Fatalf("changing one's decision: %d %s", r.status, r.raw)
		}
		if r := send(t, "POST", decide, creds.SecondApprover["pay"], `{"decision":"APPROVE"}`); r.status != 409 {
			t.Fatalf("deciding an approved item: %d %s", r.status, r.raw)
		}
		done := waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		if ds := done["approval"].(map[string]any)["decisions"].([]any); len(ds) != 1 || ds[0].(map[string]any)["comment"] != "ok" {
			t.Fatalf("the order shows its decisions: %v", done["approval"])
		}
		want := "Order.Created Order.Submitted Order.Approved Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
		if got := eventNames(t, api, pay.Read, id); got != want {
			t.Fatalf("events %s", got)
		}
		evs := call(t, "GET", api+"/events?orderId="+id, pay.Read).body["data"].([]any)
		if evs[2].(map[string]any)["correlationId"] != "e2e-approve" {
			t.Fatalf("Order.Approved carries the correlation id of the decision that caused it: %v", evs[2])
		}
	})

	t.Run("an approver rejects", func(t *testing.T) {
		id := create("20000", "0x2222222222222222222222222222222222222222")
		send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}")
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "pending_approval")
		item := o["approval"].(map[string]any)["itemId"].(string)
		if r := send(t, "POST", api+"/approvals/payment/"+item+"/decide", creds.SecondApprover["pay"], `{"decision":"REJECT","comment":"no"}`); r.status != 202 {
			t.Fatalf("reject %d %s", r.status, r.raw)
		}
		o = waitStatus(t, api+"/payments/"+id, pay.Read, "rejected")
		if o["rejection"].(map[string]any)["reason"] != "approver" {
			t.Fatalf("rejection %v", o["rejection"])
		}
		if got := eventNames(t, api, pay.Read, id); got != "Order.Created Order.Submitted Order.Rejected" {
			t.Fatalf("events %s", got)
		}
		if r := send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"APPROVE"}`); r.status != 409 {
			t.Fatalf("deciding a rejected item: %d %s", r.status, r.raw)
		}
	})

	t.Run("policy violation answers 422 and rejects", func(t *testing.T) {
		id := create("5", "0x9999999999999999999999999999999999999999")
		r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}")
		if r.status != 422 || r.body["code"] != "policy_violation" || len(r.body["violations"].([]any)) != 1 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "rejected")
		if o["rejection"].(map[string]any)["reason"] != "policy" {
			t.Fatalf("rejection %v", o["rejection"])
		}
		if got := eventNames(t, api, pay.Read, id); got != "Order.Created Order.Submitted Order.Rejected" {
			t.Fatalf("events %s", got)
		}
	})

	t.Run("a batch pays its whitelisted recipients, and one off the whitelist is refused by index", func(t *testing.T) {
		batch := func(second string) string {
			return fmt.Sprintf(`{"walletId":%q,"asset":"USDC","reference":"payroll","recipients":[`+
				`{"address":"0x1111111111111111111111111111111111111111","amount":"1.5","reference":"emp-1","label":"Ada"},`+
				`{"address":%q,"amount":"2.25"},{"address":"0x1111111111111111111111111111111111111111","amount":"1"}]}`, wallet, second)
		}
		r := send(t, "POST", api+"/payments", pay.SK, batch("0x2222222222222222222222222222222222222222"))
		if r.status != 201 || r.body["amount"] != "4.75" || r.body["destination"] != nil || len(r.body["recipients"].([]any)) != 3 {
			t.Fatalf("create %d %s", r.status, r.raw)
		}
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		legs := o["legs"].([]any)
		hash := legs[0].(map[string]any)["txHash"]
		if len(legs) != 1 || hash == nil {
			t.Fatalf("legs %v: one part, one transaction", legs)
		}
		for i, x := range o["recipients"].([]any) {
			rc := x.(map[string]any)
			if rc["part"] != float64(1) || rc["status"] != "confirmed" || rc["txHash"] != hash {
				t.Fatalf("recipient %d: %v", i, rc)
			}
		}
		evs := call(t, "GET", api+"/events?orderId="+id, pay.Read).body["data"].([]any)
		if last := evs[len(evs)-1].(map[string]any); last["event"] != "Order.Confirmed" || last["part"] != float64(1) || last["leg"] != "TRANSFER" {
			t.Fatalf("the batch's last event: %v", last)
		}

		r = send(t, "POST", api+"/payments", pay.SK, batch("0x9999999999999999999999999999999999999999"))
		if r.status != 201 {
			t.Fatalf("create %d %s", r.status, r.raw)
		}
		id = r.body["id"].(string)
		r = send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}")
		if r.status != 422 || r.body["code"] != "policy_violation" || !strings.Contains(string(r.raw), "recipients[1] 0x9999999999999999999999999999999999999999") ||
			strings.Contains(string(r.raw), "recipients[0]") {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		if r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","recipients":[{"address":"0x1111111111111111111111111111111111111111","amount":"1"}]}`, wallet)); r.status != 422 {
			t.Fatalf("a batch of one: %d %s", r.status, r.raw)
		}
	})

	t.Run("the dead address reverts", func(t *testing.T) {
		id := create("5", "0x000000000000000000000000000000000000dEaD")
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "failed")
		failure := o["failure"].(map[string]any)
		if failure["code"] != "tx_reverted" || failure["message"] != "reverted: DevToken: transfers to 0x...dEaD always revert" {
			t.Fatalf("failure %v: want tx_reverted with the token's revert reason", failure)
		}
		if legs := o["legs"].([]any); legs[0].(map[string]any)["txHash"] == nil {
			t.Fatalf("a reverted transaction was mined: its hash is on the leg: %v", legs)
		}
	})

	t.Run("metrics count what happened", func(t *testing.T) {
		wants := []struct {
			name   string
			labels []string
			min    float64
		}{
			{"temporal_workflow_completed_total", []string{`workflow_type="OrderLifecycle"`}, 3},
			{"temporal_activity_execution_latency_seconds_count", []string{`activity_type="BroadcastLeg"`}, 2},
			{"treasury_events_committed_total", []string{`event="Order.Confirmed"`}, 1},
			{"treasury_http_requests_total", []string{`route="/api/v1/payments/:id/submit"`, `status="202"`}, 2},
		}
		// A workflow is counted once its completion is processed, a moment after its order ends.
		var text, short string
		defer func() { // which count fell short, should one never get there
			if short != "" {
				t.Log(short)
			}
		}()
		wait.For(t, 10*time.Second, "every count to reach its minimum", func() bool {
			r := call(t, "GET", b.MetricsURL, "")
			text = string(r.raw)
			short = ""
			for _, want := range wants {
				if got := metricValue(text, want.name, want.labels...); r.status != 200 || got < want.min {
					short = fmt.Sprintf("%s%v = %v, want at least %v (%d)", want.name, want.labels, got, want.min, r.status)
				}
			}
			return short == ""
		})
		if id := regexp.MustCompile(`="[^"]*\b(ord|evt|sig|apr|wal|key|sk|pk|tk)_[0-9a-f]`).FindString(text); id != "" {
			t.Errorf("a label carries an id: %s", id)
		}
	})
}

// metricValue sums the series of a family in a /metrics text whose labels include every
// pair given (k="v").
func metricValue(text, name string, labels ...string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line[:i], l)
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); match && err == nil {
			sum += v
		}
	}
	return sum
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Query: query}
}

func TestEveryDomainReachesConfirmed(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	wallet := b.Credentials.Wallets[0].ID
	cases := []struct {
		app, collection, body, events string
	}{
		{"trade", "trade-orders", `{"walletId":%q,"sellAsset":"USDC","buyAsset":"ETH","sellAmount":"300","maxSlippageBps":50}`,
			"Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast " +
				"Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"},
		{"trade", "trade-orders", `{"walletId":%q,"sellAsset":"ETH","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":50}`,
			"Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"},
		{"earn", "earn-orders", `{"walletId":%q,"protocol":"aave","action":"deposit","asset":"USDC","amount":"1000"}`,
			"Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"},
		{"earn", "earn-orders", `{"walletId":%q,"protocol":"compound","action":"withdraw","asset":"USDC","amount":"10"}`,
			"Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast " +
				"Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"},
		{"borrow", "borrow-orders", `{"walletId":%q,"protocol":"aave","action":"draw","asset":"USDC","amount":"2500","collateralAsset":"ETH"}`,
			"Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"},
		{"borrow", "borrow-orders", `{"walletId":%q,"protocol":"aave","action":"repay","asset":"USDC","amount":"2500"}`,
			"Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"},
	}
	for _, tc := range cases {
		t.Run(tc.collection+" "+tc.body[len(tc.body)-40:], func(t *testing.T) {
			keys := b.Credentials.Keys[tc.app]
			r := send(t, "POST", api+"/"+tc.collection, keys.SK, fmt.Sprintf(tc.body, wallet))
			if r.status != 201 {
				t.Fatalf("create %d %s", r.status, r.raw)
			}
			id := r.body["id"].(string)
			if r := send(t, "POST", api+"/"+tc.collection+"/"+id+"/submit", keys.SK, "{}"); r.status != 202 {
				t.Fatalf("submit %d %s", r.status, r.raw)
			}
			waitStatus(t, api+"/"+tc.collection+"/"+id, keys.Read, "confirmed")
			if got := eventNames(t, api, keys.Read, id); got != tc.events {
				t.Fatalf("events\n got %s\nwant %s", got, tc.events)
			}
		})
	}

	// The seeded trade policy denies WBTC/USDC both ways: the trade is created, its submit
	// answers 422 naming the rule, and it ends rejected by policy.
	trade := b.Credentials.Keys["trade"]
	for _, pair := range [][2]string{{"WBTC", "USDC"}, {"USDC", "WBTC"}} {
		t.Run("denied pair "+pair[0]+" to "+pair[1], func(t *testing.T) {
			r := send(t, "POST", api+"/trade-orders", trade.SK, fmt.Sprintf(
				`{"walletId":%q,"sellAsset":%q,"buyAsset":%q,"sellAmount":"0.05","maxSlippageBps":50}`, wallet, pair[0], pair[1]))
			if r.status != 201 {
				t.Fatalf("create %d %s", r.status, r.raw)
			}
			id := r.body["id"].(string)
			r = send(t, "POST", api+"/trade-orders/"+id+"/submit", trade.SK, "{}")
			violations, _ := r.body["violations"].([]any)
			if r.status != 422 || r.body["code"] != "policy_violation" || len(violations) != 1 ||
				violations[0].(map[string]any)["rule"] != "deniedPairs" {
				t.Fatalf("submit %d %s", r.status, r.raw)
			}
			o := waitStatus(t, api+"/trade-orders/"+id, trade.Read, "rejected")
			if o["rejection"].(map[string]any)["reason"] != "policy" {
				t.Fatalf("rejection %v", o["rejection"])
			}
		})
	}

	// The developer surface is at the root, as the seed lists it: an sk_ key reads the
	// WebSockets page's data at GET {base_url}/developer/websockets.
	t.Run("developer surface at the root", func(t *testing.T) {
		pay := b.Credentials.Keys["pay"]
		if r := send(t, "POST", b.APIURL+"/developer/websockets", pay.SK, `{"events":["order.*"]}`); r.status != 201 {
			t.Fatalf("create config %d %s", r.status, r.raw)
		}
		r := call(t, "GET", b.APIURL+"/developer/websockets", pay.SK)
		data, _ := r.body["data"].([]any)
		if r.status != 200 || len(data) == 0 || data[0].(map[string]any)["deliveryLog"] == nil {
			t.Fatalf("GET /developer/websockets: %d %s", r.status, r.raw)
		}
	})
}

func TestConcurrentSubmitsWithOneKeyStartOneWorkflow(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"10","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, b.Credentials.Wallets[0].ID))
	id := r.body["id"].(string)
	codes := make(chan int, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}", "Idempotency-Key", "submit-once").status
		}()
	}
	wg.Wait()
	close(codes)
	accepted := 0
	for c := range codes {
		switch c {
		case 202:
			accepted++
		case 409: // the first was still running
		default:
			t.Fatalf("unexpected status %d", c)
		}
	}
	if accepted == 0 {
		t.Fatal("no submit was accepted")
	}
	waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
	if got := eventNames(t, api, pay.Read, id); strings.Count(got, "Order.Submitted") != 1 {
		t.Fatalf("events %s", got)
	}
	// A late repeat with the same key replays the first answer.
	late := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}", "Idempotency-Key", "submit-once")
	if late.status != 202 || late.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("late repeat %d %v", late.status, late.header)
	}
	c, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runs, err := c.CountWorkflow(context.Background(), countRequest("WorkflowId = 'order-"+id+"'"))
	if err != nil || runs.GetCount() != 1 {
		t.Fatalf("workflow runs for the order: %v %v", runs, err)
	}
}

// A submit whose workflow is not started, nor its policy decided, within the wait (here
// no wait at all) is accepted all the same, durably: 202, policyDecision pending, the order
// submitted, its start queued in the database. A worker starts it from the queue, and the
// workflow decides after: an allowed payment confirms, a refused one ends rejected with
// Order.Rejected (reason policy) carrying its violations.
func TestASubmitWhoseDecisionIsLateIsDecidedAfter(t *testing.T) {
	b := startBundle(t, t.TempDir(), "", func(o *devstack.Options) {
		o.SubmitDecisionWait, o.QueuedStartGrace = time.Nanosecond, time.Second
	})
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	// The submit's wait ends at once; the workflow may still decide before the answer
	// reads the order, and the answer then carries that decision: pending only while the
	// order is submitted and undecided.
	submit := func(to string, allow bool) string {
		t.Helper()
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"10","destination":{"address":%q}}`,
			b.Credentials.Wallets[0].ID, to))
		id, _ := r.body["id"].(string)
		s := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}")
		pending := s.status == 202 && s.body["policyDecision"] == "pending" && s.body["status"] == "submitted"
		decided := allow && s.status == 202 && s.body["policyDecision"] == "allowed" ||
			!allow && s.status == 422 && s.body["code"] == "policy_violation"
		if !pending && !decided {
			t.Fatalf("a submit with no wait for the decision: %d %s", s.status, s.raw)
		}
		return id
	}
	allowed, refused := submit("0x1111111111111111111111111111111111111111", true), submit("0x9999999999999999999999999999999999999999", false)
	waitStatusWithin(t, api+"/payments/"+allowed, pay.Read, "confirmed", 2*time.Minute)
	if got := eventNames(t, api, pay.Read, allowed); got != "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed" {
		t.Fatalf("the allowed payment's events: %s", got)
	}
	waitStatusWithin(t, api+"/payments/"+refused, pay.Read, "rejected", 2*time.Minute)
	r := call(t, "GET", api+"/events?orderId="+refused, pay.Read)
	data, _ := r.body["data"].([]any)
	last, _ := data[len(data)-1].(map[string]any)
	if violations, _ := last["violations"].([]any); last["event"] != "Order.Rejected" || last["reason"] != "policy" || len(violations) == 0 {
		t.Fatalf("the refused payment's last event: %v", last)
	}
}

func TestManualWalletSignedThroughTheAPI(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	manual := manualWallet(b.Credentials)
	r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"ETH","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, manual.ID))
	id := r.body["id"].(string)
	if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
		t.Fatalf("submit %d %s", r.status, r.raw)
	}
	o := waitStatus(t, api+"/payments/"+id, pay.Read, "pending_signature")
	reqID := o["legs"].([]any)[0].(map[string]any)["signingRequestId"].(string)
	req := call(t, "GET", api+"/signing-requests/"+reqID, pay.Sign)
	if req.status != 200 || req.body["status"] != "pending" {
		t.Fatalf("signing request %d %s", req.status, req.raw)
	}
	// The integrator's side: check the request against its own transaction, then sign.
	var request treasury.SigningRequest
	if err := json.Unmarshal([]byte(req.raw), &request); err != nil {
		t.Fatal(err)
	}
	if request.Scheme != "secp256k1" || manual.Scheme != "secp256k1" || !treasury.IsEVMTransaction(request) {
		t.Fatalf("the manual ethereum wallet signs an EIP-1559 transaction with secp256k1: %s", req.raw)
	}
	key, err := keys.Parse(manual.Scheme, manual.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(key.Address(), manual.Address) {
		t.Fatalf("the key's address %s is not the wallet's %s", key.Address(), manual.Address)
	}
	signature, err := treasury.SignRequest(request, key)
	if err != nil {
		t.Fatal(err)
	}
	good := base64.StdEncoding.EncodeToString(signature)
	sigURL := api + "/signing-requests/" + reqID + "/signature"
	wrongKey, _ := keys.Generate("secp256k1")
	digest, _ := hex.DecodeString(request.Digest)
	wrong, _ := wrongKey.Sign(digest)
	// The same transaction at another nonce is another transaction: its signature does
	// not recover to the wallet over this digest.
	var fields map[string]any
	_ = json.Unmarshal([]byte(request.UnsignedTx), &fields)
	fields["nonce"] = fields["nonce"].(float64) + 1
	other, _ := json.Marshal(fields)
	otherDigest, _, err := evm.Digest(other)
	if err != nil {
		t.Fatal(err)
	}
	otherBytes, _ := hex.DecodeString(otherDigest)
	otherSig, _ := key.Sign(otherBytes)
	for what, sig := range map[string][]byte{"a wrong key's signature": wrong, "a signature of another nonce": otherSig} {
		bad := base64.StdEncoding.EncodeToString(sig)
		if r := send(t, "POST", sigURL, pay.Sign, fmt.Sprintf(`{"signature":%q}`, bad)); r.status != 422 || r.body["code"] != "invalid_signature" {
			t.Fatalf("%s: %d %s", what, r.status, r.raw)
		}
	}
	if r := send(t, "POST", sigURL, pay.Read, fmt.Sprintf(`{"signature":%q}`, good)); r.status != 403 {
		t.Fatalf("a read key signing: %d %s", r.status, r.raw)
	}
	if r := send(t, "POST", sigURL, pay.Sign, fmt.Sprintf(`{"signature":%q}`, good)); r.status != 202 {
		t.Fatalf("the right signature: %d %s", r.status, r.raw)
	}
	waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
}

func TestReferenceSignerSignsTheManualWallet(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	manual := manualWallet(b.Credentials)
	keyFile := filepath.Join(t.TempDir(), "wallet.key")
	if err := os.WriteFile(keyFile, []byte(manual.PrivateKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signer.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Paired as docs/api.md says: a treasury key holding sign, restricted to the wallet,
	// and a treasury config that wants the signing requests.
	treasury := b.Credentials.Keys["treasury"]
	device := send(t, "POST", b.APIURL+"/developer/api-keys", treasury.SK,
		fmt.Sprintf(`{"kind":"tk","actions":["sign"],"resourceIds":[%q],"label":"signer device"}`, manual.ID))
	config := send(t, "POST", b.APIURL+"/developer/websockets", treasury.SK, `{"events":["wallet.signingrequested"]}`)
	if device.status != 201 || config.status != 201 {
		t.Fatalf("pairing: %d %s, %d %s", device.status, device.raw, config.status, config.raw)
	}
	configID := config.body["id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// An hour between polls: only the live channel can wake it in time.
		_ = signer.Run(ctx, signer.Config{BaseURL: b.APIURL, Token: device.body["secret"].(string), WalletID: manual.ID, Key: key,
			ConfigID: configID, Interval: time.Hour})
	}()
	wait.For(t, 30*time.Second, "the signer to connect (liveConnections 1)", func() bool {
		return send(t, "GET", b.APIURL+"/developer/websockets/"+configID, treasury.SK, "").body["liveConnections"] == float64(1)
	})
	// One device signs for every app: a payment and a trade of its wallet.
	r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"25","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, manual.ID))
	id := r.body["id"].(string)
	if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
		t.Fatalf("submit %d %s", r.status, r.raw)
	}
	trade := b.Credentials.Keys["trade"]
	r = send(t, "POST", api+"/trade-orders", trade.SK, fmt.Sprintf(`{"walletId":%q,"sellAsset":"ETH","buyAsset":"USDC","sellAmount":"0.01","maxSlippageBps":50}`, manual.ID))
	tradeID := r.body["id"].(string)
	if r := send(t, "POST", api+"/trade-orders/"+tradeID+"/submit", trade.SK, "{}"); r.status != 202 {
		t.Fatalf("submit trade %d %s", r.status, r.raw)
	}
	waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
	waitStatus(t, api+"/trade-orders/"+tradeID, trade.Read, "confirmed")
}

// manualWallet is the seeded wallet that the dev signer leaves alone.
func manualWallet(c *seed.Credentials) seed.Wallet {
	for _, w := range c.Wallets {
		if !w.AutoSign {
			return w
		}
	}
	return seed.Wallet{}
}
