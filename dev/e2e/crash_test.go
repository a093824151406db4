package e2e

import (
	"fmt"
	"syscall"
	"testing"
)

// TestKilledMidFlightEveryOrderStillEnds kills treasury-dev (SIGKILL, no shutdown) while
// orders wait for approvers and signatures, starts it again on the same data directory,
// and checks that every order reaches its end with each event exactly once.
func TestKilledMidFlightEveryOrderStillEnds(t *testing.T) {
	bin, dataDir := devBinary(t), t.TempDir()
	first := startBinary(t, bin, dataDir, "--dev-signer=false", "--block-time", "50ms")
	api, pay := first.apiURL, first.creds.Keys["pay"]
	wallet := first.creds.Wallets[0].ID
	type order struct{ id, events string }
	var orders []order
	submit := func(amount string) string {
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":"0x1111111111111111111111111111111111111111"}}`, wallet, amount))
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		return id
	}
	plain := "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
	approved := "Order.Created Order.Submitted Order.Approved Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
	for range 4 {
		orders = append(orders, order{submit("500"), plain})
	}
	decided, undecided := submit("20000"), submit("30000")
	orders = append(orders, order{decided, approved}, order{undecided, approved})
	for _, o := range orders[:4] {
		waitStatus(t, api+"/payments/"+o.id, pay.Read, "pending_signature")
	}
	for _, id := range []string{decided, undecided} {
		waitStatus(t, api+"/payments/"+id, pay.Read, "pending_approval")
	}
	item := call(t, "GET", api+"/payments/"+decided, pay.Read).body["approval"].(map[string]any)["itemId"].(string)
	if r := send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"APPROVE"}`); r.status != 202 {
		t.Fatalf("approve %d %s", r.status, r.raw)
	}
	waitStatus(t, api+"/payments/"+decided, pay.Read, "pending_signature")

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	second := startBinary(t, bin, dataDir, "--block-time", "50ms")
	api = second.apiURL
	if second.creds.Keys["pay"].SK != pay.SK {
		t.Fatal("credentials changed across the restart")
	}
	item = call(t, "GET", api+"/payments/"+undecided, pay.Read).body["approval"].(map[string]any)["itemId"].(string)
	if r := send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"APPROVE"}`); r.status != 202 {
		t.Fatalf("approve after the restart %d %s", r.status, r.raw)
	}
	for _, o := range orders {
		waitStatus(t, api+"/payments/"+o.id, pay.Read, "confirmed")
		if got := eventNames(t, api, pay.Read, o.id); got != o.events {
			t.Fatalf("order %s events\n got %s\nwant %s", o.id, got, o.events)
		}
	}
	all := call(t, "GET", api+"/events?limit=200", pay.Read)
	seen := map[string]bool{}
	for _, e := range all.body["data"].([]any) {
		ev := e.(map[string]any)
		key := fmt.Sprint(ev["orderId"], "/", ev["sequence"])
		if seen[key] {
			t.Fatalf("event %s stored twice", key)
		}
		seen[key] = true
	}
	if want := 4*6 + 2*7; len(seen) != want {
		t.Fatalf("%d events stored, want %d", len(seen), want)
	}
}
