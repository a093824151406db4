// Package chain is the boundary to blockchains: the Adapter interface the workers use.
// evm implements it for EVM chains over JSON-RPC, solana for Solana; fakechain is an
// in-memory one for tests that need no chain.
package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"

	"github.com/shopspring/decimal"
)

// Adapter is what the service needs of a chain.
type Adapter interface {
	// Balances returns every asset amount held by an address on a chain.
	Balances(ctx context.Context, chain, address string) (map[string]decimal.Decimal, error)
	// Prepare builds the transaction of one leg up to its nonce: what it calls, its value,
	// its gas and fees, read from the chain now. It writes nothing anywhere.
	Prepare(ctx context.Context, leg Leg) (Draft, error)
	// Broadcast submits a signed transaction and returns its hash. Broadcasting the same
	// signed transaction again returns the same hash and submits nothing new.
	Broadcast(ctx context.Context, tx SignedTx) (string, error)
	// Known reports whether the chain already has this signed transaction, and its hash:
	// a broadcast whose answer was lost (the worker died) is looked up, not sent again.
	Known(ctx context.Context, tx SignedTx) (hash string, found bool, err error)
	// Status reports where a broadcast transaction stands.
	Status(ctx context.Context, chain, hash string) (TxStatus, error)
	// Lapsed reports that a broadcast transaction (its hash, and the readable transaction
	// it was built as, Unsigned.Fields) can never land: its life on the chain ended before
	// it did. It is then built again and signed again, with no risk that both land. Known
	// from the chain, never guessed: on Solana, the finalized block height is past its
	// blockhash's last valid one and the chain has no status for it. Transactions of a chain
	// that do not expire (an EVM nonce keeps its transaction valid) never lapse.
	Lapsed(ctx context.Context, chain, hash string, fields json.RawMessage) (bool, error)
	// Describe says what a leg will do on the chain, from the chain's configuration alone
	// (no node is asked): the intent approvers sign and a signer checks the transaction
	// against.
	Describe(leg Leg) (Intent, error)
}

// Intent is one leg as its chain carries it (SPEC 3.5a): who receives what it moves (the
// payee; for a swap, a vault or a loan the wallet itself; for an approve the spender), the
// asset and the amount in its base units, and the contract and method it calls, if any.
// Addresses are as the chain writes them (EIP-55 on EVM chains).
type Intent struct {
	Leg      string `json:"leg"`
	To       string `json:"to"`
	Asset    string `json:"asset"`
	Amount   string `json:"amount"`
	Contract string `json:"contract,omitempty"`
	Method   string `json:"method,omitempty"`
	// Recipients, for a part of a batch payment, are who it pays and how much each, in base
	// units, in the order the transaction pays them; To is then the batch's contract and
	// Amount their total.
	Recipients []IntentPayee `json:"recipients,omitempty"`
	// Token, for a batch of an ERC-20, is the token's contract.
	Token string `json:"token,omitempty"`
}

// IntentPayee is one recipient of a batch payment's part, as its chain carries it.
type IntentPayee struct {
	To     string `json:"to"`
	Amount string `json:"amount"`
}

// Payee is one recipient of a batch payment's part: its address and amount.
type Payee struct {
	To     string
	Amount decimal.Decimal
}

// Signature schemes of wallets (SPEC 3.5).
const (
	// Secp256k1 signs EVM transactions: 65 bytes r‖s‖v over the EIP-1559 signing hash.
	Secp256k1 = "secp256k1"
	// Ed25519 signs Solana transactions: 64 bytes over the serialized message.
	Ed25519 = "ed25519"
)

// Leg is what one leg of an order asks of the chain.
type Leg struct {
	Chain    string
	OrderID  string
	Position int
	// Kind is the leg: TRANSFER, APPROVE, SWAP, DEPOSIT, WITHDRAW, CLAIM, DRAW, REPAY.
	Kind string
	// From is the wallet's address; Scheme what it signs with.
	From   string
	Scheme string
	// Asset and Amount are the leg's asset and amount (a trade's sell side).
	Asset  string
	Amount decimal.Decimal
	// To is a payment's destination.
	To string
	// Recipients, for a part of a batch payment, are the recipients it pays, in order;
	// Amount is then their total and To is empty.
	Recipients []Payee
	// BuyAsset and MaxSlippageBps are a trade's.
	BuyAsset       string
	MaxSlippageBps int
	// Protocol names an Earn or Borrow venue.
	Protocol string
	// Payload and PayloadHash are the order's canonical payload: the tests' fake chain signs
	// over them; a real chain's transaction is derived from the fields above.
	Payload     json.RawMessage
	PayloadHash string
	// Replaces, when set, is the readable transaction (Unsigned.Fields) of the leg's
	// broadcast transaction that is stuck below the fee market: Prepare then builds its
	// replacement, the same call at the same nonce for a higher fee. A chain without a fee
	// market refuses.
	Replaces json.RawMessage
}

// Draft is a leg's transaction before its nonce is fixed. The nonce is assigned inside
// the step that records the signing request, so a retried step takes no second nonce.
type Draft struct {
	Chain  string
	Scheme string
	// Nonced reports that the transaction carries an account nonce, assigned by the store
	// per address, never below NonceFloor (what the chain has already mined from it).
	Nonced     bool
	NonceFloor uint64
	// Seal completes the transaction with its nonce (ignored when not Nonced).
	Seal func(nonce uint64) (Unsigned, error) `json:"-"`
}

// Unsigned is a transaction ready to sign.
type Unsigned struct {
	Scheme string
	// Fields is the transaction in readable JSON; with the signature it is all a broadcast
	// needs, so what is broadcast is exactly what was signed.
	Fields json.RawMessage
	// Raw is the transaction's unsigned bytes, the form a signer decodes itself instead of
	// trusting Fields: on an EVM chain the EIP-1559 unsigned RLP (0x02 ‖ rlp(fields)),
	// whose Keccak-256 is Digest; on Solana the serialized message, whose SHA-256 is Digest
	// (on the tests' fake chain the bytes of Fields).
	Raw []byte
	// Digest is the hex of the 32 bytes to sign.
	Digest string
	Nonce  *uint64
}

// SignedTx is a signed transaction of one order leg.
type SignedTx struct {
	Chain string
	// Kind is the leg: TRANSFER, APPROVE, SWAP, DEPOSIT, WITHDRAW, CLAIM, DRAW, REPAY.
	Kind   string
	From   string
	To     string
	Asset  string
	Amount decimal.Decimal
	// Fields and Digest are the signing request's: the transaction as prepared, and the
	// hex of the 32 bytes Signature signs.
	Fields    json.RawMessage
	Digest    string
	Signature []byte
}

// TxState is the life of a broadcast transaction.
type TxState string

const (
	TxPending   TxState = "pending"
	TxConfirmed TxState = "confirmed"
	TxFailed    TxState = "failed"
)

// TxStatus is a transaction's state, its confirmations, and why it failed.
type TxStatus struct {
	State         TxState
	Confirmations int
	Reason        string
	// Expected, for a pending transaction, is when the chain expects it final (the block
	// that will hold its last confirmation), if it can tell; zero otherwise. Callers
	// waiting on the transaction ask again then rather than on a fixed poll.
	Expected time.Time
	// Underpriced, for a pending transaction not yet mined, reports that it cannot be: its
	// fee is below what the chain's blocks now ask, or the node no longer holds it.
	Underpriced bool
	// Dropped, for a pending transaction, reports that the node no longer holds it (it is
	// Underpriced too): sent again as signed, it may be taken back.
	Dropped bool
}

// ErrNonceUsed is a broadcast refused because the chain has already mined another
// transaction at its nonce: for a replacement, the transaction it replaces.
var ErrNonceUsed = errors.New("chain: the chain has already mined a transaction at this nonce")

// Errors of a leg that no retry fixes: Prepare wraps them, and the order fails with a code
// of its own instead of retrying its step.
var (
	// ErrInsufficientFunds: the wallet holds less than the leg spends (its asset, or the
	// native asset its fee is paid in).
	ErrInsufficientFunds = errors.New("chain: the wallet holds less than the leg spends")
	// ErrUnsupportedAsset: the chain's configuration has no such asset (or no venue for it).
	ErrUnsupportedAsset = errors.New("chain: the chain's configuration has no such asset")
	// ErrAmountTooLarge: the amount's base units do not fit the integer the chain carries
	// amounts in; encoded anyway, it would be another amount.
	ErrAmountTooLarge = errors.New("chain: the amount does not fit the chain's integer")
)

// BaseUnits converts a decimal amount to an asset's base units, exactly: an amount finer
// than the asset's decimals is an error, never a rounding, and so is a negative one. Each
// adapter then checks that the result fits the integer its chain carries amounts in.
func BaseUnits(amount decimal.Decimal, decimals int32) (*big.Int, error) {
	shifted := amount.Shift(decimals)
	if !shifted.Equal(shifted.Truncate(0)) {
		return nil, fmt.Errorf("chain: %s has more than %d decimal places", amount, decimals)
	}
	if shifted.IsNegative() {
		return nil, fmt.Errorf("chain: %s is negative", amount)
	}
	return shifted.BigInt(), nil
}

// ErrUnknownChain is returned for a chain no adapter serves.
var ErrUnknownChain = errors.New("chain: no adapter serves this chain")

// Router serves each chain by the adapter configured for it.
type Router map[string]Adapter

// For returns the adapter of a chain.
func (r Router) For(name string) (Adapter, error) {
	if a, ok := r[name]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownChain, name)
}

func (r Router) Balances(ctx context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	a, err := r.For(chainName)
	if err != nil {
		return nil, err
	}
	return a.Balances(ctx, chainName, address)
}

func (r Router) Describe(leg Leg) (Intent, error) {
	a, err := r.For(leg.Chain)
	if err != nil {
		return Intent{}, err
	}
	return a.Describe(leg)
}

func (r Router) Prepare(ctx context.Context, leg Leg) (Draft, error) {
	a, err := r.For(leg.Chain)
	if err != nil {
		return Draft{}, err
	}
	return a.Prepare(ctx, leg)
}

func (r Router) Broadcast(ctx context.Context, tx SignedTx) (string, error) {
	a, err := r.For(tx.Chain)
	if err != nil {
		return "", err
	}
	return a.Broadcast(ctx, tx)
}

func (r Router) Known(ctx context.Context, tx SignedTx) (string, bool, error) {
	a, err := r.For(tx.Chain)
	if err != nil {
		return "", false, err
	}
	return a.Known(ctx, tx)
}

func (r Router) Lapsed(ctx context.Context, chainName, hash string, fields json.RawMessage) (bool, error) {
	a, err := r.For(chainName)
	if err != nil {
		return false, err
	}
	return a.Lapsed(ctx, chainName, hash, fields)
}

func (r Router) Status(ctx context.Context, chainName, hash string) (TxStatus, error) {
	a, err := r.For(chainName)
	if err != nil {
		return TxStatus{}, err
	}
	return a.Status(ctx, chainName, hash)
}

// PriceRound is the latest round of a USD price feed: its answer scaled by the feed's own
// decimals, the round's id and when the feed last updated it.
type PriceRound struct {
	Round     string
	Answer    decimal.Decimal
	UpdatedAt time.Time
}

// FeedReader reads price feeds on a chain: Chainlink AggregatorV3 feeds on EVM chains.
type FeedReader interface {
	LatestRound(ctx context.Context, feed string) (PriceRound, error)
}

// ErrNoFeedReader means no adapter of the chain reads price feeds.
var ErrNoFeedReader = errors.New("chain: no adapter of this chain reads price feeds")

// LatestRound reads a feed on a chain, through that chain's adapter.
func (r Router) LatestRound(ctx context.Context, chainName, feed string) (PriceRound, error) {
	a, err := r.For(chainName)
	if err != nil {
		return PriceRound{}, err
	}
	f, ok := a.(FeedReader)
	if !ok {
		return PriceRound{}, fmt.Errorf("%w: %s", ErrNoFeedReader, chainName)
	}
	return f.LatestRound(ctx, feed)
}

// Simulation is what a chain's node says an order's legs would do on its latest state, run
// one after another without being sent (SPEC 3.3): approvers see it beside the statement.
type Simulation struct {
	// At is when it ran; Block the block whose state it ran on.
	At    string         `json:"at"`
	Block uint64         `json:"block,omitempty"`
	Legs  []SimulatedLeg `json:"legs"`
	// Error, when the node could not run the legs, says why; Legs is then empty.
	Error string `json:"error,omitempty"`
}

// SimulatedLeg is one leg's simulated run: whether it reverted (and why), its gas, and
// every address's net change in every asset it moved.
type SimulatedLeg struct {
	Leg            string          `json:"leg"`
	Reverted       bool            `json:"reverted"`
	Reason         string          `json:"reason,omitempty"`
	GasUsed        uint64          `json:"gasUsed"`
	BalanceChanges []BalanceChange `json:"balanceChanges"`
}

// BalanceChange is an address's net change in one asset: Asset is the symbol the chain's
// configuration gives it (a token it does not name is its contract's address), Amount
// the signed change in the asset's units and BaseUnits in its base units (for an unnamed
// token, both are base units).
type BalanceChange struct {
	Address   string `json:"address"`
	Asset     string `json:"asset"`
	Amount    string `json:"amount"`
	BaseUnits string `json:"baseUnits"`
}

// Simulator is an adapter whose node can run legs without sending them.
type Simulator interface {
	Simulate(ctx context.Context, legs []Leg) (Simulation, error)
}

// ErrNoSimulator means no adapter of the chain simulates.
var ErrNoSimulator = errors.New("chain: no adapter of this chain simulates transactions")

// Simulate runs an order's legs, all of one chain, through that chain's adapter.
func (r Router) Simulate(ctx context.Context, legs []Leg) (Simulation, error) {
	if len(legs) == 0 {
		return Simulation{}, errors.New("chain: no legs to simulate")
	}
	a, err := r.For(legs[0].Chain)
	if err != nil {
		return Simulation{}, err
	}
	s, ok := a.(Simulator)
	if !ok {
		return Simulation{}, fmt.Errorf("%w: %s", ErrNoSimulator, legs[0].Chain)
	}
	return s.Simulate(ctx, legs)
}

// RedactURL is err's text without the URL a transport error quotes: a node's URL often
// carries the provider's API key.
func RedactURL(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Op + " (node URL): " + u.Err.Error()
	}
	return err.Error()
}
