package solana

import (
	"fmt"
	"time"

	sol "github.com/gagliardetto/solana-go"

	"github.com/opentreasury/treasury/internal/chain"
)

// Config describes the Solana chain: where its node is and which SPL mints it pays in.
type Config struct {
	// Name is the chain's name in the API: solana.
	Name   string `json:"name"`
	RPCURL string `json:"rpcUrl"`
	// GenesisHash, when set, is checked against the node's at start (mainnet-beta's is
	// 5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d): a node of another cluster refuses to
	// start the service instead of paying on the wrong chain.
	GenesisHash string `json:"genesisHash,omitempty"`
	// Commitment is the level at which a transaction counts as confirmed: processed,
	// confirmed or finalized (default finalized).
	Commitment string `json:"commitment"`
	// Tokens are the SPL mints, by symbol; each mint's decimals are checked at start.
	Tokens []Token `json:"tokens"`
	// PriorityFeeMicroLamports is the least price per compute unit a transaction offers
	// (default 1,000); the node's recent fees raise it up to MaxPriorityFeeLamports.
	PriorityFeeMicroLamports uint64 `json:"priorityFeeMicroLamports"`
	// MaxPriorityFeeLamports caps the priority fee of one transaction (default 100,000
	// lamports, 0.0001 SOL): a fee market above it is paid at the cap, never more.
	MaxPriorityFeeLamports uint64 `json:"maxPriorityFeeLamports"`
	// SlotTime is the cluster's usual slot interval, for telling when a pending transaction
	// is expected final (default 400 ms).
	SlotTime Duration `json:"slotTime"`
}

// Token is one SPL mint.
type Token struct {
	Symbol   string `json:"symbol"`
	Mint     string `json:"mint"`
	Decimals int32  `json:"decimals"`
}

// MainnetUSDC is Circle's USDC mint on mainnet-beta.
var MainnetUSDC = Token{Symbol: "USDC", Mint: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", Decimals: 6}

// Duration reads "400ms" from JSON.
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// The commitment levels, in the order a transaction reaches them.
var commitments = map[string]int{"processed": 0, "confirmed": 1, "finalized": 2}

// withDefaults fills what the configuration left unset and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = "solana"
	}
	if c.RPCURL == "" {
		return c, fmt.Errorf("solana: %s needs an rpcUrl", c.Name)
	}
	if c.Commitment == "" {
		c.Commitment = "finalized"
	}
	if _, ok := commitments[c.Commitment]; !ok {
		return c, fmt.Errorf("solana: %s: commitment %q is none of processed, confirmed, finalized", c.Name, c.Commitment)
	}
	if c.PriorityFeeMicroLamports == 0 {
		c.PriorityFeeMicroLamports = 1_000
	}
	if c.MaxPriorityFeeLamports == 0 {
		c.MaxPriorityFeeLamports = 100_000
	}
	if c.SlotTime <= 0 {
		c.SlotTime = Duration(400 * time.Millisecond)
	}
	seen := map[string]bool{NativeAsset: true}
	for _, t := range c.Tokens {
		if t.Symbol == "" || seen[t.Symbol] || t.Decimals < 0 || t.Decimals > 18 {
			return c, fmt.Errorf("solana: %s: token %q is repeated or has no symbol or bad decimals", c.Name, t.Symbol)
		}
		if _, err := sol.PublicKeyFromBase58(t.Mint); err != nil {
			return c, fmt.Errorf("solana: %s: token %s's mint %q is not a base58 public key", c.Name, t.Symbol, t.Mint)
		}
		seen[t.Symbol] = true
	}
	return c, nil
}

// token returns a configured SPL token, or false for SOL itself.
func (c Config) token(symbol string) (Token, bool, error) {
	if symbol == NativeAsset {
		return Token{Symbol: NativeAsset, Decimals: NativeDecimals}, false, nil
	}
	for _, t := range c.Tokens {
		if t.Symbol == symbol {
			return t, true, nil
		}
	}
	return Token{}, false, fmt.Errorf("%w: %s has no token %q configured", chain.ErrUnsupportedAsset, c.Name, symbol)
}
