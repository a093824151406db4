package gethe2e

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
)

// batchPartSize is the suite's chain's configured part size (geth --dev's small blocks).
const batchPartSize = 60

// A USDC batch of 130 fresh recipients runs on geth in parts of the chain's configured
// size: three transactions through the batch contract, one after another, each mined with
// one Transfer from the wallet to each of its recipients; every recipient holds exactly its
// amount on the node, the wallet paid exactly the total, and the order lists each recipient
// with its part's transaction.
func TestABatchIsPaidInPartsOnGeth(t *testing.T) {
	s := env(t)
	ctx := context.Background()
	pay := s.writers["pay"]
	before, err := pay.GetPolicy(ctx, "pay")
	if err != nil {
		t.Fatal(err)
	}
	const n = 130
	recipients := make([]client.Recipient, n)
	rules := before.Rules
	for i := range recipients {
		addr := common.BigToAddress(big.NewInt(int64(0xba7c0000 + i))).Hex()
		recipients[i] = client.Recipient{Address: addr, Amount: decimal.New(int64(1000+i), -3).String(), Reference: fmt.Sprint("p-", i)}
		rules.DestinationWhitelist = append(rules.DestinationWhitelist, addr)
	}
	if _, err := pay.PutPolicy(ctx, "pay", rules); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pay.PutPolicy(context.Background(), "pay", before.Rules); err != nil {
			t.Error(err)
		}
	})
	wallet, usdc := common.HexToAddress(s.payer.Address), s.token(t, "USDC")
	walletBefore := s.balance(t, "USDC", wallet)
	id := s.place(t, client.DomainPayment, client.PaymentRequest{WalletID: s.payer.ID, Asset: "USDC", Recipients: recipients})
	done := s.waitEnded(t, client.DomainPayment, []string{id}, 5*time.Minute)
	if done[id].order.Status != "confirmed" {
		t.Fatalf("the batch ended %s: %+v", done[id].order.Status, done[id].order.Failure)
	}
	o := s.order(t, id)
	if len(o.Legs) != 3 {
		t.Fatalf("%d legs: 130 recipients in parts of %d are three", len(o.Legs), batchPartSize)
	}
	total := new(big.Int)
	for pos, leg := range o.Legs {
		if leg.TxHash == nil {
			t.Fatalf("part %d has no transaction", pos+1)
		}
		m := s.lookup(t, *leg.TxHash)
		if m.receipt.Status != 1 || m.tx.To() == nil || *m.tx.To() != *s.chain.BatchTransfer {
			t.Fatalf("part %d: status %d, to %v; want mined through the batch contract %s", pos+1, m.receipt.Status, m.tx.To(), s.chain.BatchTransfer)
		}
		first, last := pos*batchPartSize, min((pos+1)*batchPartSize, n)
		transfers := transfersIn(m.receipt)
		if len(transfers) != last-first {
			t.Fatalf("part %d logs %d Transfers, want %d", pos+1, len(transfers), last-first)
		}
		for k, tr := range transfers {
			r := recipients[first+k]
			want := s.units(t, "USDC", r.Amount)
			if tr.token != usdc.Address || tr.from != wallet || tr.to != common.HexToAddress(r.Address) || tr.amount.Cmp(want) != 0 {
				t.Fatalf("part %d's Transfer %d: %+v, want %s to %s", pos+1, k, tr, want, r.Address)
			}
			if got := o.Recipients[first+k]; got.Part != pos+1 || got.Status != "confirmed" || got.TxHash == nil || *got.TxHash != *leg.TxHash {
				t.Fatalf("recipient %d on the order: %+v", first+k, got)
			}
			total.Add(total, want)
		}
	}
	for i, r := range recipients {
		if got, want := s.balance(t, "USDC", common.HexToAddress(r.Address)), s.units(t, "USDC", r.Amount); got.Cmp(want) != 0 {
			t.Fatalf("recipient %d holds %s on geth, want %s", i, got, want)
		}
	}
	if spent := new(big.Int).Sub(walletBefore, s.balance(t, "USDC", wallet)); spent.Cmp(total) != 0 {
		t.Fatalf("the wallet spent %s, want the total %s", spent, total)
	}
}
