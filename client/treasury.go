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

// WalletRef is a wallet as every app's read lists it: what names it, no balances.
type WalletRef = apitypes.WalletRef

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

// ListWalletRefs reads a page of GET /wallets: the organisation's wallets as any app's read
// key lists them (a payout job finds the walletId it pays from here); a key restricted to
// some wallets lists those.
func (c *Client) ListWalletRefs(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[WalletRef], error) {
	return list[WalletRef](ctx, c, "/wallets", o.query(), opts)
}

// WalletRefs iterates over every wallet GET /wallets lists.
func (c *Client) WalletRefs(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[WalletRef, error] {
	return all[WalletRef](ctx, c, "/wallets", o.query(), "cursor", opts)
}

// ListPositions reads a page of GET /treasury/positions, ordered by wallet and asset.
func (c *Client) ListPositions(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[Position], error) {
	return list[Position](ctx, c, "/treasury/positions", o.query(), opts)
}

// Positions iterates over every position.
func (c *Client) Positions(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[Position, error] {
	return all[Position](ctx, c, "/treasury/positions", o.query(), "cursor", opts)
}
