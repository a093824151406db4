package activities

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	sol "github.com/gagliardetto/solana-go"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/orders"
)

// A USDC batch of 20 fresh Solana recipients runs through the real workflow, activities and
// store on Solana's runtime in parts of orders.SolanaBatchPartSize: three transactions, each
// creating its recipients' token accounts and paying each its amount; every recipient holds
// exactly its amount. Each part's message does what its intent says, recipient by
// recipient, and a message paying one recipient otherwise is caught. A SOL batch pays
// lamports the same way.
func TestASolanaBatchIsPaidInPartsThatFitATransaction(t *testing.T) {
	l, adapter, _ := solanaLifecycle(t)
	ctx := context.Background()
	const n = 20
	var (
		entries []string
		to      []string
		amounts []decimal.Decimal
	)
	for i := range n {
		key, err := sol.NewRandomPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		amount := decimal.New(int64(100+i), -2)
		entries = append(entries, fmt.Sprintf(`{"address":%q,"amount":"%s"}`, key.PublicKey().String(), amount))
		to, amounts = append(to, key.PublicKey().String()), append(amounts, amount)
	}
	l.publish(t, `{"maxOrderUsd":"1000000"}`)
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","recipients":[`+strings.Join(entries, ",")+`]}`)
	if want := (n + orders.SolanaBatchPartSize - 1) / orders.SolanaBatchPartSize; len(legs) != want {
		t.Fatalf("legs %v, want %d parts", legs, want)
	}
	st := l.run(t, o, legs)
	if st.Status != "confirmed" || len(st.Requests) != len(legs) {
		t.Fatalf("state %+v", st)
	}
	for i, a := range to {
		b, err := adapter.Balances(ctx, "solana", a)
		if err != nil || !b["USDC"].Equal(amounts[i]) {
			t.Fatalf("recipient %d holds %v (%v), want %s USDC", i, b, err, amounts[i])
		}
	}
	_, stored, err := l.store.Order(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	req, err := l.store.SigningRequest(ctx, l.creds.OrgID, st.Requests[1])
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := hex.DecodeString(req.RawUnsignedTx)
	m, err := solana.DecodeMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	leg, err := legOf(o, stored, 1, l.wallet.Address)
	if err != nil {
		t.Fatal(err)
	}
	intent, err := adapter.Describe(leg)
	if err != nil {
		t.Fatal(err)
	}
	if len(intent.Recipients) != orders.SolanaBatchPartSize || intent.Recipients[0].To != to[orders.SolanaBatchPartSize] {
		t.Fatalf("part 2's intent %+v", intent)
	}
	if err := solana.CheckIntent(m, intent); err != nil {
		t.Fatalf("part 2's message against its intent: %v", err)
	}
	tampered := intent
	tampered.Recipients = append([]chain.IntentPayee(nil), intent.Recipients...)
	// Recipients 3 and 4 swap amounts: the total stays, each is paid otherwise.
	tampered.Recipients[3].Amount, tampered.Recipients[4].Amount = intent.Recipients[4].Amount, intent.Recipients[3].Amount
	if err := solana.CheckIntent(m, tampered); err == nil || !strings.Contains(err.Error(), "move 3") {
		t.Fatalf("an intent paying recipient 3 otherwise: %v", err)
	}
	tampered.Recipients = intent.Recipients[:len(intent.Recipients)-1]
	if err := solana.CheckIntent(m, tampered); err == nil {
		t.Fatal("a message paying one recipient more than its intent passed")
	}
	tampered.Recipients, tampered.Amount = intent.Recipients, "1"
	if err := solana.CheckIntent(m, tampered); err == nil || !strings.Contains(err.Error(), "come to") {
		t.Fatalf("an intent understating its total: %v", err)
	}

	sols := fmt.Sprintf(`{"walletId":%q,"asset":"SOL","recipients":[{"address":%q,"amount":"0.25"},{"address":%q,"amount":"0.5"}]}`, l.wallet.ID, to[0], to[1])
	o, legs = l.draft(t, "payment", sols)
	if st := l.run(t, o, legs); st.Status != "confirmed" {
		t.Fatalf("the SOL batch: %+v", st)
	}
	for i, want := range []string{"0.25", "0.5"} {
		b, err := adapter.Balances(ctx, "solana", to[i])
		if err != nil || !b["SOL"].Equal(decimal.RequireFromString(want)) {
			t.Fatalf("recipient %d holds %v (%v), want %s SOL", i, b, err, want)
		}
	}
}
