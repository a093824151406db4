package events

import (
	"reflect"
	"testing"
)

func TestNormalizeEntry(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Order.Submitted", "order.submitted", true},
		{"order.submitted", "order.submitted", true},
		{"ORDER.CONFIRMED", "order.confirmed", true},
		{"Wallet.SigningRequested", "wallet.signingrequested", true},
		{"websocket.test", "websocket.test", true},
		{"*", "*", true},
		{"order.*", "order.*", true},
		{"Wallet.*", "wallet.*", true},
		{"websocket.*", "websocket.*", true},
		{"payment.*", "", false},
		{"order.submit", "", false},
		{"order.", "", false},
		{"order*", "", false},
		{"*.submitted", "", false},
		{"", "", false},
		{" order.submitted", "", false},
		{"order.submitted ", "", false},
		{"**", "", false},
	} {
		got, err := NormalizeEntry(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("NormalizeEntry(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestNormalizeEntries(t *testing.T) {
	got, err := NormalizeEntries([]string{"Order.Submitted", "order.submitted", "order.*"})
	if err != nil || !reflect.DeepEqual(got, []string{"order.submitted", "order.*"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := NormalizeEntries(nil); err == nil {
		t.Error("an empty list was accepted")
	}
	if _, err := NormalizeEntries([]string{"order.*", "nope"}); err == nil || err.Error()[:6] != "'nope'" {
		t.Errorf("bad entry error: %v", err)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = "*"
	}
	if _, err := NormalizeEntries(many); err == nil {
		t.Error("51 entries were accepted")
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		entries []string
		name    string
		want    bool
	}{
		{[]string{"order.submitted"}, "Order.Submitted", true},
		{[]string{"order.submitted"}, "Order.Approved", false},
		{[]string{"order.*"}, "Order.Confirmed", true},
		{[]string{"order.*"}, "Wallet.SigningRequested", false},
		{[]string{"wallet.*"}, "Wallet.TransactionSigned", true},
		{[]string{"*"}, "Wallet.TransactionSigned", true},
		{[]string{"*"}, "websocket.test", true},
		{[]string{"order.confirmed", "order.failed"}, "Order.Failed", true},
		{nil, "Order.Failed", false},
		// An app's own event is delivered only to a config that names it.
		{[]string{"*"}, "Policy.Published", false},
		{[]string{"policy.*"}, "Policy.Published", true},
		{[]string{"*", "policy.published"}, "Policy.Published", true},
		{[]string{"order.*"}, "Policy.Published", false},
	} {
		if got := Matches(tc.entries, tc.name); got != tc.want {
			t.Errorf("Matches(%v, %s) = %v, want %v", tc.entries, tc.name, got, tc.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	if n, ok := Canonical("order.broadcast"); !ok || n != "Order.Broadcast" {
		t.Errorf("Canonical = %q %v", n, ok)
	}
	if _, ok := Canonical("order.sent"); ok {
		t.Error("an unknown name is canonical")
	}
}
