package activities

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
)

// batch is a batch payment body of asset paying n fresh addresses, recipient i
// (i+1)/100 of the asset, and the recipients' addresses and amounts.
func (l *lifecycle) batch(asset string, n int, first string) (string, []string, []decimal.Decimal) {
	var (
		entries []string
		to      []string
		amounts []decimal.Decimal
	)
	for i := range n {
		addr := fmt.Sprintf("0x%040x", 0xba7c4000+i)
		if i == 0 && first != "" {
			addr = first
		}
		amount := decimal.New(int64(i+1), -2)
		entries = append(entries, fmt.Sprintf(`{"address":"%s","amount":"%s","reference":"payslip-%d"}`, addr, amount, i))
		to, amounts = append(to, addr), append(amounts, amount)
	}
	return `{"walletId":"` + l.wallet.ID + `","asset":"` + asset + `","recipients":[` + strings.Join(entries, ",") + `]}`, to, amounts
}

// paid reads what each address holds of asset on the chain.
func paid(t *testing.T, adapter *evm.Chain, asset string, to []string) []decimal.Decimal {
	t.Helper()
	out := make([]decimal.Decimal, len(to))
	for i, a := range to {
		b, err := adapter.Balances(context.Background(), "ethereum", a)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b[asset]
	}
	return out
}

// TestABatchPartPaysEveryRecipientInOneTransaction: a 100-recipient USDC batch (one full
// part, orders.BatchPartSize) runs
// through the real workflow, activities and store on an in-process go-ethereum chain as one
// order, one signature and one transaction through the batch contract; every recipient's
// balance moves by exactly its amount and the wallet's by the total. The signing request's
// transaction does what the leg's intent says, recipient by recipient, and a changed amount
// is caught.
func TestABatchPartPaysEveryRecipientInOneTransaction(t *testing.T) {
	l, adapter, _ := evmLifecycle(t)
	ctx := context.Background()
	l.publish(t, `{"maxOrderUsd":"1000000"}`)
	body, to, amounts := l.batch("USDC", 100, "")
	before, err := adapter.Balances(ctx, "ethereum", l.wallet.Address)
	if err != nil {
		t.Fatal(err)
	}
	o, legs := l.draft(t, "payment", body)
	if len(legs) != 1 {
		t.Fatalf("legs %v: 100 recipients are one part", legs)
	}
	st := l.run(t, o, legs)
	if st.Status != "confirmed" || len(st.Requests) != 1 {
		t.Fatalf("state %+v: want confirmed on one signature", st)
	}
	got := paid(t, adapter, "USDC", to)
	total := decimal.Zero
	for i := range to {
		if !got[i].Equal(amounts[i]) {
			t.Fatalf("recipient %d (%s) holds %s USDC, want %s", i, to[i], got[i], amounts[i])
		}
		total = total.Add(amounts[i])
	}
	after, err := adapter.Balances(ctx, "ethereum", l.wallet.Address)
	if err != nil {
		t.Fatal(err)
	}
	if spent := before["USDC"].Sub(after["USDC"]); !spent.Equal(total) || total.String() != "50.5" {
		t.Fatalf("the wallet spent %s USDC, want the total %s", spent, total)
	}
	_, stored, err := l.store.Order(ctx, o.ID)
	if err != nil || len(stored) != 1 || stored[0].TxHash == nil || len(stored[0].Hashes()) != 1 {
		t.Fatalf("legs %+v %v: one transaction", stored, err)
	}
	names, data := l.events(t, o.ID)
	if strings.Join(names, " ") != "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed" {
		t.Fatalf("events %v", names)
	}
	for _, d := range data[2:] {
		if d["leg"] != "TRANSFER" || d["part"] != float64(1) {
			t.Fatalf("a batch's leg event without its leg and part: %v", d)
		}
	}

	req, err := l.store.SigningRequest(ctx, l.creds.OrgID, st.Requests[0])
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := hex.DecodeString(req.RawUnsignedTx)
	tx, _, err := evm.DecodeUnsigned(raw)
	if err != nil {
		t.Fatal(err)
	}
	leg, err := legOf(o, stored, 0, l.wallet.Address)
	if err != nil {
		t.Fatal(err)
	}
	intent, err := adapter.Describe(leg)
	if err != nil {
		t.Fatal(err)
	}
	if len(intent.Recipients) != 100 || intent.Amount != "50500000" || intent.Recipients[99].Amount != "1000000" || intent.Token == "" {
		t.Fatalf("intent %+v", intent)
	}
	if err := evm.CheckIntent(tx, intent); err != nil {
		t.Fatalf("the batch's transaction against its own intent: %v", err)
	}
	tampered := intent
	tampered.Recipients = append([]chain.IntentPayee(nil), intent.Recipients...)
	tampered.Recipients[17].Amount = "180001"
	if err := evm.CheckIntent(tx, tampered); err == nil || !strings.Contains(err.Error(), "recipient 17") {
		t.Fatalf("an intent paying recipient 17 otherwise: %v", err)
	}
	var readable struct {
		Call struct {
			Method string            `json:"method"`
			Args   map[string]string `json:"args"`
		} `json:"call"`
	}
	if err := json.Unmarshal([]byte(req.UnsignedTx), &readable); err != nil || readable.Call.Method != "batchTransferToken" ||
		readable.Call.Args["recipients"] != "100" || readable.Call.Args["total"] != "50.5 USDC" {
		t.Fatalf("the readable transaction %s (%v)", req.UnsignedTx, err)
	}
}

// TestABatchLargerThanAPartIsPaidInParts: 200 recipients are two parts, each its own
// TRANSFER leg, signature and transaction, run one after the other; every recipient is
// paid exactly once.
func TestABatchLargerThanAPartIsPaidInParts(t *testing.T) {
	l, adapter, _ := evmLifecycle(t)
	l.publish(t, `{"maxOrderUsd":"1000000"}`)
	body, to, amounts := l.batch("USDC", 200, "")
	o, legs := l.draft(t, "payment", body)
	if strings.Join(legs, ",") != "TRANSFER,TRANSFER" {
		t.Fatalf("legs %v", legs)
	}
	st := l.run(t, o, legs)
	if st.Status != "confirmed" || len(st.Requests) != 2 {
		t.Fatalf("state %+v", st)
	}
	got := paid(t, adapter, "USDC", to)
	for i := range to {
		if !got[i].Equal(amounts[i]) {
			t.Fatalf("recipient %d holds %s USDC, want %s", i, got[i], amounts[i])
		}
	}
	_, stored, err := l.store.Order(context.Background(), o.ID)
	if err != nil || len(stored) != 2 || stored[0].TxHash == nil || stored[1].TxHash == nil || *stored[0].TxHash == *stored[1].TxHash {
		t.Fatalf("legs %+v %v: two transactions", stored, err)
	}
	_, data := l.events(t, o.ID)
	parts := ""
	for _, d := range data {
		if d["event"] == "Order.Broadcast" {
			parts += fmt.Sprint(d["part"])
		}
	}
	if parts != "12" {
		t.Fatalf("the broadcasts' parts are %q, want 1 then 2", parts)
	}
}

// TestANativeBatchPaysEachRecipientAndABadRecipientRevertsIt: an ETH batch is sent the
// total and forwards each amount; a batch one of whose recipients refuses payment reverts
// whole, failing the order tx_reverted with no recipient paid.
func TestANativeBatchPaysEachRecipientAndABadRecipientRevertsIt(t *testing.T) {
	l, adapter, _ := evmLifecycle(t)
	l.publish(t, `{"maxOrderUsd":"100000000"}`)
	body, to, amounts := l.batch("ETH", 3, "")
	o, legs := l.draft(t, "payment", body)
	if st := l.run(t, o, legs); st.Status != "confirmed" {
		t.Fatalf("state %+v", st)
	}
	got := paid(t, adapter, "ETH", to)
	for i := range to {
		if !got[i].Equal(amounts[i]) {
			t.Fatalf("recipient %d holds %s ETH, want %s", i, got[i], amounts[i])
		}
	}

	body, to, _ = l.batch("USDC", 3, devevm.Dead.Hex())
	o, legs = l.draft(t, "payment", body)
	st := l.run(t, o, legs)
	if st.Status != "failed" {
		t.Fatalf("state %+v: want failed", st)
	}
	stored, _, err := l.store.Order(context.Background(), o.ID)
	if err != nil || stored.FailureCode == nil || *stored.FailureCode != "tx_reverted" {
		t.Fatalf("order %+v %v: want failed tx_reverted", stored, err)
	}
	for i, b := range paid(t, adapter, "USDC", to[1:]) {
		if !b.IsZero() {
			t.Fatalf("recipient %d of a reverted batch holds %s USDC", i+1, b)
		}
	}
}
