package evm_test

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
)

// node is the chain's node as a simulator: its client offers eth_simulateV1.
func (n *net) node() evm.Simulator {
	n.t.Helper()
	s, ok := n.backend.Client().(evm.Simulator)
	if !ok {
		n.t.Fatal("the simulated backend's client offers no eth_simulateV1")
	}
	return s
}

// prepared is a leg's transaction as a signer decodes it, with the intent it is held to.
func (n *net) prepared(leg chain.Leg, nonce uint64) (*types.Transaction, chain.Intent) {
	n.t.Helper()
	leg.Chain, leg.From = "ethereum", n.wallet.Address()
	draft, err := n.chain.Prepare(context.Background(), leg)
	if err != nil {
		n.t.Fatal(err)
	}
	u, err := draft.Seal(nonce)
	if err != nil {
		n.t.Fatal(err)
	}
	tx, _, err := evm.DecodeUnsigned(u.Raw)
	if err != nil {
		n.t.Fatal(err)
	}
	in, err := n.chain.Describe(leg)
	if err != nil {
		n.t.Fatal(err)
	}
	return tx, in
}

func callOf(tx *types.Transaction, from common.Address) ethereum.CallMsg {
	return ethereum.CallMsg{From: from, To: tx.To(), Value: tx.Value(), Data: tx.Data()}
}

// tradeEarnBorrow are legs of every kind, in an order each can run after the one before.
var tradeEarnBorrow = []chain.Leg{
	{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(250), To: receiver.Hex()},
	{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.RequireFromString("1.5"), To: receiver.Hex()},
	{Kind: "APPROVE", Asset: "USDC", Amount: decimal.NewFromInt(3000), BuyAsset: "ETH"},
	{Kind: "SWAP", Asset: "USDC", Amount: decimal.NewFromInt(3000), BuyAsset: "ETH", MaxSlippageBps: 50},
	{Kind: "SWAP", Asset: "ETH", Amount: decimal.NewFromInt(2), BuyAsset: "WBTC", MaxSlippageBps: 50},
	{Kind: "DEPOSIT", Asset: "USDC", Amount: decimal.NewFromInt(500), Protocol: "aave"},
	{Kind: "WITHDRAW", Asset: "USDC", Amount: decimal.NewFromInt(200), Protocol: "aave"},
	{Kind: "CLAIM", Asset: "USDC", Protocol: "aave"},
	{Kind: "DRAW", Asset: "WBTC", Amount: decimal.RequireFromString("0.5"), Protocol: "aave"},
	{Kind: "REPAY", Asset: "WBTC", Amount: decimal.RequireFromString("0.25"), Protocol: "aave"},
}

func TestEveryLegSimulatesAsItsIntentSays(t *testing.T) {
	n := newNet(t, 1)
	ctx := context.Background()
	w := common.HexToAddress(n.wallet.Address())
	// The wallet holds WBTC before, so that the repay can be prepared (a draft is checked
	// against the balances on chain, not the simulated ones).
	n.send(chain.Leg{Kind: "SWAP", Asset: "ETH", Amount: decimal.NewFromInt(6), BuyAsset: "WBTC", MaxSlippageBps: 50})
	n.commit()
	txs, intents, calls := make([]*types.Transaction, len(tradeEarnBorrow)), make([]chain.Intent, len(tradeEarnBorrow)), make([]ethereum.CallMsg, len(tradeEarnBorrow))
	for i, leg := range tradeEarnBorrow {
		txs[i], intents[i] = n.prepared(leg, n.next+uint64(i))
		calls[i] = callOf(txs[i], w)
	}
	block, outcomes, err := evm.Simulate(ctx, n.node(), calls)
	if err != nil {
		t.Fatal(err)
	}
	if block == 0 {
		t.Fatal("the simulation names no block")
	}
	for i, o := range outcomes {
		if err := evm.CheckMovements(txs[i], intents[i], w, o); err != nil {
			t.Errorf("%s leg %d: %v (outcome %+v)", intents[i].Leg, i, err, o)
		}
	}
	// What a contract that does other than its calldata says would leave in the outcome:
	// each is refused.
	without := func(o evm.Outcome, drop func(evm.Movement) bool) evm.Outcome {
		o.Movements = slices.DeleteFunc(slices.Clone(o.Movements), drop)
		return o
	}
	toWallet := func(m evm.Movement) bool { return m.To == w }
	for _, tc := range []struct {
		leg  int
		o    evm.Outcome
		want string
	}{
		{3, without(outcomes[3], toWallet), "the wallet does not receive what the SWAP leg is for"},
		{4, without(outcomes[4], toWallet), "the wallet does not receive what the SWAP leg is for"},
		{6, without(outcomes[6], toWallet), "the wallet does not receive what the WITHDRAW leg is for"},
		{8, without(outcomes[8], toWallet), "the wallet does not receive what the DRAW leg is for"},
		{2, evm.Outcome{GasUsed: outcomes[2].GasUsed}, "emits 0 Approval events"},
		{6, func() evm.Outcome {
			o := outcomes[6]
			o.Movements = append(slices.Clone(o.Movements), evm.Movement{Token: common.HexToAddress(intents[6].Contract), From: w, To: dead, Amount: big.NewInt(1)})
			return o
		}(), "a WITHDRAW leg takes nothing from it"},
		{0, func() evm.Outcome {
			o := outcomes[0]
			o.Others = []evm.Other{{Token: dead, Name: "Transfer", Addresses: []common.Address{w, dead, {}}}}
			return o
		}(), "a Transfer event of " + dead.Hex() + " names the wallet"},
	} {
		if err := evm.CheckMovements(txs[tc.leg], intents[tc.leg], w, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s leg %d tampered: %v, want %q", intents[tc.leg].Leg, tc.leg, err, tc.want)
		}
	}

	// Nothing was sent: the wallet's nonce and balances are as they were.
	if nonce, _ := n.backend.Client().NonceAt(ctx, w, nil); nonce != n.next {
		t.Fatalf("the simulation sent something: nonce %d", nonce)
	}

	// The same legs through the adapter, as approvers see them.
	legs := make([]chain.Leg, len(tradeEarnBorrow))
	for i, leg := range tradeEarnBorrow {
		leg.Chain, leg.From = "ethereum", w.Hex()
		legs[i] = leg
	}
	sim, err := n.chain.Simulate(ctx, legs)
	if err != nil {
		t.Fatal(err)
	}
	got := func(leg int) map[string]string {
		out := map[string]string{}
		for _, c := range sim.Legs[leg].BalanceChanges {
			out[c.Address+" "+c.Asset] = c.Amount
		}
		return out
	}
	if c := got(0); len(c) != 2 || c[w.Hex()+" USDC"] != "-250" || c[receiver.Hex()+" USDC"] != "250" {
		t.Fatalf("the USDC transfer shows %v", c)
	}
	if c := got(1); len(c) != 2 || c[w.Hex()+" ETH"] != "-1.5" || c[receiver.Hex()+" ETH"] != "1.5" {
		t.Fatalf("the ETH transfer shows %v", c)
	}
	if c := got(2); len(c) != 0 || sim.Legs[2].Reverted {
		t.Fatalf("an approve moves nothing: %+v", sim.Legs[2])
	}
	// 3,000 USDC buy 1 ETH at the dev router's prices.
	if c := got(3); c[w.Hex()+" USDC"] != "-3000" || c[w.Hex()+" ETH"] != "1" {
		t.Fatalf("the swap shows %v", c)
	}
	for i, l := range sim.Legs {
		if l.Reverted || l.Leg != tradeEarnBorrow[i].Kind || l.GasUsed == 0 {
			t.Fatalf("leg %d: %+v", i, l)
		}
	}
}

func TestASimulatedMovementTheIntentDoesNotSayIsRefused(t *testing.T) {
	n := newNet(t, 1)
	ctx := context.Background()
	w := common.HexToAddress(n.wallet.Address())
	one := func(leg chain.Leg) (*types.Transaction, chain.Intent, evm.Outcome) {
		t.Helper()
		tx, in := n.prepared(leg, 0)
		_, o, err := evm.Simulate(ctx, n.node(), []ethereum.CallMsg{callOf(tx, w)})
		if err != nil {
			t.Fatal(err)
		}
		return tx, in, o[0]
	}
	refused := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want a refusal saying %q", err, want)
		}
	}

	// A transfer that pays another amount than its intent's.
	tx, in, o := one(chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(250), To: receiver.Hex()})
	lower := in
	lower.Amount = "249000000"
	refused(evm.CheckMovements(tx, lower, w, o), "the TRANSFER leg spends 249000000")

	// A transfer the chain reverts (the dev token refuses 0x…dEaD).
	tx, in, o = one(chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(5), To: dead.Hex()})
	refused(evm.CheckMovements(tx, in, w, o), "it reverts")

	// What a token with a hidden drain would do: the transfer also moves WBTC away, or
	// grants an allowance to a stranger.
	tx, in, o = one(chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(250), To: receiver.Hex()})
	drained := o
	drained.Movements = append(append([]evm.Movement{}, o.Movements...), evm.Movement{Token: n.cfg.Tokens[1].Address, From: w, To: dead, Amount: big.NewInt(1)})
	refused(evm.CheckMovements(tx, in, w, drained), "the TRANSFER leg spends only the token at "+n.cfg.Tokens[0].Address.Hex())
	granted := o
	granted.Approvals = []evm.Allowance{{Token: n.cfg.Tokens[0].Address, Owner: w, Spender: dead, Amount: big.NewInt(1)}}
	refused(evm.CheckMovements(tx, in, w, granted), "a TRANSFER leg grants nothing")

	// A claim that takes something from the wallet.
	tx, in, o = one(chain.Leg{Kind: "CLAIM", Asset: "USDC", Protocol: "aave"})
	o.Movements = append(o.Movements, evm.Movement{Token: evm.NativeAddress, From: w, To: dead, Amount: big.NewInt(7)})
	refused(evm.CheckMovements(tx, in, w, o), "a CLAIM leg takes nothing from it")

	// More ether than the wallet holds: the node refuses the call itself, which reads as
	// a revert, not as a node that is down.
	tx, in = n.prepared(chain.Leg{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.NewFromInt(1), To: receiver.Hex()}, 0)
	short := callOf(tx, w)
	short.Value = new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1_000_000))
	if _, o, err := evm.Simulate(ctx, n.node(), []ethereum.CallMsg{short}); err != nil || len(o) != 1 || !o[0].Reverted ||
		!strings.Contains(o[0].Reason, "insufficient funds") {
		t.Fatalf("a value beyond the wallet: %+v %v", o, err)
	}

	// A node that cannot be reached: the error leaves its URL (and the key in it) out.
	far, err := ethclient.Dial("http://127.0.0.1:1/v3/provider-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := evm.Simulate(ctx, far, []ethereum.CallMsg{short}); err == nil || strings.Contains(err.Error(), "provider-key") {
		t.Fatalf("an unreachable node: %v", err)
	}

	// Simulating needs a node whose client offers eth_simulateV1: a chain without one is a
	// chain that does not simulate.
	plain, err := evm.New(ctx, n.cfg, cheapNode{n.backend.Client()})
	if err != nil {
		t.Fatal(err)
	}
	legs := []chain.Leg{{Chain: "ethereum", From: w.Hex(), Kind: "TRANSFER", Asset: "ETH", Amount: decimal.NewFromInt(1), To: receiver.Hex()}}
	if _, err := plain.Simulate(ctx, legs); !errors.Is(err, chain.ErrNoSimulator) {
		t.Fatalf("a client without eth_simulateV1: %v", err)
	}
}
