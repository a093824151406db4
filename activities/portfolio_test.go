package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/testsuite"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/fakechain"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// flakyChain is the fake chain except for addresses it is told to fail on.
type flakyChain struct {
	chain.Adapter
	failing map[string]bool
}

func (f flakyChain) Balances(ctx context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	if f.failing[address] {
		return nil, errors.New("node timeout")
	}
	return f.Adapter.Balances(ctx, chainName, address)
}

func TestSyncWalletBalances(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	org := ids.New(ids.Organization)
	if err := s.CreateOrganization(ctx, &store.Organization{ID: org, Name: "Acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dev := fakechain.New()
	var refs []workflows.WalletRef
	for i, addr := range []string{"0xaaa", "0xbbb", "0xccc"} {
		w := &store.Wallet{ID: ids.New(ids.Wallet), OrgID: org, Chain: "ethereum", Address: addr, PublicKey: "k", CreatedAt: time.Now()}
		if err := s.CreateWallet(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := dev.Fund(ctx, "ethereum", addr, "ETH", decimal.NewFromInt(int64(i+1))); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, workflows.WalletRef{ID: w.ID, Chain: w.Chain, Address: w.Address})
	}
	synced := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	acts := &Portfolio{Store: s, Chain: flakyChain{Adapter: dev, failing: map[string]bool{"0xbbb": true}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return synced }}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)

	got, err := env.ExecuteActivity(acts.ListWalletRefs, workflows.ListWalletRefsInput{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	var page []workflows.WalletRef
	if err := got.Get(&page); err != nil || len(page) != 2 || page[0].ID != refs[0].ID {
		t.Fatalf("first page %+v %v", page, err)
	}

	got, err = env.ExecuteActivity(acts.SyncWalletBalances, workflows.SyncWalletBalancesInput{Wallets: refs})
	if err != nil {
		t.Fatalf("one failing wallet must not fail the batch: %v", err)
	}
	var res workflows.SyncWalletBalancesResult
	if err := got.Get(&res); err != nil || res.Synced != 2 || res.Failed != 1 {
		t.Fatalf("result %+v %v", res, err)
	}
	positions, err := s.ListPositions(ctx, org, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(positions) != 2 {
		t.Fatalf("want the two healthy wallets synced, got %+v", positions)
	}
	for _, p := range positions {
		if p.WalletID == refs[1].ID || !p.SyncedAt.Equal(synced) {
			t.Fatalf("unexpected position %+v", p)
		}
	}

	// Retrying the same batch writes the same state again: no doubled amounts.
	if _, err := env.ExecuteActivity(acts.SyncWalletBalances, workflows.SyncWalletBalancesInput{Wallets: refs[:1]}); err != nil {
		t.Fatal(err)
	}
	again, err := s.ListPositions(ctx, org, nil, 0)
	if err != nil || !again[0].Amount.Equal(decimal.NewFromInt(1)) {
		t.Fatalf("after retry %+v %v", again, err)
	}

	if _, err := env.ExecuteActivity(acts.SyncWalletBalances, workflows.SyncWalletBalancesInput{Wallets: refs[1:2]}); err == nil {
		t.Fatal("a batch in which every wallet failed must fail, so Temporal retries it")
	}
}

func TestMaintenanceDeletesOnlyExpiredEvents(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	org := ids.New(ids.Organization)
	if err := s.CreateOrganization(ctx, &store.Organization{ID: org, Name: "Acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w := &store.Wallet{ID: ids.New(ids.Wallet), OrgID: org, Chain: "ethereum", Address: "0xw", PublicKey: "k", CreatedAt: time.Now()}
	if err := s.CreateWallet(ctx, w); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	for i, age := range []time.Duration{31 * 24 * time.Hour, 29 * 24 * time.Hour} {
		at := now.Add(-age)
		o := &store.Order{ID: ids.New(ids.Order), OrgID: org, App: "pay", Domain: "payment", Status: "draft", WalletID: w.ID,
			Chain: "ethereum", Details: orders.Fields{Details: &orders.Payment{Asset: "USDC", Amount: decimal.RequireFromString("5")}}, PayloadHash: "h", CreatedBy: "k", CorrelationID: "c", WorkflowID: fmt.Sprint("wf", i),
			CreatedAt: at, UpdatedAt: at}
		if _, err := s.CreateOrder(ctx, o, nil, store.EventSpec{Name: "Order.Created"}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	m := &Maintenance{Store: s, Retention: Retention{Events: 30 * 24 * time.Hour, Batch: 1000}, Now: func() time.Time { return now }}
	n, err := m.DeleteExpiredEvents(ctx)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want the one event older than 30 days", n, err)
	}
	left, _ := s.ListEvents(ctx, store.EventFilter{OrgID: org, Apps: []string{"pay"}, Limit: 10})
	if len(left) != 1 {
		t.Fatalf("%d events left", len(left))
	}
}
