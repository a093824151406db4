package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// waitStatus polls an order until it reaches status, and returns its last body.
func waitStatus(t *testing.T, url, token, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := call(t, "GET", url, token)
		if r.body["status"] == status {
			return r.body
		}
		if time.Now().After(deadline) {
			t.Fatalf("order never reached %s: %s", status, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	b := startBundle(t, t.TempDir(), "")
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
		deadline := time.Now().Add(20 * time.Second)
		for {
			found, err := c.CountWorkflow(context.Background(), countRequest("OrderDomain = 'payment' AND CorrelationId = 'e2e-pay-500'"))
			if err == nil && found.GetCount() == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("workflow not searchable by OrderDomain and CorrelationId: %v %v", found, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
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
		if r := send(t, "POST", decide, pay.Approve, `{"decision":"APPROVE","comment":"ok"}`); r.status != 202 {
			t.Fatalf("approve %d %s", r.status, r.raw)
		}
		if r := send(t, "POST", decide, pay.Approve, `{"decision":"APPROVE"}`); r.status != 409 {
			t.Fatalf("deciding twice: %d %s", r.status, r.raw)
		}
		waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		want := "Order.Created Order.Submitted Order.Approved Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
		if got := eventNames(t, api, pay.Read, id); got != want {
			t.Fatalf("events %s", got)
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

	t.Run("the dead address reverts", func(t *testing.T) {
		id := create("5", "0x000000000000000000000000000000000000dEaD")
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "failed")
		if o["failure"].(map[string]any)["code"] != "tx_reverted" {
			t.Fatalf("failure %v", o["failure"])
		}
	})
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Query: query}
}
