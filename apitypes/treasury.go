package apitypes

import "github.com/opentreasury/treasury/events"

// Portfolio is the organisation's holdings in USD (GET /treasury/portfolio): its wallets ×
// their last synced balances × current prices, or a restricted key's wallets only.
type Portfolio struct {
	TotalUSD    string       `json:"totalUsd"`
	WalletCount int          `json:"walletCount"`
	ChainRollup []ChainValue `json:"chainRollup"`
	// SyncedAt is the wallets' last balance sync; null before the first.
	SyncedAt *events.Time `json:"syncedAt"`
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
	PublicKey string       `json:"publicKey"`
	USDValue  string       `json:"usdValue"`
	SyncedAt  *events.Time `json:"syncedAt"`
	CreatedAt events.Time  `json:"createdAt"`
}

// Position is what one wallet holds of one asset.
type Position struct {
	WalletID string `json:"walletId"`
	Chain    string `json:"chain"`
	Asset    string `json:"asset"`
	Amount   string `json:"amount"`
	// USDValue is null when the asset has no price.
	USDValue *string     `json:"usdValue"`
	SyncedAt events.Time `json:"syncedAt"`
}
