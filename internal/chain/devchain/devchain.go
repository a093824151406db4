// Package devchain is a simulated chain for development and tests, behind chain.Adapter.
package devchain

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// RevertAddress is the destination whose transactions the devchain always reverts, so
// that integrators can exercise the failed path.
const RevertAddress = "0x000000000000000000000000000000000000dEaD"

// Chain is a SIMULATED chain: no network, no consensus. Its ledger and transactions
// live in the service's own database (tables devchain_accounts and devchain_transactions),
// so a restart loses nothing. A transaction confirms BlockTime × Confirmations after its
// broadcast; a TRANSFER then moves its amount between addresses, other leg kinds confirm
// without moving balances. It exists so the whole lifecycle runs on a laptop and in tests;
// replace it with a real Adapter for anything that moves real funds.
type Chain struct {
	store         *store.Store
	BlockTime     time.Duration
	Confirmations int
	Now           func() time.Time
}

// Chains are the chains the simulation knows.
var Chains = []string{"ethereum", "polygon", "solana"}

// New returns the simulated chain over the store: 200 ms blocks, 1 confirmation.
func New(s *store.Store) *Chain {
	return &Chain{store: s, BlockTime: 200 * time.Millisecond, Confirmations: 1, Now: time.Now}
}

func (d *Chain) known(chainName string) error {
	if !slices.Contains(Chains, chainName) {
		return fmt.Errorf("devchain: unknown chain %q", chainName)
	}
	return nil
}

// Balances reads an address's simulated balances.
func (d *Chain) Balances(ctx context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	if err := d.known(chainName); err != nil {
		return nil, err
	}
	return d.store.DevchainBalances(ctx, chainName, address)
}

// Fund credits an address on the simulated chain, as a faucet would.
func (d *Chain) Fund(ctx context.Context, chainName, address, asset string, amount decimal.Decimal) error {
	if err := d.known(chainName); err != nil {
		return err
	}
	if !amount.IsPositive() {
		return fmt.Errorf("devchain: fund amount must be positive, got %s", amount)
	}
	return d.store.DevchainCredit(ctx, chainName, address, asset, amount)
}

// Prepare describes the leg as the simulation signs it: the order's canonical payload
// and hash, the leg and the sender, as JSON, whose SHA-256 is the digest the wallet's key
// signs (ed25519 unless the wallet is a secp256k1 one). It takes no nonce.
// A transfer of more than the sender holds is refused (chain.ErrInsufficientFunds), as a
// real chain's node would refuse it.
func (d *Chain) Prepare(ctx context.Context, leg chain.Leg) (chain.Draft, error) {
	if err := d.known(leg.Chain); err != nil {
		return chain.Draft{}, err
	}
	if leg.Replaces != nil {
		return chain.Draft{}, fmt.Errorf("devchain: a simulated transaction is never stuck, and is never replaced")
	}
	if leg.Kind == "TRANSFER" {
		held, err := d.store.DevchainBalances(ctx, leg.Chain, leg.From)
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

// Describe says what the simulated leg moves: a payment to its destination, any other
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
// same signed transaction always has the same hash.
func (d *Chain) Broadcast(ctx context.Context, tx chain.SignedTx) (string, error) {
	if err := d.known(tx.Chain); err != nil {
		return "", err
	}
	if len(tx.Signature) == 0 || tx.Digest == "" {
		return "", fmt.Errorf("devchain: transaction is not signed")
	}
	now := d.Now().UTC()
	stored, err := d.store.DevchainBroadcast(ctx, &store.DevchainTransaction{
		Hash: txHash(tx), Chain: tx.Chain, Digest: tx.Digest, Kind: tx.Kind,
		FromAddress: tx.From, ToAddress: tx.To, Asset: tx.Asset, Amount: tx.Amount,
		BroadcastAt: now, ConfirmsAt: now.Add(d.BlockTime * time.Duration(max(d.Confirmations, 1))),
	})
	if err != nil {
		return "", err
	}
	return stored.Hash, nil
}

// Known looks the signed transaction up by its hash.
func (d *Chain) Known(ctx context.Context, tx chain.SignedTx) (string, bool, error) {
	if err := d.known(tx.Chain); err != nil {
		return "", false, err
	}
	hash := txHash(tx)
	found, err := d.store.DevchainTransactions(ctx, []string{tx.Digest})
	if err != nil {
		return "", false, err
	}
	for _, t := range found {
		if t.Hash == hash {
			return hash, true, nil
		}
	}
	return "", false, nil
}

// txHash is a transaction's hash: derived from the signed payload, as on a real chain.
func txHash(tx chain.SignedTx) string {
	sum := sha256.Sum256(append([]byte(tx.Chain+":"+tx.Digest+":"), tx.Signature...))
	return "0x" + hex.EncodeToString(sum[:])
}

// Lapsed is always false: the simulated chain's transactions do not expire.
func (d *Chain) Lapsed(context.Context, string, string, json.RawMessage) (bool, error) {
	return false, nil
}

// Status settles the transaction if its time has come and reports it.
func (d *Chain) Status(ctx context.Context, chainName, hash string) (chain.TxStatus, error) {
	now := d.Now().UTC()
	t, err := d.store.DevchainSettle(ctx, hash, now, func(t *store.DevchainTransaction) string {
		if strings.EqualFold(t.ToAddress, RevertAddress) {
			return "reverted: destination " + RevertAddress + " always reverts on the devchain"
		}
		return ""
	})
	if err != nil {
		return chain.TxStatus{}, err
	}
	if t.Chain != chainName {
		return chain.TxStatus{}, fmt.Errorf("devchain: %s is not a transaction on %s", hash, chainName)
	}
	blocks := 0
	if d.BlockTime > 0 {
		blocks = int(now.Sub(t.BroadcastAt) / d.BlockTime)
	}
	switch t.Status {
	case store.DevchainConfirmed:
		return chain.TxStatus{State: chain.TxConfirmed, Confirmations: max(blocks, d.Confirmations)}, nil
	case store.DevchainFailed:
		return chain.TxStatus{State: chain.TxFailed, Reason: t.Failure}, nil
	default:
		return chain.TxStatus{State: chain.TxPending, Confirmations: min(blocks, max(d.Confirmations-1, 0)), Expected: t.ConfirmsAt}, nil
	}
}
