// Package chain is the boundary to blockchains: the Adapter interface the workers use.
// A real chain integration implements it; devchain is the simulated one.
package chain

import (
	"context"
	"time"

	"github.com/shopspring/decimal"
)

// Adapter is what the service needs of a chain. A production deployment supplies an
// implementation backed by real nodes; the dev bundle uses Devchain.
type Adapter interface {
	// Balances returns every asset amount held by an address on a chain.
	Balances(ctx context.Context, chain, address string) (map[string]decimal.Decimal, error)
	// Broadcast submits a signed transaction and returns its hash. Broadcasting the same
	// signed transaction again returns the same hash and submits nothing new.
	Broadcast(ctx context.Context, tx SignedTx) (string, error)
	// Known reports whether the chain already has this signed transaction, and its hash:
	// a broadcast whose answer was lost (the worker died) is looked up, not sent again.
	Known(ctx context.Context, tx SignedTx) (hash string, found bool, err error)
	// Status reports where a broadcast transaction stands.
	Status(ctx context.Context, chain, hash string) (TxStatus, error)
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
	// Digest is the hex SHA-256 of the unsigned transaction; Signature signs it.
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
}
