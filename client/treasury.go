package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"

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

// WalletChallenge is the message a wallet's key signs to register the wallet.
type WalletChallenge = apitypes.WalletChallenge

// WalletRegistration is a wallet and the signature of its challenge by the wallet's key.
type WalletRegistration struct {
	Chain       string `json:"chain"`
	Address     string `json:"address,omitempty"`
	PublicKey   string `json:"publicKey,omitempty"`
	Label       string `json:"label"`
	ChallengeID string `json:"challengeId"`
	Signature   string `json:"signature"`
}

// WalletChallenge asks for the message that registers a wallet (POST
// /treasury/wallets/challenges): sign it with the wallet's key, then RegisterWallet.
func (c *Client) WalletChallenge(ctx context.Context, chain, address string, opts ...CallOption) (*WalletChallenge, error) {
	return do[WalletChallenge](ctx, c, http.MethodPost, "/treasury/wallets/challenges",
		map[string]string{"chain": chain, "address": address}, opts)
}

// RegisterWallet registers a wallet with the signature of its challenge (POST
// /treasury/wallets).
func (c *Client) RegisterWallet(ctx context.Context, r WalletRegistration, opts ...CallOption) (*Wallet, error) {
	return do[Wallet](ctx, c, http.MethodPost, "/treasury/wallets", r, opts)
}

// RelabelWallet changes a wallet's label (PATCH /treasury/wallets/{id}).
func (c *Client) RelabelWallet(ctx context.Context, id, label string, opts ...CallOption) (*Wallet, error) {
	return do[Wallet](ctx, c, http.MethodPatch, "/treasury/wallets/"+url.PathEscape(id), map[string]string{"label": label}, opts)
}

// ArchiveWallet stops a wallet taking new orders (POST /treasury/wallets/{id}/archive).
func (c *Client) ArchiveWallet(ctx context.Context, id string, opts ...CallOption) (*Wallet, error) {
	return do[Wallet](ctx, c, http.MethodPost, "/treasury/wallets/"+url.PathEscape(id)+"/archive", nil, opts)
}
