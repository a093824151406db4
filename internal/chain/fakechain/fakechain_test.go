package fakechain

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestFakechainTransfersConfirmOnceAfterTheirBlocks(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)}
	d := New()
	d.BlockTime, d.Confirmations, d.Now = 200*time.Millisecond, 2, clk.now
	if err := d.Fund(ctx, "ethereum", "0xaaa", "USDC", decimal.NewFromInt(1000)); err != nil {
		t.Fatal(err)
	}
	tx := chain.SignedTx{Chain: "ethereum", Kind: "TRANSFER", From: "0xaaa", To: "0xbbb", Asset: "USDC",
		Amount: decimal.RequireFromString("400.5"), Digest: "d1", Signature: []byte("sig")}
	if _, found, err := d.Known(ctx, tx); err != nil || found {
		t.Fatalf("known before its broadcast: %v %v", found, err)
	}
	h1, err := d.Broadcast(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if h, found, err := d.Known(ctx, tx); err != nil || !found || h != h1 {
		t.Fatalf("known after its broadcast: %s %v %v", h, found, err)
	}
	h2, err := d.Broadcast(ctx, tx)
	if err != nil || h1 != h2 {
		t.Fatalf("rebroadcast: %s %s %v", h1, h2, err)
	}
	if got := d.Transaction("d1"); got == nil || got.Hash != h1 || got.Submissions != 2 || d.Transaction("d2") != nil {
		t.Fatalf("a rebroadcast is one transaction submitted twice: %+v", got)
	}
	st, err := d.Status(ctx, "ethereum", h1)
	if err != nil || st.State != chain.TxPending || !st.Expected.Equal(clk.t.Add(400*time.Millisecond)) {
		t.Fatalf("before its blocks (final expected after 2 blocks of 200ms): %+v %v", st, err)
	}
	clk.t = clk.t.Add(400 * time.Millisecond)
	for range 3 { // asking again never applies the transfer twice
		st, err = d.Status(ctx, "ethereum", h1)
		if err != nil || st.State != chain.TxConfirmed || st.Confirmations < 2 {
			t.Fatalf("after its blocks: %+v %v", st, err)
		}
	}
	from, _ := d.Balances(ctx, "ethereum", "0xaaa")
	to, _ := d.Balances(ctx, "ethereum", "0xbbb")
	if !from["USDC"].Equal(decimal.RequireFromString("599.5")) || !to["USDC"].Equal(decimal.RequireFromString("400.5")) {
		t.Fatalf("balances after transfer: from %s to %s", from["USDC"], to["USDC"])
	}
}

func TestFakechainFailures(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)}
	d := New()
	d.BlockTime, d.Now = time.Second, clk.now
	if err := d.Fund(ctx, "ethereum", "0xaaa", "ETH", decimal.NewFromInt(1)); err != nil {
		t.Fatal(err)
	}
	dead, _ := d.Broadcast(ctx, chain.SignedTx{Chain: "ethereum", Kind: "TRANSFER", From: "0xaaa", To: "0x000000000000000000000000000000000000DEAD",
		Asset: "ETH", Amount: decimal.NewFromInt(1), Digest: "dead", Signature: []byte("s")})
	broke, _ := d.Broadcast(ctx, chain.SignedTx{Chain: "ethereum", Kind: "TRANSFER", From: "0xaaa", To: "0xbbb",
		Asset: "ETH", Amount: decimal.NewFromInt(2), Digest: "broke", Signature: []byte("s")})
	clk.t = clk.t.Add(time.Second)
	for hash, want := range map[string]string{dead: "reverted", broke: "insufficient funds"} {
		st, err := d.Status(ctx, "ethereum", hash)
		if err != nil || st.State != chain.TxFailed || len(st.Reason) < len(want) || st.Reason[:len(want)] != want {
			t.Fatalf("%s: %+v %v", want, st, err)
		}
	}
	left, _ := d.Balances(ctx, "ethereum", "0xaaa")
	if !left["ETH"].Equal(decimal.NewFromInt(1)) {
		t.Fatalf("failed transactions moved funds: %s", left["ETH"])
	}
	if _, err := d.Broadcast(ctx, chain.SignedTx{Chain: "ethereum", Digest: "x"}); err == nil {
		t.Fatal("an unsigned transaction must be refused")
	}
	if _, err := d.Broadcast(ctx, chain.SignedTx{Chain: "bitcoin", Digest: "x", Signature: []byte("s")}); err == nil {
		t.Fatal("an unknown chain must be refused")
	}
}

func TestFakechainDescribesALegInBaseUnits(t *testing.T) {
	d := &Chain{}
	payment, err := d.Describe(chain.Leg{Chain: "ethereum", Kind: "TRANSFER", From: "0xaaa", To: "0xbbb", Asset: "USDC",
		Amount: decimal.RequireFromString("400.5")})
	if err != nil || !reflect.DeepEqual(payment, chain.Intent{Leg: "TRANSFER", To: "0xbbb", Asset: "USDC", Amount: "400500000"}) {
		t.Fatalf("payment %+v %v", payment, err)
	}
	swap, err := d.Describe(chain.Leg{Chain: "ethereum", Kind: "SWAP", From: "0xaaa", Asset: "ETH", Amount: decimal.RequireFromString("1.25")})
	if err != nil || swap.To != "0xaaa" || swap.Amount != "1250000000000000000" {
		t.Fatalf("swap %+v %v", swap, err)
	}
	if _, err := d.Describe(chain.Leg{Chain: "ethereum", Kind: "TRANSFER", Asset: "DAI", Amount: decimal.NewFromInt(1)}); err == nil {
		t.Fatal("an asset with no known decimals was described")
	}
}
