package solana_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/devsvm/devsvmtest"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// rig is the adapter over a dev SVM of its own, with one funded wallet.
type rig struct {
	node   *devsvm.Node
	info   devsvm.Info
	chain  *solana.Chain
	wallet *keys.Key
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	node, info := devsvmtest.Start(t, 50*time.Millisecond)
	c, err := solana.Dial(ctx, solana.Config{RPCURL: node.URL(), Commitment: "confirmed", GenesisHash: info.GenesisHash,
		Tokens: []solana.Token{{Symbol: "USDC", Mint: info.USDCMint, Decimals: 6}}, SlotTime: solana.Duration(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{node: node, info: info, chain: c, wallet: newKey(t)}
	if err := node.Airdrop(ctx, r.address(), 10_000_000_000); err != nil { // 10 SOL
		t.Fatal(err)
	}
	if err := node.MintUSDC(ctx, r.address(), 1_000_000_000); err != nil { // 1,000 USDC
		t.Fatal(err)
	}
	return r
}

func newKey(t *testing.T) *keys.Key {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keys.FromEd25519(k)
}

func (r *rig) address() string { return r.wallet.SolanaAddress() }

func (r *rig) leg(asset, amount, to string) chain.Leg {
	return chain.Leg{Chain: "solana", OrderID: "ord_test", Kind: "TRANSFER", From: r.address(), Scheme: chain.Ed25519,
		Asset: asset, Amount: decimal.RequireFromString(amount), To: to}
}

// sign prepares a leg and signs its message as a wallet does: the message bytes, whose
// SHA-256 is the digest.
func (r *rig) sign(t *testing.T, leg chain.Leg) (chain.SignedTx, chain.Unsigned) {
	t.Helper()
	draft, err := r.chain.Prepare(context.Background(), leg)
	if err != nil {
		t.Fatal(err)
	}
	if draft.Scheme != chain.Ed25519 || draft.Nonced {
		t.Fatalf("draft: scheme %s, nonced %v", draft.Scheme, draft.Nonced)
	}
	u, err := draft.Seal(0)
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := hex.DecodeString(u.Digest)
	signed, err := keys.Signed(chain.Ed25519, digest, u.Raw)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := r.wallet.Sign(signed)
	if err != nil {
		t.Fatal(err)
	}
	if err := solana.CheckRequest(u.Fields, u.Raw, u.Digest, r.address()); err != nil {
		t.Fatalf("the request does not check out for its own wallet: %v", err)
	}
	return chain.SignedTx{Chain: "solana", Kind: leg.Kind, From: leg.From, To: leg.To, Asset: leg.Asset, Amount: leg.Amount,
		Fields: u.Fields, Digest: u.Digest, Signature: sig}, u
}

// settle waits for a transaction to leave pending.
func (r *rig) settle(t *testing.T, id string) chain.TxStatus {
	t.Helper()
	var st chain.TxStatus
	wait.For(t, 20*time.Second, "the transaction settles", func() bool {
		var err error
		st, err = r.chain.Status(context.Background(), "solana", id)
		if err != nil {
			t.Fatal(err)
		}
		return st.State != chain.TxPending
	})
	return st
}

func (r *rig) balances(t *testing.T, address string) map[string]decimal.Decimal {
	t.Helper()
	b, err := r.chain.Balances(context.Background(), "solana", address)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fee reads what the chain charged a transaction.
func (r *rig) fee(t *testing.T, id string) decimal.Decimal {
	t.Helper()
	lamports, err := r.node.Fee(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return decimal.NewFromUint64(lamports).Shift(-9)
}

func TestASOLPaymentLandsOnceWithItsExactAmountAndFee(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	payee := newKey(t).SolanaAddress()
	before := r.balances(t, r.address())
	stx, u := r.sign(t, r.leg("SOL", "1.5", payee))
	var f solana.Fields
	if err := json.Unmarshal(u.Fields, &f); err != nil || f.FeePayer != r.address() || f.Instructions[2].Method != "transfer" {
		t.Fatalf("fields: %s (%v)", u.Fields, err)
	}
	if _, found, err := r.chain.Known(ctx, stx); err != nil || found {
		t.Fatalf("known before broadcast: %v %v", found, err)
	}
	id, err := r.chain.Broadcast(ctx, stx)
	if err != nil {
		t.Fatal(err)
	}
	if id != base58.Encode(stx.Signature) {
		t.Fatalf("the transaction's id %s is not its signature", id)
	}
	again, err := r.chain.Broadcast(ctx, stx)
	if err != nil || again != id {
		t.Fatalf("a second broadcast: %s %v", again, err)
	}
	if st := r.settle(t, id); st.State != chain.TxConfirmed || st.Confirmations < 1 {
		t.Fatalf("status: %+v", st)
	}
	if known, found, err := r.chain.Known(ctx, stx); err != nil || !found || known != id {
		t.Fatalf("known after broadcast: %s %v %v", known, found, err)
	}
	fee := r.fee(t, id)
	if fee.LessThan(decimal.RequireFromString("0.000005")) {
		t.Fatalf("fee %s is below a signature's", fee)
	}
	after := r.balances(t, r.address())
	if want := before["SOL"].Sub(decimal.RequireFromString("1.5")).Sub(fee); !after["SOL"].Equal(want) {
		t.Fatalf("the wallet holds %s SOL, want %s (sent once, fee %s)", after["SOL"], want, fee)
	}
	if got := r.balances(t, payee)["SOL"]; !got.Equal(decimal.RequireFromString("1.5")) {
		t.Fatalf("the payee holds %s SOL", got)
	}
}

func TestAUSDCPaymentCreatesTheRecipientsTokenAccount(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	payee := newKey(t).SolanaAddress()
	stx, u := r.sign(t, r.leg("USDC", "12.345678", payee))
	in, err := r.chain.Describe(r.leg("USDC", "12.345678", payee))
	if err != nil || in.Amount != "12345678" || in.Contract != r.info.USDCMint || in.To != payee {
		t.Fatalf("intent: %+v %v", in, err)
	}
	m, err := solana.DecodeMessage(u.Raw)
	if err != nil || m.FeePayer != r.address() || m.Signers != 1 || len(m.Instructions) != 4 {
		t.Fatalf("decoded: %+v %v", m, err)
	}
	if err := solana.CheckIntent(m, in); err != nil {
		t.Fatalf("the message does not do its own intent: %v", err)
	}
	other := in
	other.To = newKey(t).SolanaAddress()
	if err := solana.CheckIntent(m, other); err == nil {
		t.Fatal("the message passed for an intent paying someone else")
	}
	id, err := r.chain.Broadcast(ctx, stx)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.settle(t, id); st.State != chain.TxConfirmed {
		t.Fatalf("status: %+v", st)
	}
	if got := r.balances(t, payee)["USDC"]; !got.Equal(decimal.RequireFromString("12.345678")) {
		t.Fatalf("the payee holds %s USDC", got)
	}
	if got := r.balances(t, r.address())["USDC"]; !got.Equal(decimal.RequireFromString("987.654322")) {
		t.Fatalf("the wallet holds %s USDC", got)
	}
}

func TestAUSDCPaymentToTheFrozenAccountFailsWithTheProgramsError(t *testing.T) {
	r := newRig(t)
	stx, _ := r.sign(t, r.leg("USDC", "1", r.info.FrozenOwner))
	id, err := r.chain.Broadcast(context.Background(), stx)
	if err != nil {
		t.Fatal(err)
	}
	st := r.settle(t, id)
	if st.State != chain.TxFailed || !strings.Contains(st.Reason, "frozen") {
		t.Fatalf("status: %+v", st)
	}
	if got := r.balances(t, r.address())["USDC"]; !got.Equal(decimal.RequireFromString("1000")) {
		t.Fatalf("the wallet holds %s USDC after a failed transfer", got)
	}
}

func TestRefusalsBeforeAnythingIsSent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	payee := newKey(t).SolanaAddress()
	for _, c := range []struct {
		asset, amount string
		want          error
	}{
		{"USDC", "1000.000001", chain.ErrInsufficientFunds},
		{"SOL", "10", chain.ErrInsufficientFunds},                    // the fee on top
		{"SOL", "18446744073.709551615", chain.ErrInsufficientFunds}, // u64's most: the fee on top must not wrap
		{"USDC", "18446744073709.551616", chain.ErrAmountTooLarge},
		{"WBTC", "1", chain.ErrUnsupportedAsset},
	} {
		if _, err := r.chain.Prepare(ctx, r.leg(c.asset, c.amount, payee)); !errors.Is(err, c.want) {
			t.Errorf("%s %s: %v, want %v", c.amount, c.asset, err, c.want)
		}
	}
	if _, err := r.chain.Prepare(ctx, r.leg("SOL", "0.1", "0x1111111111111111111111111111111111111111")); err == nil {
		t.Error("an EVM address was taken as a Solana destination")
	}
	swap := r.leg("SOL", "1", payee)
	swap.Kind = "SWAP"
	if _, err := r.chain.Describe(swap); !errors.Is(err, chain.ErrUnsupportedAsset) {
		t.Errorf("a swap on Solana: %v", err)
	}

	// A signature that is not the wallet's over the message is never sent.
	stx, _ := r.sign(t, r.leg("SOL", "0.1", payee))
	stx.Signature = append([]byte(nil), stx.Signature...)
	stx.Signature[0] ^= 1
	if _, err := r.chain.Broadcast(ctx, stx); err == nil {
		t.Error("a tampered signature was broadcast")
	}
	if got := r.balances(t, payee)["SOL"]; !got.IsZero() {
		t.Errorf("the payee holds %s SOL", got)
	}
}

// TestATransactionPastItsBlockhashLapses: one signed too late is taken and never lands, and
// lapses once its blockhash is dead at the finalized block; one that landed never lapses.
func TestATransactionPastItsBlockhashLapses(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	payee := newKey(t).SolanaAddress()
	late, _ := r.sign(t, r.leg("SOL", "0.1", payee))
	lateID := base58.Encode(late.Signature)
	// Its blockhash has 150 slots ahead of it, and the finalized block 32 more.
	if lapsed, err := r.chain.Lapsed(ctx, "solana", lateID, late.Fields); err != nil || lapsed {
		t.Fatalf("a transaction just built: lapsed %v, %v", lapsed, err)
	}
	landed, _ := r.sign(t, r.leg("SOL", "0.2", payee))
	landedID, err := r.chain.Broadcast(ctx, landed)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.settle(t, landedID); st.State != chain.TxConfirmed {
		t.Fatalf("the transaction in time: %+v", st)
	}

	if err := r.node.AdvanceSlots(ctx, 152+32); err != nil {
		t.Fatal(err)
	}
	id, err := r.chain.Broadcast(ctx, late)
	if err != nil || id != lateID {
		t.Fatalf("broadcast past the blockhash's life: %q, %v; want %s taken (a leader drops it)", id, err, lateID)
	}
	if lapsed, err := r.chain.Lapsed(ctx, "solana", id, late.Fields); err != nil || !lapsed {
		t.Fatalf("a transaction past its blockhash at the finalized block: lapsed %v, %v", lapsed, err)
	}
	if lapsed, err := r.chain.Lapsed(ctx, "solana", landedID, landed.Fields); err != nil || lapsed {
		t.Fatalf("a transaction that landed: lapsed %v, %v", lapsed, err)
	}
	if got := r.balances(t, payee)["SOL"]; !got.Equal(decimal.RequireFromString("0.2")) {
		t.Fatalf("the payee holds %s SOL, want 0.2 (the late transfer never lands)", got)
	}
}

func TestDialRefusesAnotherClusterOrAMintOfOtherDecimals(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, err := solana.Dial(ctx, solana.Config{RPCURL: r.node.URL(), GenesisHash: "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d"}); err == nil {
		t.Error("a node of another cluster was taken")
	}
	if _, err := solana.Dial(ctx, solana.Config{RPCURL: r.node.URL(), Tokens: []solana.Token{{Symbol: "USDC", Mint: r.info.USDCMint, Decimals: 9}}}); err == nil {
		t.Error("a mint of 6 decimals was taken for 9")
	}
}

// The priority fee a transaction offers is the configured price, but never more than the
// cap: a price that would cost more is lowered to what the cap buys, and the node charges
// no more than the signature's fee and the cap.
func TestThePriorityFeeIsCapped(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		price, cap uint64
		capped     bool
	}{
		"under the cap": {price: 2_000, cap: 100_000},
		"over the cap":  {price: 1_000_000_000, cap: 20_000, capped: true},
	} {
		t.Run(name, func(t *testing.T) {
			ch, err := solana.Dial(ctx, solana.Config{RPCURL: r.node.URL(), Commitment: "confirmed", GenesisHash: r.info.GenesisHash,
				Tokens:                   []solana.Token{{Symbol: "USDC", Mint: r.info.USDCMint, Decimals: 6}},
				SlotTime:                 solana.Duration(50 * time.Millisecond),
				PriorityFeeMicroLamports: c.price, MaxPriorityFeeLamports: c.cap})
			if err != nil {
				t.Fatal(err)
			}
			priced := &rig{node: r.node, info: r.info, chain: ch, wallet: r.wallet}
			leg := priced.leg("SOL", "0.001", newKey(t).SolanaAddress())
			tx, u := priced.sign(t, leg)
			m, err := solana.DecodeMessage(u.Raw)
			if err != nil {
				t.Fatal(err)
			}
			priority := m.Fee() - 5_000
			switch {
			case !c.capped && m.ComputeUnitPrice != c.price:
				t.Fatalf("price %d, want the configured %d", m.ComputeUnitPrice, c.price)
			case c.capped && (m.ComputeUnitPrice >= c.price || priority > c.cap || priority < c.cap*9/10):
				t.Fatalf("price %d (priority %d lamports), want it lowered to what the cap of %d buys", m.ComputeUnitPrice, priority, c.cap)
			}
			id, err := ch.Broadcast(ctx, tx)
			if err != nil {
				t.Fatal(err)
			}
			if st := priced.settle(t, id); st.State != chain.TxConfirmed {
				t.Fatalf("status %+v", st)
			}
			if charged := priced.fee(t, id); charged.GreaterThan(decimal.NewFromUint64(5_000 + c.cap).Shift(-9)) {
				t.Fatalf("charged %s SOL, more than a signature and the cap", charged)
			}
		})
	}
}
