package wshub_test

import (
	"context"
	"slices"
	"testing"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/assemble"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/store/storetest"
)

// A connection receives what its credential reaches (docs/api.md, "What a credential
// reaches"): a key restricted to some wallets only their events; a signing device (sign on
// treasury, on a treasury config) the signing requests of every app for its wallets, and
// nothing else of them; other credentials on a treasury config none of another app's.
func TestChannelNarrowsEventsToTheCredentialsReach(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	pay, treasury := creds.Keys["pay"], creds.Keys["treasury"]
	var mine, other string
	for _, w := range creds.Wallets {
		if w.Chain != "ethereum" {
			continue
		}
		if mine == "" {
			mine = w.ID
		} else if other == "" {
			other = w.ID
		}
	}
	newKey := func(sk string, body map[string]any) string {
		t.Helper()
		status, out := r.call(t, "POST", "/developer/api-keys", sk, body)
		if status != 201 {
			t.Fatalf("create key %v: %d %v", body, status, out)
		}
		return out["secret"].(string)
	}
	restricted := newKey(pay.SK, map[string]any{"kind": "tk", "actions": []string{"read"}, "resourceIds": []string{mine}})
	device := newKey(treasury.SK, map[string]any{"kind": "tk", "actions": []string{"sign"}, "resourceIds": []string{mine}})

	payConfig := r.createConfig(t, pay.SK, "*")
	treasuryConfig := r.createConfig(t, treasury.SK, "wallet.*")
	clients := map[string]*client{
		"pay pk":              r.connect(t, payConfig, pay.PK),
		"pay tk (one wallet)": r.connect(t, payConfig, restricted),
		"device (one wallet)": r.connect(t, treasuryConfig, device),
		"treasury pk":         r.connect(t, treasuryConfig, treasury.PK),
	}

	ctx := context.Background()
	payment := func(wallet string) string {
		t.Helper()
		status, out := r.call(t, "POST", "/api/v1/payments", pay.SK, map[string]any{"walletId": wallet, "asset": "USDC",
			"amount": "1.50", "destination": map[string]any{"address": "0x1111111111111111111111111111111111111111"}})
		if status != 201 {
			t.Fatalf("create payment: %d %v", status, out)
		}
		id := out["id"].(string)
		leg := 0
		if _, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: id, Step: "leg-0-signing-requested", To: "pending_signature",
			Event: &store.EventSpec{Name: events.WalletSigningRequested, Leg: &leg}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	mineOrder, otherOrder := payment(mine), payment(other)
	// The end of the stream: a last order of the wallet. Each event is offered to every
	// connection before the next, so once a client has this one's signing request, every
	// earlier event has been offered to every connection.
	last := payment(mine)

	type seen struct{ event, order string }
	want := map[string][]seen{
		"pay pk": {{events.OrderCreated, mineOrder}, {events.WalletSigningRequested, mineOrder},
			{events.OrderCreated, otherOrder}, {events.WalletSigningRequested, otherOrder}, {events.OrderCreated, last}},
		"pay tk (one wallet)": {{events.OrderCreated, mineOrder}, {events.WalletSigningRequested, mineOrder}, {events.OrderCreated, last}},
		"device (one wallet)": {{events.WalletSigningRequested, mineOrder}},
		"treasury pk":         nil,
	}
	for _, name := range []string{"pay pk", "pay tk (one wallet)", "device (one wallet)", "treasury pk"} {
		c := clients[name]
		end := func(f map[string]any) bool {
			data, _ := f["data"].(map[string]any)
			return f["event"] == events.WalletSigningRequested && data["orderId"] == last
		}
		if name == "treasury pk" {
			// It receives none of these: the test event, sent now, comes after whatever
			// the fan-out offered it.
			r.sendTestEvent(t, treasuryConfig, treasury.SK)
			end = func(f map[string]any) bool { return f["event"] == events.WebSocketTest }
		}
		var got []seen
		for f := c.next(t); !end(f); f = c.next(t) {
			data, _ := f["data"].(map[string]any)
			got = append(got, seen{f["event"].(string), data["orderId"].(string)})
			if f["event"] == events.WalletSigningRequested && data["walletId"] == nil {
				t.Errorf("%s: a signing request's frame does not name its wallet: %v", name, data)
			}
		}
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s received %v, want %v", name, got, want[name])
		}
	}
}
