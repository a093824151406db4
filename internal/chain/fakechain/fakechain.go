// Package fakechain is an in-memory chain for tests that need no chain, behind
// chain.Adapter. Nothing serves it: the treasury and its dev bundle run every chain on a
// real adapter.
package fakechain

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
)

// RevertAddress is the destination whose transactions the fake always reverts, as the dev
// chains' 0x…dEaD does.
const RevertAddress = "0x000000000000000000000000000000000000dEaD"

// Chain is a FAKE chain held in memory: no network, no consensus, lost with the process.
// A transaction confirms BlockTime × Confirmations after its broadcast; a TRANSFER then
// moves its amount between addresses, other leg kinds confirm without moving balances.
type Chain struct {
	BlockTime     time.Duration
	Confirmations int
	Now           func() time.Time

	mu       sync.Mutex
	balances map[account]decimal.Decimal
	txs      map[string]*Transaction
	byDigest map[string]string
}

type account struct{ chain, address, asset string }

// Transaction is one transaction on the fake chain.
type Transaction struct {
	Hash, Chain, Digest, Kind, From, To, Asset string
	Amount                                     decimal.Decimal
	State                                      chain.TxState
	Failure                                    string
	BroadcastAt, ConfirmsAt                    time.Time
	// Submissions counts the broadcasts of this same signed transaction (retries).
	Submissions int
}

// Chains are the chains the fake knows.
var Chains = []string{"ethereum", "polygon", "solana"}

// New returns an empty fake chain: 200 ms blocks, 1 confirmation.
func New() *Chain {
	return &Chain{BlockTime: 200 * time.Millisecond, Confirmations: 1, Now: time.Now,
		balances: map[account]decimal.Decimal{}, txs: map[string]*Transaction{}, byDigest: map[string]string{}}
}

// Holdings are what each address holds on a chain, by asset (store.ChainHoldings).
type Holdings func(ctx context.Context, chainName string) (map[string]map[string]decimal.Decimal, error)

// NewFunded returns a fake chain whose addresses hold, on every chain, what holdings say:
// over a seeded store, the seeded wallets' balances.
func NewFunded(ctx context.Context, holdings Holdings) (*Chain, error) {
	d := New()
	for _, name := range Chains {
		held, err := holdings(ctx, name)
		if err != nil {
			return nil, err
		}
		for address, assets := range held {
			for asset, amount := range assets {
				if amount.IsPositive() {
					d.balances[account{name, address, asset}] = amount
				}
			}
		}
	}
	return d, nil
}

func (d *Chain) known(chainName string) error {
	if !slices.Contains(Chains, chainName) {
		return fmt.Errorf("fakechain: unknown chain %q", chainName)
	}
	return nil
}

// Balances reads an address's balances.
func (d *Chain) Balances(_ context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	if err := d.known(chainName); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]decimal.Decimal{}
	for a, amount := range d.balances {
		if a.chain == chainName && a.address == address {
			out[a.asset] = amount
		}
	}
	return out, nil
}

// Fund credits an address, as a faucet would.
func (d *Chain) Fund(_ context.Context, chainName, address, asset string, amount decimal.Decimal) error {
	if err := d.known(chainName); err != nil {
		return err
	}
	if !amount.IsPositive() {
		return fmt.Errorf("fakechain: fund amount must be positive, got %s", amount)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	a := account{chainName, address, asset}
	d.balances[a] = d.balances[a].Add(amount)
	return nil
}

// Prepare describes the leg as the fake signs it: the order's canonical payload
// and hash, the leg and the sender, as JSON, whose SHA-256 is the digest the wallet's key
// signs (ed25519 unless the wallet is a secp256k1 one). It takes no nonce.
// A transfer of more than the sender holds is refused (chain.ErrInsufficientFunds), as a
// real chain's node would refuse it.
func (d *Chain) Prepare(ctx context.Context, leg chain.Leg) (chain.Draft, error) {
	if err := d.known(leg.Chain); err != nil {
		return chain.Draft{}, err
	}
	if leg.Replaces != nil {
		return chain.Draft{}, fmt.Errorf("fakechain: a fake transaction is never stuck, and is never replaced")
	}
	if leg.Kind == "TRANSFER" {
		held, err := d.Balances(ctx, leg.Chain, leg.From)
		if err != nil {
			return chain.Draft{}, err
		}
		if held[leg.Asset].LessThan(leg.Amount) {
			return chain.Draft{}, fmt.Errorf("%w: %s holds %s %s, the transfer sends %s", chain.ErrInsufficientFunds,
				leg.From, held[leg.Asset], leg.Asset, leg.Amount)
		}
	}
	fields, err := json.Marshal(map[string]any{"chain": leg.Chain, "from": leg.From, "leg": leg.Kind, "position": leg.Position,
		"payloadHash": leg.PayloadHash, "payload": leg.Payload})
	if err != nil {
		return chain.Draft{}, err
	}
	sum := sha256.Sum256(fields)
	scheme := cmp.Or(leg.Scheme, chain.Ed25519)
	unsigned := chain.Unsigned{Scheme: scheme, Fields: fields, Raw: fields, Digest: hex.EncodeToString(sum[:])}
	return chain.Draft{Chain: leg.Chain, Scheme: scheme,
		Seal: func(uint64) (chain.Unsigned, error) { return unsigned, nil }}, nil
}

// Describe says what the fake leg moves: a payment to its destination, any other
// leg to the wallet itself, in the asset's base units (orders.AssetDecimals). It calls no
// contract.
func (d *Chain) Describe(leg chain.Leg) (chain.Intent, error) {
	if err := d.known(leg.Chain); err != nil {
		return chain.Intent{}, err
	}
	places, ok := orders.AssetDecimals[leg.Asset]
	if !ok && leg.Kind != "CLAIM" {
		return chain.Intent{}, fmt.Errorf("%w: %s", chain.ErrUnsupportedAsset, leg.Asset)
	}
	to := leg.From
	if leg.Kind == "TRANSFER" {
		to = leg.To
	}
	return chain.Intent{Leg: leg.Kind, To: to, Asset: leg.Asset, Amount: leg.Amount.Shift(places).Truncate(0).String()}, nil
}

// Broadcast records the transaction; its hash is derived from the signed payload, so the
// same signed transaction always has the same hash, and is one transaction.
func (d *Chain) Broadcast(_ context.Context, tx chain.SignedTx) (string, error) {
	if err := d.known(tx.Chain); err != nil {
		return "", err
	}
	if len(tx.Signature) == 0 || tx.Digest == "" {
		return "", fmt.Errorf("fakechain: transaction is not signed")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if hash, ok := d.byDigest[tx.Digest]; ok {
		d.txs[hash].Submissions++
		return hash, nil
	}
	now := d.Now().UTC()
	t := &Transaction{Hash: txHash(tx), Chain: tx.Chain, Digest: tx.Digest, Kind: tx.Kind, From: tx.From, To: tx.To,
		Asset: tx.Asset, Amount: tx.Amount, State: chain.TxPending, BroadcastAt: now,
		ConfirmsAt: now.Add(d.BlockTime * time.Duration(max(d.Confirmations, 1))), Submissions: 1}
	d.txs[t.Hash], d.byDigest[t.Digest] = t, t.Hash
	return t.Hash, nil
}

// Known looks the signed transaction up by its hash.
func (d *Chain) Known(_ context.Context, tx chain.SignedTx) (string, bool, error) {
	if err := d.known(tx.Chain); err != nil {
		return "", false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	hash := txHash(tx)
	_, found := d.txs[hash]
	if !found {
		hash = ""
	}
	return hash, found, nil
}

// Transaction returns a copy of the transaction of a signed digest, nil if none.
func (d *Chain) Transaction(digest string) *Transaction {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.txs[d.byDigest[digest]]
	if !ok {
		return nil
	}
	c := *t
	return &c
}

// txHash is a transaction's hash: derived from the signed payload, as on a real chain.
func txHash(tx chain.SignedTx) string {
	sum := sha256.Sum256(append([]byte(tx.Chain+":"+tx.Digest+":"), tx.Signature...))
	return "0x" + hex.EncodeToString(sum[:])
}

// Lapsed is always false: the fake's transactions do not expire.
func (d *Chain) Lapsed(context.Context, string, string, json.RawMessage) (bool, error) {
	return false, nil
}

// Status settles the transaction if its time has come and reports it.
func (d *Chain) Status(_ context.Context, chainName, hash string) (chain.TxStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.txs[hash]
	if !ok || t.Chain != chainName {
		return chain.TxStatus{}, fmt.Errorf("fakechain: %s is not a transaction on %s", hash, chainName)
	}
	now := d.Now().UTC()
	if t.State == chain.TxPending && !now.Before(t.ConfirmsAt) {
		d.settle(t)
	}
	blocks := 0
	if d.BlockTime > 0 {
		blocks = int(now.Sub(t.BroadcastAt) / d.BlockTime)
	}
	switch t.State {
	case chain.TxConfirmed:
		return chain.TxStatus{State: chain.TxConfirmed, Confirmations: max(blocks, d.Confirmations)}, nil
	case chain.TxFailed:
		return chain.TxStatus{State: chain.TxFailed, Reason: t.Failure}, nil
	default:
		return chain.TxStatus{State: chain.TxPending, Confirmations: min(blocks, max(d.Confirmations-1, 0)), Expected: t.ConfirmsAt}, nil
	}
}

// settle confirms a transaction whose time has come, applying its transfer once, or fails
// it: sent to RevertAddress, or more than its sender holds.
func (d *Chain) settle(t *Transaction) {
	if strings.EqualFold(t.To, RevertAddress) {
		t.State, t.Failure = chain.TxFailed, "reverted: destination "+RevertAddress+" always reverts"
		return
	}
	if t.Kind == "TRANSFER" {
		from, to := account{t.Chain, t.From, t.Asset}, account{t.Chain, t.To, t.Asset}
		if d.balances[from].LessThan(t.Amount) {
			t.State, t.Failure = chain.TxFailed, "insufficient funds"
			return
		}
		d.balances[from] = d.balances[from].Sub(t.Amount)
		d.balances[to] = d.balances[to].Add(t.Amount)
	}
	t.State = chain.TxConfirmed
}
