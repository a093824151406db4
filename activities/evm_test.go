package activities

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// marketNode is the simulated chain seen through a node that, while cheap is set,
// understates its fee market: a transaction prepared then pays less than the base fee;
// and that loses the next lose transactions sent to it: it accepts them and keeps none,
// as a node drops what its pool will not hold.
type marketNode struct {
	simulated.Client
	cheap *atomic.Bool
	lose  *atomic.Int32
}

func (m marketNode) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if m.lose.Add(-1) >= 0 {
		return nil
	}
	return m.Client.SendTransaction(ctx, tx)
}

func (m marketNode) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	if m.cheap.Load() {
		return big.NewInt(1), nil
	}
	return m.Client.SuggestGasTipCap(ctx)
}

func (m marketNode) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	h, err := m.Client.HeaderByNumber(ctx, number)
	if err == nil && number == nil && m.cheap.Load() {
		cheap := *h
		cheap.BaseFee = big.NewInt(1)
		return &cheap, nil
	}
	return h, err
}

// SimulateV1 passes eth_simulateV1 through to the chain, whose client has it.
func (m marketNode) SimulateV1(ctx context.Context, opts ethclient.SimulateOptions, block *rpc.BlockNumberOrHash) ([]ethclient.SimulateBlockResult, error) {
	return m.Client.(evm.Simulator).SimulateV1(ctx, opts, block)
}

// evmLifecycle is a lifecycle whose ethereum is an in-process go-ethereum chain, seen
// through a node whose fee answers the test may make cheap; blocks come every 20 ms.
func evmLifecycle(t *testing.T) (*lifecycle, *evm.Chain, *atomic.Bool) {
	t.Helper()
	l, adapter, node := evmLifecycleOn(t)
	return l, adapter, node.cheap
}

// evmLifecycleOn is evmLifecycle, with the node's faults at hand.
func evmLifecycleOn(t *testing.T) (*lifecycle, *evm.Chain, marketNode) {
	t.Helper()
	s := storetest.NewSQLite(t)
	l := newLifecycle(t, s)
	ctx := context.Background()
	if l.wallet.Chain != "ethereum" || l.wallet.Scheme != chain.Secp256k1 {
		t.Fatalf("wallet %+v", l.wallet)
	}
	deployer, _ := crypto.GenerateKey()
	backend := simulated.NewBackend(types.GenesisAlloc{
		crypto.PubkeyToAddress(deployer.PublicKey): {Balance: new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1e9))},
		devevm.Dead: {Code: contracts.RevertRuntime(), Balance: new(big.Int)},
	})
	t.Cleanup(func() { _ = backend.Close() })
	d := &devevm.Deployer{Client: backend.Client(), Key: deployer, Mine: func() { backend.Commit() }}
	cfg, err := d.Deploy(ctx, devevm.Plan{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH",
		Tokens:    []devevm.TokenPlan{{Symbol: "USDC", Decimals: 6}},
		PricesUSD: map[string]decimal.Decimal{"ETH": decimal.NewFromInt(3000), "USDC": decimal.NewFromInt(1)},
		Funds: map[common.Address]map[string]decimal.Decimal{
			common.HexToAddress(l.wallet.Address): {"ETH": decimal.NewFromInt(10), "USDC": decimal.NewFromInt(1000)}},
		Spenders: []*ecdsa.PrivateKey{l.keys[l.wallet.ID].ECDSA()}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Confirmations = 1
	node := marketNode{backend.Client(), &atomic.Bool{}, &atomic.Int32{}}
	adapter, err := evm.New(ctx, cfg, node)
	if err != nil {
		t.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	// The block loop ends before the chain closes (cleanups run last first): a block
	// sealed while the chain closes races with it.
	t.Cleanup(func() {
		close(stop)
		<-stopped
	})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				backend.Commit()
			}
		}
	}()
	l.acts.Chain, l.acts.ReplaceAfter, l.acts.ChainPoll = adapter, time.Millisecond, 10*time.Millisecond
	return l, adapter, node
}

// A transaction the node accepted and then lost is sent to it again as it was signed, and
// the payment confirms on it: no replacement, no second signature, even with
// ReplaceAfter (a millisecond here) long past when the leg is first checked.
func TestATransactionTheNodeDroppedIsSentAgainAsSigned(t *testing.T) {
	l, adapter, node := evmLifecycleOn(t)
	node.lose.Store(1)
	const to = "0x1111111111111111111111111111111111111111"
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"3","destination":{"address":"`+to+`"}}`)
	st := l.run(t, o, legs)
	if st.Status != "confirmed" || len(st.Requests) != 1 {
		t.Fatalf("state %+v: want confirmed on its one signed transaction", st)
	}
	if left := node.lose.Load(); left >= 0 {
		t.Fatalf("the node lost no transaction (%d left to lose): the test proves nothing", left+1)
	}
	_, stored, err := l.store.Order(context.Background(), o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if hashes := stored[0].Hashes(); len(hashes) != 1 || *stored[0].TxHash != hashes[0] {
		t.Fatalf("the leg has one transaction: %v", hashes)
	}
	balances, err := adapter.Balances(context.Background(), "ethereum", to)
	if err != nil || !balances["USDC"].Equal(decimal.RequireFromString("3")) {
		t.Fatalf("the destination holds %v (%v): paid once", balances, err)
	}
}

// A payment whose transaction was priced below the base fee is replaced, signed again,
// and confirms on its replacement, through the real workflow, activities, store and an
// in-process go-ethereum chain; the leg records both transactions and the nonce is shared.
func TestAStuckPaymentIsReplacedAndConfirmsOnItsReplacement(t *testing.T) {
	l, adapter, cheap := evmLifecycle(t)
	s, ctx := l.store, context.Background()
	cheap.Store(true)
	stop := make(chan struct{})
	defer close(stop)
	// The signer signs the first request a minute into the workflow, the replacement a
	// minute later. The workflow's clock starts a minute early, so that when the first
	// transaction is sent workflow time and the activities' wall clock agree (the activity
	// measures how long the transaction has been stuck from the workflow's send time). The
	// node prices honestly again from the first signature on.
	l.signings = 2
	l.signAt = func(i int) time.Duration { return time.Duration(i+1) * time.Minute }
	l.startAt = time.Now().Add(-time.Minute)
	const to = "0x1111111111111111111111111111111111111111"
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"12.5","destination":{"address":"`+to+`"}}`)
	go func() {
		for !stopped(stop) {
			if sr, err := s.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: []string{l.wallet.ID}, Limit: 10}); err == nil && len(sr) > 0 && sr[0].Status == "signed" {
				cheap.Store(false)
				return
			}
			// Not wait.For: this polls beside l.run, in a goroutine that must not fail
			// the test, and ends when the test stops it.
			time.Sleep(5 * time.Millisecond)
		}
	}()
	st := l.run(t, o, legs)
	if st.Status != "confirmed" || len(st.Requests) != 2 {
		t.Fatalf("state %+v: want confirmed after a replacement", st)
	}
	stuck, replacement := l.replaced(t, o.ID)
	_, stored, err := s.Order(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if hashes := stored[0].Hashes(); len(hashes) != 2 || hashes[0] != stuck || hashes[1] != replacement || *stored[0].TxHash != replacement {
		t.Fatalf("the leg records both transactions, the confirmed one as its own: %v %v", hashes, *stored[0].TxHash)
	}
	reqs, err := s.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: []string{l.wallet.ID}, Limit: 10})
	if err != nil || len(reqs) != 2 {
		t.Fatalf("signing requests %+v %v", reqs, err)
	}
	var first, second struct {
		Nonce        uint64 `json:"nonce"`
		MaxFeePerGas string `json:"maxFeePerGas"`
	}
	_ = json.Unmarshal([]byte(reqs[0].UnsignedTx), &first)
	_ = json.Unmarshal([]byte(reqs[1].UnsignedTx), &second)
	if first.Nonce != second.Nonce || *reqs[1].Nonce != first.Nonce || reqs[1].ReplacesTxHash == nil || *reqs[1].ReplacesTxHash != stuck {
		t.Fatalf("the replacement reuses the nonce and names what it replaces: %+v %+v", reqs[0], reqs[1])
	}
	if st, err := adapter.Status(ctx, "ethereum", stuck); err != nil || st.State != chain.TxPending {
		t.Fatalf("the replaced transaction is never mined: %+v %v", st, err)
	}
	balances, err := adapter.Balances(ctx, "ethereum", to)
	if err != nil || !balances["USDC"].Equal(decimal.RequireFromString("12.5")) {
		t.Fatalf("the destination holds %v (%v): paid once", balances, err)
	}
}

// A refused signing request ends refused, the order failed signer_refused with the reason
// in Order.Failed, and the request's nonce is given back for the wallet's next order.
func TestARefusedSigningRequestFailsTheOrderAndGivesItsNonceBack(t *testing.T) {
	l, _, _ := evmLifecycle(t)
	ctx := context.Background()
	l.refuse = "destination_not_allowed"
	const to = "0x1111111111111111111111111111111111111111"
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"1","destination":{"address":"`+to+`"}}`)
	if st := l.run(t, o, legs); st.Status != "failed" {
		t.Fatalf("state %+v: want failed (signer_refused)", st)
	}
	stored, _, err := l.store.Order(ctx, o.ID)
	if err != nil || stored.FailureCode == nil || *stored.FailureCode != "signer_refused" || !strings.Contains(*stored.FailureMessage, "destination_not_allowed") {
		t.Fatalf("order %+v %v", stored, err)
	}
	names, data := l.events(t, o.ID)
	last := data[len(data)-1]
	failure, _ := last["failure"].(map[string]any)
	if names[len(names)-1] != "Order.Failed" || failure["code"] != "signer_refused" || failure["reason"] != "destination_not_allowed" {
		t.Fatalf("last event %s %v", names[len(names)-1], last)
	}
	reqs, err := l.store.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: []string{l.wallet.ID}, Limit: 10})
	if err != nil || len(reqs) != 1 || reqs[0].Nonce == nil || reqs[0].Status != "refused" || reqs[0].RawUnsignedTx == "" {
		t.Fatalf("signing requests %+v %v", reqs, err)
	}
	if next := l.nextNonce(t); next != *reqs[0].Nonce {
		t.Fatalf("the next nonce is %d, want the refused request's %d back", next, *reqs[0].Nonce)
	}
}

// nextNonce takes the nonce the wallet's next transaction would get.
func (l *lifecycle) nextNonce(t *testing.T) uint64 {
	t.Helper()
	var next uint64
	err := l.store.Tx(context.Background(), func(tx *store.Store) error {
		var err error
		next, err = tx.TakeNonce(context.Background(), "ethereum", l.wallet.Address, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func stopped(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A signing request that expires unsigned gives its nonce back: the wallet's next order
// takes it, and no gap is left.
func TestAnExpiredSigningRequestGivesItsNonceBack(t *testing.T) {
	l, _, _ := evmLifecycle(t)
	ctx := context.Background()
	l.signings = -1 // nobody signs
	const to = "0x1111111111111111111111111111111111111111"
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"1","destination":{"address":"`+to+`"}}`)
	st := l.run(t, o, legs)
	if st.Status != "failed" {
		t.Fatalf("state %+v: want failed (signing_expired)", st)
	}
	reqs, err := l.store.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: []string{l.wallet.ID}, Limit: 10})
	if err != nil || len(reqs) != 1 || reqs[0].Nonce == nil || reqs[0].Status != "expired" {
		t.Fatalf("signing requests %+v %v", reqs, err)
	}
	if next := l.nextNonce(t); next != *reqs[0].Nonce {
		t.Fatalf("the next nonce is %d, want the expired request's %d back", next, *reqs[0].Nonce)
	}
}

// A payment of more than the wallet holds, or of an asset the chain's configuration lacks,
// fails at once with a code of its own, before its signing request: no nonce is taken, so
// the wallet's next transaction goes out at the nonce the chain expects.
func TestALegTheChainRefusesFailsTheOrderWithoutANonce(t *testing.T) {
	l, _, _ := evmLifecycle(t)
	ctx := context.Background()
	const to = "0x1111111111111111111111111111111111111111"
	for _, tc := range []struct {
		body, code string
		approvers  []string
	}{
		{`{"walletId":"` + l.wallet.ID + `","asset":"USDC","amount":"1000.000001","destination":{"address":"` + to + `"}}`, "insufficient_funds", nil},
		// All the wallet's ether, and none left for gas ($30,000: one approver).
		{`{"walletId":"` + l.wallet.ID + `","asset":"ETH","amount":"10","destination":{"address":"` + to + `"}}`, "insufficient_funds", []string{"key_a"}},
		{`{"walletId":"` + l.wallet.ID + `","asset":"WBTC","amount":"0.1","destination":{"address":"` + to + `"}}`, "unsupported_asset", nil},
	} {
		o, legs := l.draft(t, "payment", tc.body)
		st := l.run(t, o, legs, tc.approvers...)
		got, _, err := l.store.Order(ctx, o.ID)
		if err != nil || st.Status != "failed" || got.FailureCode == nil || *got.FailureCode != tc.code {
			t.Fatalf("%s: state %+v, order %+v %v; want failed %s", tc.body, st, got, err, tc.code)
		}
		names, data := l.events(t, o.ID)
		if names[len(names)-1] != "Order.Failed" || slices.Contains(names, "Wallet.SigningRequested") {
			t.Fatalf("%s: events %v", tc.body, names)
		}
		if f, _ := data[len(data)-1]["failure"].(map[string]any); f["code"] != tc.code || f["message"] == "" {
			t.Fatalf("%s: Order.Failed carries %v", tc.body, data[len(data)-1])
		}
	}
	reqs, err := l.store.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: []string{l.wallet.ID}, Limit: 10})
	if err != nil || len(reqs) != 0 {
		t.Fatalf("signing requests %+v %v: want none", reqs, err)
	}
	var next uint64
	err = l.store.Tx(ctx, func(tx *store.Store) error {
		var err error
		next, err = tx.TakeNonce(ctx, "ethereum", l.wallet.Address, 0)
		return err
	})
	if err != nil || next != 0 {
		t.Fatalf("the wallet's next nonce is %d (%v): a refused leg took one", next, err)
	}
}

// An approval item shows what the chain's node says its legs would move when it was made:
// a payment the wallet can make, the ether leaving the wallet for the payee; one it cannot,
// a revert with the node's reason, before anyone approves it.
func TestAnApprovalItemShowsWhatItsLegsWouldMove(t *testing.T) {
	l, _, _ := evmLifecycle(t)
	ctx := context.Background()
	const to = "0x1111111111111111111111111111111111111111"
	simulation := func(o *store.Order) chain.Simulation {
		t.Helper()
		got, _, err := l.store.Order(ctx, o.ID)
		if err != nil || got.ApprovalItemID == nil {
			t.Fatalf("order %+v %v: no approval item", got, err)
		}
		item, _, err := l.store.ApprovalItem(ctx, l.creds.OrgID, *got.ApprovalItemID)
		if err != nil {
			t.Fatal(err)
		}
		var sim chain.Simulation
		if err := json.Unmarshal([]byte(item.Simulation), &sim); err != nil {
			t.Fatalf("simulation %q: %v", item.Simulation, err)
		}
		if sim.At == "" || sim.Block == 0 || sim.Error != "" || len(sim.Legs) != 1 || sim.Legs[0].Leg != "TRANSFER" {
			t.Fatalf("simulation %s", item.Simulation)
		}
		return sim
	}

	// 9 ETH ($27,000: one approver).
	o, legs := l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"ETH","amount":"9","destination":{"address":"`+to+`"}}`)
	if st := l.run(t, o, legs, "key_a"); st.Status != "confirmed" {
		t.Fatalf("the payment: %+v", st)
	}
	moved := simulation(o).Legs[0]
	wallet := common.HexToAddress(l.wallet.Address).Hex()
	if moved.Reverted || moved.GasUsed == 0 || len(moved.BalanceChanges) != 2 ||
		!slices.Contains(moved.BalanceChanges, chain.BalanceChange{Address: to, Asset: "ETH", Amount: "9", BaseUnits: "9000000000000000000"}) ||
		!slices.Contains(moved.BalanceChanges, chain.BalanceChange{Address: wallet, Asset: "ETH", Amount: "-9", BaseUnits: "-9000000000000000000"}) {
		t.Fatalf("the payment's simulation: %+v", moved)
	}

	// 20,000 USDC from a wallet holding 1,000: the token would revert, and the order fails
	// as it would have.
	o, legs = l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"20000","destination":{"address":"`+to+`"}}`)
	if st := l.run(t, o, legs, "key_a"); st.Status != "failed" {
		t.Fatalf("the payment beyond the wallet: %+v", st)
	}
	if short := simulation(o).Legs[0]; !short.Reverted || short.Reason == "" || len(short.BalanceChanges) != 0 {
		t.Fatalf("the simulation of a payment beyond the wallet: %+v", short)
	}
}
