package evm_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/shopspring/decimal"

	"errors"
	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

var (
	dead     = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	receiver = common.HexToAddress("0x1111111111111111111111111111111111111111")
)

// net is a simulated chain with the dev contracts and one funded wallet.
type net struct {
	t       *testing.T
	backend *simulated.Backend
	chain   *evm.Chain
	cfg     evm.Config
	wallet  *keys.Key
	// next is the wallet's next nonce.
	next uint64
}

func newNet(t *testing.T, confirmations int) *net {
	t.Helper()
	ctx := context.Background()
	deployer, _ := crypto.GenerateKey()
	wallet, _ := keys.Generate(chain.Secp256k1)
	alloc := types.GenesisAlloc{
		crypto.PubkeyToAddress(deployer.PublicKey): {Balance: new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1e12))},
		dead: {Code: contracts.RevertRuntime(), Balance: new(big.Int)},
	}
	backend := simulated.NewBackend(alloc)
	t.Cleanup(func() { _ = backend.Close() })
	d := &devevm.Deployer{Client: backend.Client(), Key: deployer, Mine: func() { backend.Commit() }}
	w := common.HexToAddress(wallet.Address())
	cfg, err := d.Deploy(ctx, devevm.Plan{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH",
		Tokens:    []devevm.TokenPlan{{Symbol: "USDC", Decimals: 6}, {Symbol: "WBTC", Decimals: 8}},
		PricesUSD: map[string]decimal.Decimal{"ETH": decimal.NewFromInt(3000), "USDC": decimal.NewFromInt(1), "WBTC": decimal.NewFromInt(60000)},
		Protocols: []string{"aave"},
		Funds:     map[common.Address]map[string]decimal.Decimal{w: {"ETH": decimal.NewFromInt(100), "USDC": decimal.NewFromInt(1_000_000)}},
		Spenders:  []*ecdsa.PrivateKey{wallet.ECDSA()}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Confirmations = confirmations
	c, err := evm.New(ctx, cfg, backend.Client())
	if err != nil {
		t.Fatal(err)
	}
	next, err := backend.Client().NonceAt(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &net{t: t, backend: backend, chain: c, cfg: cfg, wallet: wallet, next: next}
}

// send prepares a leg, seals it at the wallet's next nonce, signs it with the wallet's key
// and broadcasts it.
func (n *net) send(leg chain.Leg) (chain.SignedTx, string) {
	n.t.Helper()
	ctx := context.Background()
	leg.Chain, leg.From = "ethereum", n.wallet.Address()
	draft, err := n.chain.Prepare(ctx, leg)
	if err != nil {
		n.t.Fatal(err)
	}
	if !draft.Nonced || draft.Scheme != chain.Secp256k1 {
		n.t.Fatalf("an EVM draft is nonced and secp256k1: %+v", draft)
	}
	if draft.NonceFloor > n.next {
		n.t.Fatalf("the chain has mined %d transactions of the wallet, the test sent %d", draft.NonceFloor, n.next)
	}
	u, err := draft.Seal(n.next)
	if err != nil {
		n.t.Fatal(err)
	}
	n.next++
	// The transaction does what the leg's intent, read from the configuration alone, says.
	decoded, _, err := evm.DecodeUnsigned(u.Raw)
	if err != nil {
		n.t.Fatal(err)
	}
	intent, err := n.chain.Describe(leg)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := evm.CheckIntent(decoded, intent); err != nil {
		n.t.Fatalf("the %s leg's transaction against its intent %+v: %v", leg.Kind, intent, err)
	}
	tx := n.signed(u, n.wallet)
	hash, err := n.chain.Broadcast(ctx, tx)
	if err != nil {
		n.t.Fatal(err)
	}
	return tx, hash
}

// commit seals a block once the node's pool holds every transaction the test sent (the
// pool takes them in asynchronously).
func (n *net) commit() {
	n.t.Helper()
	ctx := context.Background()
	wait.For(n.t, 10*time.Second, fmt.Sprintf("the pool to hold the %d transactions the test sent", n.next), func() bool {
		pending, err := n.backend.Client().PendingNonceAt(ctx, common.HexToAddress(n.wallet.Address()))
		if err != nil {
			n.t.Fatal(err)
		}
		return pending >= n.next
	})
	n.backend.Commit()
}

func (n *net) signed(u chain.Unsigned, k *keys.Key) chain.SignedTx {
	n.t.Helper()
	// What a signer decodes itself is the transaction the readable fields describe.
	if _, hash, err := evm.DecodeUnsigned(u.Raw); err != nil || hash.Hex()[2:] != u.Digest {
		n.t.Fatalf("the unsigned bytes hash to %s (%v), the digest is %s", hash.Hex(), err, u.Digest)
	}
	digest := common.FromHex(u.Digest)
	sig, err := k.Sign(digest)
	if err != nil {
		n.t.Fatal(err)
	}
	return chain.SignedTx{Chain: "ethereum", Fields: u.Fields, Digest: u.Digest, Signature: sig}
}

func (n *net) status(hash string) chain.TxStatus {
	n.t.Helper()
	st, err := n.chain.Status(context.Background(), "ethereum", hash)
	if err != nil {
		n.t.Fatal(err)
	}
	return st
}

func (n *net) balances(addr string) map[string]decimal.Decimal {
	n.t.Helper()
	b, err := n.chain.Balances(context.Background(), "ethereum", addr)
	if err != nil {
		n.t.Fatal(err)
	}
	return b
}

func TestPaymentsConfirmAtTheirDepthAndMoveTheExactAmount(t *testing.T) {
	n := newNet(t, 2)
	ctx := context.Background()
	tx, hash := n.send(chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.RequireFromString("1234.567891"), To: receiver.Hex()})
	if again, err := n.chain.Broadcast(ctx, tx); err != nil || again != hash {
		t.Fatalf("a second broadcast of the same signed transaction: %s %v, want %s", again, err, hash)
	}
	if h, found, err := n.chain.Known(ctx, tx); err != nil || !found || h != hash {
		t.Fatalf("known after its broadcast: %s %v %v", h, found, err)
	}
	if st := n.status(hash); st.State != chain.TxPending {
		t.Fatalf("before a block: %+v", st)
	}
	n.commit()
	if st := n.status(hash); st.State != chain.TxPending || st.Confirmations != 1 {
		t.Fatalf("one block deep of two: %+v", st)
	}
	n.commit()
	if st := n.status(hash); st.State != chain.TxConfirmed || st.Confirmations != 2 {
		t.Fatalf("two blocks deep: %+v", st)
	}
	receipt, err := n.backend.Client().TransactionReceipt(ctx, common.HexToHash(hash))
	if err != nil || len(receipt.Logs) != 1 {
		t.Fatalf("receipt: %+v %v", receipt, err)
	}
	if got := new(big.Int).SetBytes(receipt.Logs[0].Data); got.Cmp(big.NewInt(1_234_567_891)) != 0 {
		t.Fatalf("the Transfer log carries %s base units, want 1234567891", got)
	}
	if got := n.balances(receiver.Hex())["USDC"]; !got.Equal(decimal.RequireFromString("1234.567891")) {
		t.Fatalf("receiver holds %s USDC", got)
	}

	_, hash = n.send(chain.Leg{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.RequireFromString("1.5"), To: receiver.Hex()})
	n.commit()
	n.commit()
	if st := n.status(hash); st.State != chain.TxConfirmed {
		t.Fatalf("native transfer: %+v", st)
	}
	if got := n.balances(receiver.Hex())["ETH"]; !got.Equal(decimal.RequireFromString("1.5")) {
		t.Fatalf("receiver holds %s ETH", got)
	}
}

func TestAnAmountFinerThanTheTokenIsRefusedNotRounded(t *testing.T) {
	n := newNet(t, 1)
	_, err := n.chain.Prepare(context.Background(), chain.Leg{Chain: "ethereum", From: n.wallet.Address(), Kind: "TRANSFER",
		Asset: "USDC", Amount: decimal.RequireFromString("1.0000001"), To: receiver.Hex()})
	if err == nil || !strings.Contains(err.Error(), "decimal places") {
		t.Fatalf("7 decimals of a 6-decimal token: %v", err)
	}
}

// TestALegNoRetryCanFixIsRefusedAsSuch: more than the wallet holds (of the token, or of
// the native asset its value and gas are paid in), an asset the chain's configuration
// lacks, and an amount a 256-bit word cannot carry are refused by Prepare with the errors
// the worker fails the order on, instead of retrying.
func TestALegNoRetryCanFixIsRefusedAsSuch(t *testing.T) {
	n := newNet(t, 1)
	ctx := context.Background()
	word := new(big.Int).Lsh(big.NewInt(1), 256)
	cases := []struct {
		name string
		leg  chain.Leg
		want error
	}{
		{"more USDC than held", chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.RequireFromString("1000000.000001"), To: receiver.Hex()}, chain.ErrInsufficientFunds},
		{"more ETH than held", chain.Leg{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.RequireFromString("100.5"), To: receiver.Hex()}, chain.ErrInsufficientFunds},
		{"all the ETH, nothing left for gas", chain.Leg{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.RequireFromString("100"), To: receiver.Hex()}, chain.ErrInsufficientFunds},
		{"a swap of WBTC never held", chain.Leg{Kind: "APPROVE", Asset: "WBTC", Amount: decimal.RequireFromString("1"), BuyAsset: "ETH", MaxSlippageBps: 50}, chain.ErrInsufficientFunds},
		{"a deposit of more than held", chain.Leg{Kind: "DEPOSIT", Asset: "USDC", Amount: decimal.RequireFromString("2000000"), Protocol: "aave"}, chain.ErrInsufficientFunds},
		{"an asset not configured", chain.Leg{Kind: "TRANSFER", Asset: "DAI", Amount: decimal.RequireFromString("1"), To: receiver.Hex()}, chain.ErrUnsupportedAsset},
		{"a vault not configured", chain.Leg{Kind: "DEPOSIT", Asset: "USDC", Amount: decimal.RequireFromString("1"), Protocol: "compound"}, chain.ErrUnsupportedAsset},
		{"2^256 base units", chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromBigInt(word, -6), To: receiver.Hex()}, chain.ErrAmountTooLarge},
	}
	for _, tc := range cases {
		leg := tc.leg
		leg.Chain, leg.From = "ethereum", n.wallet.Address()
		if _, err := n.chain.Prepare(ctx, leg); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// What the wallet holds, to the base unit and with gas to spare, still goes.
	_, hash := n.send(chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.RequireFromString("1000000"), To: receiver.Hex()})
	n.commit()
	if st := n.status(hash); st.State != chain.TxConfirmed {
		t.Fatalf("a transfer of the whole USDC balance: %+v", st)
	}
}

func TestARevertFailsWithItsReason(t *testing.T) {
	n := newNet(t, 1)
	_, token := n.send(chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(5), To: dead.Hex()})
	_, native := n.send(chain.Leg{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.NewFromInt(1), To: dead.Hex()})
	n.commit()
	for hash, want := range map[string]string{token: "DevToken: transfers to 0x...dEaD always revert",
		native: "DevRevert: transfers to 0x...dEaD always revert"} {
		st := n.status(hash)
		if st.State != chain.TxFailed || st.Reason != "reverted: "+want {
			t.Fatalf("%s: %+v, want failed with %q", hash, st, want)
		}
	}
}

func TestOnlyTheTransactionThatWasSignedIsBroadcast(t *testing.T) {
	n := newNet(t, 1)
	ctx := context.Background()
	draft, err := n.chain.Prepare(ctx, chain.Leg{Chain: "ethereum", From: n.wallet.Address(), Kind: "TRANSFER", Asset: "ETH",
		Amount: decimal.NewFromInt(1), To: receiver.Hex()})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := draft.Seal(n.next)
	tx := n.signed(u, n.wallet)

	var fields map[string]any
	_ = json.Unmarshal(u.Fields, &fields)
	fields["nonce"] = 1 // another nonce than the one signed
	tx.Fields, _ = json.Marshal(fields)
	if _, err := n.chain.Broadcast(ctx, tx); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a transaction other than the one signed: %v", err)
	}

	stranger, _ := keys.Generate(chain.Secp256k1)
	if _, err := n.chain.Broadcast(ctx, n.signed(u, stranger)); err == nil || !strings.Contains(err.Error(), "sender") {
		t.Fatalf("a signature by another key: %v", err)
	}
}

func TestAReorgedTransactionIsPendingAgain(t *testing.T) {
	n := newNet(t, 3)
	ctx := context.Background()
	parent, err := n.backend.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, hash := n.send(chain.Leg{Kind: "TRANSFER", Asset: "ETH", Amount: decimal.NewFromInt(1), To: receiver.Hex()})
	n.commit()
	if st := n.status(hash); st.State != chain.TxPending || st.Confirmations != 1 {
		t.Fatalf("one block deep of three: %+v", st)
	}
	// A longer side chain without the transaction becomes canonical.
	if err := n.backend.Fork(parent.Hash()); err != nil {
		t.Fatal(err)
	}
	n.backend.Rollback()
	for range 3 {
		n.backend.Commit() // empty blocks: the transaction is gone from the pool
	}
	if st := n.status(hash); st.State != chain.TxPending || st.Confirmations != 0 {
		t.Fatalf("after a reorg dropped it: %+v", st)
	}
}

func TestTradeEarnAndBorrowLegsCallTheirContracts(t *testing.T) {
	n := newNet(t, 1)
	w := n.wallet.Address()
	run := func(leg chain.Leg) {
		t.Helper()
		_, hash := n.send(leg)
		n.commit()
		if st := n.status(hash); st.State != chain.TxConfirmed {
			t.Fatalf("%s leg: %+v", leg.Kind, st)
		}
	}
	before := n.balances(w)
	run(chain.Leg{Kind: "APPROVE", Asset: "USDC", Amount: decimal.NewFromInt(3000), BuyAsset: "ETH"})
	run(chain.Leg{Kind: "SWAP", Asset: "USDC", Amount: decimal.NewFromInt(3000), BuyAsset: "ETH", MaxSlippageBps: 50})
	run(chain.Leg{Kind: "SWAP", Asset: "ETH", Amount: decimal.NewFromInt(2), BuyAsset: "WBTC", MaxSlippageBps: 50})
	run(chain.Leg{Kind: "DEPOSIT", Asset: "USDC", Amount: decimal.NewFromInt(500), Protocol: "aave"})
	run(chain.Leg{Kind: "WITHDRAW", Asset: "USDC", Amount: decimal.NewFromInt(200), Protocol: "aave"})
	run(chain.Leg{Kind: "CLAIM", Asset: "USDC", Protocol: "aave"})
	run(chain.Leg{Kind: "DRAW", Asset: "WBTC", Amount: decimal.RequireFromString("0.5"), Protocol: "aave"})
	run(chain.Leg{Kind: "REPAY", Asset: "WBTC", Amount: decimal.RequireFromString("0.25"), Protocol: "aave"})
	after := n.balances(w)
	// 3,000 USDC bought 1 ETH; 2 ETH bought 0.1 WBTC; 300 USDC stayed in the vault; 0.25
	// WBTC of the 0.5 drawn is still owed. Gas is paid in ETH, so ETH is checked by bounds.
	wantUSDC := before["USDC"].Sub(decimal.NewFromInt(3000 + 300))
	if !after["USDC"].Equal(wantUSDC) {
		t.Fatalf("USDC %s, want %s", after["USDC"], wantUSDC)
	}
	if want := decimal.RequireFromString("0.35"); !after["WBTC"].Equal(want) {
		t.Fatalf("WBTC %s, want %s", after["WBTC"], want)
	}
	ethDelta := after["ETH"].Sub(before["ETH"])
	if ethDelta.GreaterThan(decimal.NewFromInt(-1)) || ethDelta.LessThan(decimal.RequireFromString("-1.01")) {
		t.Fatalf("ETH moved by %s, want -1 less gas", ethDelta)
	}
}

// cheapNode is the simulated chain seen through a node that understates its fee market:
// what the adapter prepares through it pays less than the chain's base fee.
type cheapNode struct{ simulated.Client }

func (cheapNode) SuggestGasTipCap(context.Context) (*big.Int, error) { return big.NewInt(1), nil }

func (c cheapNode) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	h, err := c.Client.HeaderByNumber(ctx, number)
	if err == nil && number == nil {
		cheap := *h
		cheap.BaseFee = big.NewInt(1)
		return &cheap, nil
	}
	return h, err
}

func TestATransactionBelowTheFeeMarketIsReplacedAndTheReplacementConfirms(t *testing.T) {
	n := newNet(t, 1)
	ctx := context.Background()
	cheap, err := evm.New(ctx, n.cfg, cheapNode{n.backend.Client()})
	if err != nil {
		t.Fatal(err)
	}
	leg := chain.Leg{Chain: "ethereum", From: n.wallet.Address(), Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(7), To: receiver.Hex()}
	draft, err := cheap.Prepare(ctx, leg)
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := draft.Seal(n.next)
	if err != nil {
		t.Fatal(err)
	}
	n.next++
	stuckHash, err := n.chain.Broadcast(ctx, n.signed(stuck, n.wallet))
	if err != nil {
		t.Fatal(err)
	}
	n.commit()
	if st := n.status(stuckHash); st.State != chain.TxPending || !st.Underpriced {
		t.Fatalf("a transaction below the base fee, after a block: %+v, want pending and underpriced", st)
	}

	leg.Replaces = stuck.Fields
	draft, err = n.chain.Prepare(ctx, leg)
	if err != nil {
		t.Fatal(err)
	}
	if draft.Nonced {
		t.Fatal("a replacement takes no new nonce")
	}
	replacement, err := draft.Seal(0)
	if err != nil {
		t.Fatal(err)
	}
	var before, after struct {
		Nonce        uint64 `json:"nonce"`
		Data         string `json:"data"`
		MaxFeePerGas string `json:"maxFeePerGas"`
	}
	_ = json.Unmarshal(stuck.Fields, &before)
	_ = json.Unmarshal(replacement.Fields, &after)
	if after.Nonce != before.Nonce || after.Data != before.Data || *replacement.Nonce != before.Nonce || after.MaxFeePerGas == before.MaxFeePerGas {
		t.Fatalf("the replacement is the same call at the same nonce for another fee: %+v, was %+v", after, before)
	}
	newHash, err := n.chain.Broadcast(ctx, n.signed(replacement, n.wallet))
	if err != nil {
		t.Fatal(err)
	}
	n.commit()
	if st := n.status(newHash); st.State != chain.TxConfirmed {
		t.Fatalf("the replacement: %+v", st)
	}
	if st := n.status(stuckHash); st.State != chain.TxPending || !st.Underpriced {
		t.Fatalf("the replaced transaction never confirms: %+v", st)
	}
	if got := n.balances(receiver.Hex())["USDC"]; !got.Equal(decimal.NewFromInt(7)) {
		t.Fatalf("the receiver holds %s USDC, want 7, paid once", got)
	}
}

// A replacement whose transaction was mined meanwhile is not sent: the broadcast says the
// nonce is used, and nothing is paid twice.
func TestAReplacementOfAMinedTransactionIsRefusedAsNonceUsed(t *testing.T) {
	n := newNet(t, 1)
	ctx := context.Background()
	leg := chain.Leg{Kind: "TRANSFER", Asset: "USDC", Amount: decimal.NewFromInt(2), To: receiver.Hex()}
	sent, hash := n.send(leg)
	n.commit()
	if st := n.status(hash); st.State != chain.TxConfirmed {
		t.Fatalf("the original: %+v", st)
	}
	leg.Chain, leg.From, leg.Replaces = "ethereum", n.wallet.Address(), sent.Fields
	draft, err := n.chain.Prepare(ctx, leg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := draft.Seal(0)
	if err != nil {
		t.Fatal(err)
	}
	// The node's pool catches up with a new block in the background: until it has, it may
	// still take the replacement in place of the transaction it holds, and drop it after.
	// Asked again, it refuses it.
	replacement := n.signed(u, n.wallet)
	wait.For(t, 10*time.Second, "the node to refuse the replacement of a mined transaction (ErrNonceUsed)", func() bool {
		_, err := n.chain.Broadcast(ctx, replacement)
		if errors.Is(err, chain.ErrNonceUsed) {
			return true
		}
		if err != nil {
			t.Fatalf("broadcasting the replacement of a mined transaction: %v, want ErrNonceUsed", err)
		}
		n.backend.Commit()
		return false
	})
	if got := n.balances(receiver.Hex())["USDC"]; !got.Equal(decimal.NewFromInt(2)) {
		t.Fatalf("the receiver holds %s USDC, want 2, paid once", got)
	}
}
