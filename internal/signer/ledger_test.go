package signer

import (
	"context"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// A leg is signed as one transaction: the same one again, or its replacement at the same
// nonce, passes; another transaction of the leg is refused, also after a restart.
func TestTheLedgerSignsALegOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wallet.key.ledger")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	request := func(orderID, leg string, nonce uint64, feeCap int64) client.SigningRequest {
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1), Nonce: nonce, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(feeCap),
			Gas: 65_000, To: &usdc, Value: new(big.Int), Data: packed(t, contracts.Token, "transfer", supplier, big.NewInt(5))})
		r := evmRequest(t, tx, "")
		r.OrderID, r.Leg = orderID, leg
		return r
	}
	first := request("ord_1", "TRANSFER", 7, 50)
	if f := l.Check(first); f != nil {
		t.Fatalf("the first signature: %v", f)
	}
	if err := l.Record(first, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		req    client.SigningRequest
		reason string
	}{
		{"the same transaction again", first, ""},
		{"its replacement at the same nonce", request("ord_1", "TRANSFER", 7, 90), ""},
		{"another leg of the order", request("ord_1", "SWAP", 8, 50), ""},
		{"another order", request("ord_2", "TRANSFER", 8, 50), ""},
		{"the leg again at another nonce", request("ord_1", "TRANSFER", 8, 50), "already_signed"},
	} {
		if f := l.Check(tc.req); (tc.reason == "" && f != nil) || (tc.reason != "" && (f == nil || f.Reason != tc.reason)) {
			t.Errorf("%s: %v, want %q", tc.name, f, tc.reason)
		}
	}
	// A restarted signer remembers.
	again, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if f := again.Check(request("ord_1", "TRANSFER", 9, 50)); f == nil || f.Reason != "already_signed" {
		t.Fatalf("after a restart: %v", f)
	}
}

// A signer with a ledger signs a leg's transaction and refuses, through the API, a second
// transaction of the same leg that a service asks for.
func TestASignerWithALedgerRefusesASecondTransactionOfALeg(t *testing.T) {
	key, _ := keys.Generate(chain.Secp256k1)
	wallet := common.HexToAddress(key.Address())
	build := func(id string, nonce uint64) client.SigningRequest {
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1), Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(50e9),
			Gas: 65_000, To: &usdc, Value: new(big.Int), Data: packed(t, contracts.Token, "transfer", supplier, big.NewInt(5))})
		r := evmRequest(t, tx, "")
		r.ID, r.Leg, r.UnsignedTx = id, "TRANSFER", readable(t, tx, wallet)
		return r
	}
	once, twice := build("sig_once", 3), build("sig_twice", 4)
	srv, posted := fakeService(t, once, twice)
	ledger, err := OpenLedger(filepath.Join(t.TempDir(), "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(),
		Policy: testPolicy(t), Ledger: ledger})
	if err := pass(context.Background(), cfg, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := posted(); got["/api/v1/signing-requests/sig_once/signature"]["signature"] == "" ||
		got["/api/v1/signing-requests/sig_twice/refusal"]["reason"] != "already_signed" {
		t.Fatalf("posted %v", got)
	}
}

// A batch payment's parts are all TRANSFER legs, told apart by position: each part is
// signed once, and a part that pays what another part was signed to pay is refused, also
// after a restart; the statement's leg at the request's position is the one held to.
func TestTheLedgerSignsEachPartOfABatchOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wallet.key.ledger")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	batcher := common.HexToAddress("0x00000000000000000000000000000000000000c3")
	part := func(position int, nonce uint64, recipient common.Address) client.SigningRequest {
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1), Nonce: nonce, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(50),
			Gas: 200_000, To: &batcher, Value: new(big.Int), Data: packed(t, contracts.BatchTransfer, "batchTransferToken", usdc,
				[]common.Address{recipient}, []*big.Int{big.NewInt(5)})})
		r := evmRequest(t, tx, "")
		r.OrderID, r.Leg, r.Position = "ord_b", "TRANSFER", position
		return r
	}
	first := part(0, 7, supplier)
	if f := l.Check(first); f != nil {
		t.Fatal(f)
	}
	if err := l.Record(first, time.Now()); err != nil {
		t.Fatal(err)
	}
	second := part(1, 8, attacker)
	if f := l.Check(second); f != nil {
		t.Fatalf("the second part: %v", f)
	}
	if err := l.Record(second, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Without a restart too, each part keeps its own entry.
	if f := l.Check(first); f != nil {
		t.Fatalf("the first part again, after the second was signed: %v", f)
	}
	again, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		req    client.SigningRequest
		reason string
	}{
		{"the second part again", second, ""},
		{"a third part paying what the first was signed to pay", part(2, 9, supplier), "already_signed"},
		{"the second part as another transaction", part(1, 9, carol), "already_signed"},
		{"a third part of its own", part(2, 9, carol), ""},
	} {
		if f := again.Check(tc.req); (tc.reason == "" && f != nil) || (tc.reason != "" && (f == nil || f.Reason != tc.reason)) {
			t.Errorf("%s: %v, want %q", tc.name, f, tc.reason)
		}
	}

	st := `{"chain":"ethereum","walletId":"wal_mine","from":"0x00000000000000000000000000000000000000aa","intent":[` +
		`{"leg":"TRANSFER","to":"a","asset":"USDC","amount":"1"},{"leg":"TRANSFER","to":"b","asset":"USDC","amount":"2"}]}`
	r := second
	r.Intent = &st
	for position, want := range map[int]string{0: "a", 1: "b"} {
		r.Position = position
		if leg, f := intentLeg(r, nil, "wal_mine", "0x00000000000000000000000000000000000000aa"); f != nil || leg.To != want {
			t.Errorf("position %d: the statement's leg %+v (%v), want the one to %s", position, leg, f, want)
		}
	}
	r.Position = 2
	if _, f := intentLeg(r, nil, "wal_mine", "0x00000000000000000000000000000000000000aa"); f == nil || f.Reason != "intent_mismatch" {
		t.Errorf("a position the statement lacks: %v", f)
	}
}
