package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/opentreasury/treasury/dev/wait"
)

// TestRecordHistories records the histories of real order workflows for the replay test
// in workflows/. It runs only when asked to:
//
//	RECORD_HISTORIES=$PWD/workflows/testdata go test ./e2e -run TestRecordHistories
//
// Record new histories when the workflow changes in a way old runs must survive; keep the
// old files, so that a change that breaks running workflows fails the replay test
// (RECORD_HISTORIES_PREFIX names the new ones apart).
func TestRecordHistories(t *testing.T) {
	dir := os.Getenv("RECORD_HISTORIES")
	if dir == "" {
		t.Skip("set RECORD_HISTORIES to a directory to record workflow histories")
	}
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay, trade := b.Credentials.Keys["pay"], b.Credentials.Keys["trade"]
	wallet := b.Credentials.Wallets[0].ID
	payment := func(amount, to string) string {
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q}}`, wallet, amount, to))
		id := r.body["id"].(string)
		send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}")
		return id
	}
	runs := map[string]string{}
	runs["payment-confirmed"] = payment("500", "0x1111111111111111111111111111111111111111")
	waitStatus(t, api+"/payments/"+runs["payment-confirmed"], pay.Read, "confirmed")
	runs["payment-policy-rejected"] = payment("5", "0x9999999999999999999999999999999999999999")
	waitStatus(t, api+"/payments/"+runs["payment-policy-rejected"], pay.Read, "rejected")
	runs["payment-reverted"] = payment("5", "0x000000000000000000000000000000000000dEaD")
	waitStatus(t, api+"/payments/"+runs["payment-reverted"], pay.Read, "failed")
	approved := payment("20000", "0x2222222222222222222222222222222222222222")
	o := waitStatus(t, api+"/payments/"+approved, pay.Read, "pending_approval")
	item := o["approval"].(map[string]any)["itemId"].(string)
	send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"APPROVE"}`)
	waitStatus(t, api+"/payments/"+approved, pay.Read, "confirmed")
	runs["payment-approved"] = approved
	rejected := payment("20000", "0x2222222222222222222222222222222222222222")
	o = waitStatus(t, api+"/payments/"+rejected, pay.Read, "pending_approval")
	item = o["approval"].(map[string]any)["itemId"].(string)
	send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"REJECT"}`)
	waitStatus(t, api+"/payments/"+rejected, pay.Read, "rejected")
	runs["payment-approver-rejected"] = rejected
	r := send(t, "POST", api+"/trade-orders", trade.SK, fmt.Sprintf(`{"walletId":%q,"sellAsset":"USDC","buyAsset":"ETH","sellAmount":"300","maxSlippageBps":50}`, wallet))
	swap := r.body["id"].(string)
	send(t, "POST", api+"/trade-orders/"+swap+"/submit", trade.SK, "{}")
	waitStatus(t, api+"/trade-orders/"+swap, trade.Read, "confirmed")
	runs["trade-two-legs"] = swap
	workflowIDs := map[string]string{}
	for name, id := range runs {
		workflowIDs[name] = "order-" + id
	}
	// A policy's dry run against the history above.
	r = send(t, "POST", api+"/policies/pay/drafts", pay.SK, `{"rules":{"maxOrderUsd":"1000"}}`)
	r = send(t, "POST", api+"/policies/pay/dry-runs", pay.SK, `{"draftId":"`+r.body["id"].(string)+`","days":1}`)
	dryRun := r.body["id"].(string)
	wait.For(t, 30*time.Second, "dry run "+dryRun+" to complete", func() bool {
		return call(t, "GET", api+"/policies/pay/dry-runs/"+dryRun, pay.SK).body["status"] == "completed"
	})
	workflowIDs["policy-dry-run"] = "policy-dry-run-" + dryRun
	// A verification of the audit chain these made.
	r = send(t, "POST", api+"/audit-logs/verifications", b.Credentials.Keys["treasury"].Read, "")
	verification := r.body["id"].(string)
	wait.For(t, 30*time.Second, "verification "+verification+" to end", func() bool {
		return call(t, "GET", api+"/audit-logs/verifications/"+verification, b.Credentials.Keys["treasury"].Read).body["status"] == "intact"
	})
	workflowIDs["audit-verification"] = "audit-verification-" + verification

	c, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, workflowID := range workflowIDs {
		var events []*historypb.HistoryEvent
		it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, 0)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
		raw, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, os.Getenv("RECORD_HISTORIES_PREFIX")+name+".json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
