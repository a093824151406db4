package activities

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/devsvm/devsvmtest"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// solanaLifecycle is a lifecycle whose wallet is the seed's first auto-signed Solana
// wallet, funded with 10 SOL and 1,000 USDC on Solana's runtime (devsvm), a slot every 50 ms.
func solanaLifecycle(t *testing.T) (*lifecycle, *solana.Chain, *devsvm.Node) {
	t.Helper()
	l := newLifecycle(t, storetest.NewSQLite(t))
	ctx := context.Background()
	node, info := devsvmtest.Start(t, 50*time.Millisecond)
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
	return l, adapter, node
}

// A Solana payment signed only after its blockhash died is sent, never lands, lapses, is
// built again on a fresh blockhash and signed again, and confirms on the new transaction,
// through the real workflow, activities, store and Solana's runtime (devsvm); the payee is
// paid once.
func TestALapsedSolanaPaymentIsBuiltAgainAndConfirms(t *testing.T) {
	l, adapter, node := solanaLifecycle(t)
	ctx := context.Background()

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
	lapsed, _ := l.replaced(t, o.ID)
	if st, err := adapter.Status(ctx, "solana", lapsed); err != nil || st.State != chain.TxPending || st.Confirmations != 0 {
		t.Fatalf("the lapsed transaction never lands: %+v %v", st, err)
	}
	after, err := adapter.Balances(ctx, "solana", payee)
	if err != nil || !after["USDC"].Sub(before["USDC"]).Equal(decimal.RequireFromString("12.5")) {
		t.Fatalf("the payee went from %v to %v (%v): paid once", before, after, err)
	}
}
