package apitypes

import "github.com/opentreasury/treasury/internal/events"

// Portfolio is the organisation's holdings in USD (GET /treasury/portfolio): its wallets ×
// their last synced balances × current prices, or a restricted key's wallets only.
type Portfolio struct {
	TotalUSD    string       `json:"totalUsd"`
	WalletCount int          `json:"walletCount"`
	ChainRollup []ChainValue `json:"chainRollup"`
	// SyncedAt is the wallets' last balance sync; null before the first.
	SyncedAt *events.Time `json:"syncedAt"`
	// UnpricedAssets are the assets held that the totals leave out, having no fresh USD
	// price (none, or a stale one); empty when every holding is valued.
	UnpricedAssets []string `json:"unpricedAssets"`
}

// ChainValue is the USD value held on one chain.
type ChainValue struct {
	Chain    string `json:"chain"`
	USDValue string `json:"usdValue"`
}

// WalletRef is a wallet as every app's read lists it (GET /api/v1/wallets): what names it,
// without its balances.
type WalletRef struct {
	ID      string `json:"id"`
	Chain   string `json:"chain"`
	Address string `json:"address"`
	// Scheme is what the wallet signs with: secp256k1 on EVM chains, ed25519 on Solana.
	Scheme string `json:"scheme"`
	Label  string `json:"label"`
}

// Wallet is one of the organisation's wallets. The service holds its public key only.
type Wallet struct {
	ID       string `json:"id"`
	Chain    string `json:"chain"`
	Address  string `json:"address"`
	Label    string `json:"label"`
	AutoSign bool   `json:"autoSign"`
	// PublicKey is the wallet's public key: base64 for ed25519, hex of the compressed key
	// for secp256k1 (whose signatures must recover to Address).
	PublicKey string `json:"publicKey"`
	// Scheme is what the wallet signs with: secp256k1 on EVM chains, ed25519 on Solana.
	Scheme    string       `json:"scheme"`
	USDValue  string       `json:"usdValue"`
	SyncedAt  *events.Time `json:"syncedAt"`
	CreatedAt events.Time  `json:"createdAt"`
	// ArchivedAt: the wallet takes no new orders; its history stays.
	ArchivedAt *events.Time `json:"archivedAt"`
}

// WalletChallenge is the message a wallet's key signs to register the wallet.
type WalletChallenge struct {
	ChallengeID string      `json:"challengeId"`
	Chain       string      `json:"chain"`
	Address     string      `json:"address"`
	Message     string      `json:"message"`
	ExpiresAt   events.Time `json:"expiresAt"`
}

// Position is what one wallet holds of one asset.
type Position struct {
	WalletID string `json:"walletId"`
	Chain    string `json:"chain"`
	Asset    string `json:"asset"`
	Amount   string `json:"amount"`
	// USDValue is null when the asset has no fresh price (none, or a stale one).
	USDValue *string `json:"usdValue"`
	// PriceAt is when the asset's price was set by its source; null when it has none.
	PriceAt  *events.Time `json:"priceAt"`
	SyncedAt events.Time  `json:"syncedAt"`
}
