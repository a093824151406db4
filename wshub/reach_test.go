package wshub_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A connection receives what its credential reaches (docs/api.md, "What a credential
// reaches"): a key restricted to some wallets only their events; a signing device (a
// treasury tk_ with sign, restricted to wallets, on a treasury config) the signing
// requests of every app for its wallets, and nothing else of them; other credentials on a
// treasury config, its sk_ included, none of another app's, and the config's delivery log
// names only what reached a connection.
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
		"treasury sk":         r.connect(t, treasuryConfig, treasury.SK),
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
		"treasury sk":         nil,
	}
	for _, name := range []string{"pay pk", "pay tk (one wallet)", "device (one wallet)", "treasury pk", "treasury sk"} {
		c := clients[name]
		end := func(f map[string]any) bool {
			data, _ := f["data"].(map[string]any)
			return f["event"] == events.WalletSigningRequested && data["orderId"] == last
		}
		if name == "treasury pk" || name == "treasury sk" {
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

	// The treasury config's delivery log names what reached one of its connections: its
	// device's wallet's signing requests, never the other wallet's.
	signingRequest := func(order string) string {
		evs, err := s.OrderEvents(ctx, order)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Event == events.WalletSigningRequested {
				return ev.ID
			}
		}
		t.Fatalf("order %s has no signing request", order)
		return ""
	}
	var logged []string
	wait.For(t, 10*time.Second, "the last signing request in the treasury config's delivery log", func() bool {
		status, out := r.call(t, "GET", "/developer/websockets/"+treasuryConfig, treasury.SK, nil)
		if status != 200 {
			t.Fatalf("config: %d %v", status, out)
		}
		logged = logged[:0]
		entries, _ := out["deliveryLog"].([]any)
		for _, e := range entries {
			logged = append(logged, e.(map[string]any)["eventId"].(string))
		}
		return slices.Contains(logged, signingRequest(last))
	})
	if !slices.Contains(logged, signingRequest(mineOrder)) || !slices.Contains(logged, signingRequest(last)) ||
		slices.Contains(logged, signingRequest(otherOrder)) {
		t.Errorf("the treasury config's delivery log %v: want %s and %s (the device's wallet), not %s", logged,
			signingRequest(mineOrder), signingRequest(last), signingRequest(otherOrder))
	}
}

// A signing device's key that does not hold read hears its wallets' signing requests and
// nothing else of its config; one that holds read hears the config's events besides.
func TestADeviceWithoutReadHearsOnlyItsSigningRequests(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	pay, treasury := creds.Keys["pay"], creds.Keys["treasury"]
	wallet := creds.Wallets[0].ID
	newKey := func(actions ...string) string {
		t.Helper()
		status, out := r.call(t, "POST", "/developer/api-keys", treasury.SK, map[string]any{"kind": "tk", "actions": actions,
			"resourceIds": []string{wallet}})
		if status != 201 {
			t.Fatalf("create key: %d %v", status, out)
		}
		return out["secret"].(string)
	}
	cfg := r.createConfig(t, treasury.SK, "policy.*", "wallet.*")
	signing := r.connect(t, cfg, newKey("sign"))
	reading := r.connect(t, cfg, newKey("sign", "read"))
	// An event of the treasury app the config wants, then another app's signing request.
	if status, out := r.call(t, "PUT", "/api/v1/policies/treasury", treasury.SK, map[string]any{"maxOrderUsd": "1000"}); status != 200 {
		t.Fatalf("publish the treasury policy: %d %v", status, out)
	}
	status, out := r.call(t, "POST", "/api/v1/payments", pay.SK, map[string]any{"walletId": wallet, "asset": "USDC",
		"amount": "1", "destination": map[string]any{"address": "0x1111111111111111111111111111111111111111"}})
	if status != 201 {
		t.Fatalf("create payment: %d %v", status, out)
	}
	leg := 0
	if _, err := s.ApplyOrderStep(context.Background(), store.OrderChange{OrderID: out["id"].(string), Step: "leg-0-signing-requested",
		To: "pending_signature", Event: &store.EventSpec{Name: events.WalletSigningRequested, Leg: &leg}}); err != nil {
		t.Fatal(err)
	}
	if f := reading.next(t); f["event"] != events.PolicyPublished {
		t.Fatalf("a device that reads: first %v, want the config's Policy.Published", f)
	}
	for name, c := range map[string]*client{"signing only": signing, "reading too": reading} {
		if f := c.next(t); f["event"] != events.WalletSigningRequested {
			t.Fatalf("%s: %v, want the signing request", name, f)
		}
	}
}
