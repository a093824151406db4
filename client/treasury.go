package client

import (
	"context"
	"iter"

	"github.com/opentreasury/treasury/apitypes"
)

// Portfolio is the organisation's holdings in USD: its wallets × their last synced
// balances × current prices (or a restricted key's wallets only).
type Portfolio = apitypes.Portfolio

// ChainValue is the USD value held on one chain.
type ChainValue = apitypes.ChainValue

// Wallet is one of the organisation's wallets. The service holds its public key only.
type Wallet = apitypes.Wallet

// Position is what one wallet holds of one asset.
type Position = apitypes.Position

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
