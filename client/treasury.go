package client

import (
	"context"
	"iter"
	"time"
)

// Portfolio is the organisation's holdings in USD: its wallets × their last synced
// balances × current prices (or a restricted key's wallets only).
type Portfolio struct {
	TotalUSD    string       `json:"totalUsd"`
	WalletCount int          `json:"walletCount"`
	ChainRollup []ChainValue `json:"chainRollup"`
	// SyncedAt is the wallets' last balance sync; nil before the first.
	SyncedAt *time.Time `json:"syncedAt"`
}

// ChainValue is the USD value held on one chain.
type ChainValue struct {
	Chain    string `json:"chain"`
	USDValue string `json:"usdValue"`
}

// Wallet is one of the organisation's wallets. The service holds its public key only.
type Wallet struct {
	ID       string `json:"id"`
	Chain    string `json:"chain"`
	Address  string `json:"address"`
	Label    string `json:"label"`
	AutoSign bool   `json:"autoSign"`
	// PublicKey is the base64 ed25519 key that signatures of the wallet's signing requests
	// must verify against.
	PublicKey string     `json:"publicKey"`
	USDValue  string     `json:"usdValue"`
	SyncedAt  *time.Time `json:"syncedAt"`
	CreatedAt time.Time  `json:"createdAt"`
}

// Position is what one wallet holds of one asset.
type Position struct {
	WalletID string `json:"walletId"`
	Chain    string `json:"chain"`
	Asset    string `json:"asset"`
	Amount   string `json:"amount"`
	// USDValue is empty when the asset has no price.
	USDValue string    `json:"usdValue"`
	SyncedAt time.Time `json:"syncedAt"`
}

// Portfolio reads GET /treasury/portfolio (app treasury, action read).
func (c *Client) Portfolio(ctx context.Context, opts ...CallOption) (*Portfolio, error) {
	return get[Portfolio](ctx, c, "/treasury/portfolio", opts)
}

// ListWallets reads a page of GET /treasury/wallets.
func (c *Client) ListWallets(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[Wallet], error) {
	return list[Wallet](ctx, c, "/treasury/wallets", o.query(), opts)
}

// Wallets iterates over every wallet.
func (c *Client) Wallets(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[Wallet, error] {
	return all[Wallet](ctx, c, "/treasury/wallets", o.query(), "cursor", opts)
}

// ListPositions reads a page of GET /treasury/positions, ordered by wallet and asset.
func (c *Client) ListPositions(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[Position], error) {
	return list[Position](ctx, c, "/treasury/positions", o.query(), opts)
}

// Positions iterates over every position.
func (c *Client) Positions(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[Position, error] {
	return all[Position](ctx, c, "/treasury/positions", o.query(), "cursor", opts)
}
