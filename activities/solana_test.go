package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A Solana payment signed only after its blockhash died is sent, never lands, lapses, is
// built again on a fresh blockhash and signed again, and confirms on the new transaction,
// through the real workflow, activities, store and Solana's runtime (devsvm); the payee is
// paid once.
func TestALapsedSolanaPaymentIsBuiltAgainAndConfirms(t *testing.T) {
	l := newLifecycle(t, storetest.NewSQLite(t))
	ctx := context.Background()
	node, err := devsvm.Start(ctx, devsvm.Options{Dir: t.TempDir(), SlotTime: 50 * time.Millisecond})
	if errors.Is(err, devsvm.ErrNoNode) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Stop() })
	info, err := node.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := solana.Dial(ctx, solana.Config{Name: "solana", RPCURL: node.URL(), Commitment: "confirmed",
		Tokens: []solana.Token{{Symbol: "USDC", Mint: info.USDCMint, Decimals: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range l.creds.Wallets {
		if w.Chain == "solana" && w.AutoSign {
			if l.wallet, err = l.store.Wallet(ctx, l.creds.OrgID, w.ID); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if l.wallet.Chain != "solana" || l.keys[l.wallet.ID] == nil {
		t.Fatalf("no Solana wallet the signer holds: %+v", l.wallet)
	}
	if err := node.Airdrop(ctx, l.wallet.Address, 10*1_000_000_000); err != nil {
		t.Fatal(err)
	}
	if err := node.MintUSDC(ctx, l.wallet.Address, 1000*1_000_000); err != nil {
		t.Fatal(err)
	}
	l.acts.Chain, l.acts.ChainPoll = adapter, 10*time.Millisecond

	// The first signature comes two minutes in, after 200 slots went by (in a moment: the
	// chain is told to), so its blockhash died; the second a minute later, at once in slots.
	l.signings = 2
	l.signAt = func(i int) time.Duration { return time.Duration(i+2) * time.Minute }
	l.meanwhile = map[time.Duration]func(){time.Minute: func() {
		if err := node.AdvanceSlots(ctx, 200); err != nil {
			t.Error(err)
		}
	}}
	payee := seed.SolanaPayees[0]
	before, err := adapter.Balances(ctx, "solana", payee)
	if err != nil {
		t.Fatal(err)
	}
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"12.5","destination":{"address":"`+payee+`"}}`)
	st := l.run(t, o, legs)
	if st.Status != "confirmed" || len(st.Requests) != 2 {
		t.Fatalf("state %+v: want confirmed after the transaction was built again", st)
	}
	names, data := l.events(t, o.ID)
	want := "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast " +
		"Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	lapsed, rebuilt := data[4]["txHash"].(string), data[7]["txHash"].(string)
	if lapsed == rebuilt || data[5]["replacesTxHash"] != lapsed || data[7]["replacesTxHash"] != lapsed || data[8]["txHash"] != rebuilt {
		t.Fatalf("the new transaction's events name the lapsed one, and the order confirms on the new one: %v", data)
	}
	if st, err := adapter.Status(ctx, "solana", lapsed); err != nil || st.State != chain.TxPending || st.Confirmations != 0 {
		t.Fatalf("the lapsed transaction never lands: %+v %v", st, err)
	}
	after, err := adapter.Balances(ctx, "solana", payee)
	if err != nil || !after["USDC"].Sub(before["USDC"]).Equal(decimal.RequireFromString("12.5")) {
		t.Fatalf("the payee went from %v to %v (%v): paid once", before, after, err)
	}
}
