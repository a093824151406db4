package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A signer lists its wallet's pending signing requests, oldest first, at every pass. Once
// the planner's statistics have seen a wallet whose requests are nearly all signed, as a
// busy treasury wallet's are, SQLite must still read the pending few from the wallet's
// index, in its order, not every signing request there is, nor all of the wallet's sorted.
func TestAWalletsPendingSigningRequestsAreReadThroughItsIndex(t *testing.T) {
	s := storetest.NewSQLite(t)
	org := mustOrg(t, s)
	o := mustDraft(t, s, org, "TRANSFER")
	now := time.Now().UTC()
	request := func(attempt int, status string) *store.SigningRequest {
		return &store.SigningRequest{ID: ids.New(ids.SigningRequest), OrgID: org, App: o.App, Domain: o.Domain, OrderID: o.ID,
			Attempt: attempt, Leg: "TRANSFER", WalletID: o.WalletID, Chain: o.Chain, UnsignedTx: "{}", Scheme: "secp256k1",
			Digest: fmt.Sprintf("%064x", attempt), Status: status, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	for i := range 300 {
		if _, err := s.CreateSigningRequest(ctx, request(i, orders.SigningSigned)); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := s.CreateSigningRequest(ctx, request(300, orders.SigningPending))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Analyze(ctx); err != nil {
		t.Fatal(err)
	}
	filter := store.SigningFilter{WalletIDs: []string{o.WalletID}, Status: orders.SigningPending, Limit: 100}
	got, err := s.ListSigningRequests(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != pending.ID {
		t.Fatalf("pending requests %+v, want only %s", got, pending.ID)
	}
	plans, err := s.QueryPlans(ctx, func(s *store.Store) error {
		_, err := s.ListSigningRequests(ctx, filter)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SEARCH signing_requests USING INDEX signing_requests_wallet (wallet_id=? AND status=?)"}
	if len(plans) != 1 || !slices.Equal(plans[0], want) {
		t.Fatalf("plan %q, want %q: the pending requests are not read from the wallet's index in its order", plans, want)
	}
}
