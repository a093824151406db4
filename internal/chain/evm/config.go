package evm

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/opentreasury/treasury/internal/chain"
)

// Config describes one EVM chain: where its node is and what the service may call on it.
type Config struct {
	// Name is the chain's name in the API (ethereum, polygon, …).
	Name string `json:"name"`
	// ChainID is checked against the node's at start: a mismatch refuses to start.
	ChainID uint64 `json:"chainId"`
	RPCURL  string `json:"rpcUrl"`
	// NativeAsset is the symbol of the chain's own coin (ETH, MATIC), 18 decimals.
	NativeAsset string `json:"nativeAsset"`
	// Confirmations is the depth at which a transaction is final (default 12).
	Confirmations int `json:"confirmations"`
	// BlockTime is the chain's usual block interval, for telling when a pending
	// transaction is expected final (default 12 s).
	BlockTime Duration `json:"blockTime"`
	// Tokens are the ERC-20 assets, by symbol.
	Tokens []Token `json:"tokens"`
	// SwapRouter executes trades' SWAP legs; APPROVE legs approve it.
	SwapRouter *Venue `json:"swapRouter,omitempty"`
	// BatchTransfer is the contract batch payments go through (DevBatchTransfer's
	// batchTransferToken and batchTransferNative); a wallet grants it an allowance on each
	// token once. Without it, batch payments on the chain fail unsupported_asset.
	BatchTransfer *common.Address `json:"batchTransfer,omitempty"`
	// BatchPartSize is how many recipients one transaction of a batch pays (default
	// orders.DefaultBatchPartSize, 100, which needs a block and a transaction of 14 M gas);
	// a chain whose blocks hold less takes fewer.
	BatchPartSize int `json:"batchPartSize,omitempty"`
	// Vaults are the ERC-4626 vaults of Earn, by protocol then asset.
	Vaults map[string]map[string]common.Address `json:"vaults,omitempty"`
	// Pools are the lending pools of Borrow, by protocol.
	Pools map[string]Venue `json:"pools,omitempty"`
	// MaxFeePerGasGwei caps what a transaction may pay per gas (default 500 gwei); a fee
	// market above the cap leaves transactions waiting rather than overpaying.
	MaxFeePerGasGwei int64 `json:"maxFeePerGasGwei"`
	// GasHeadroomPercent is added to the node's gas estimate (default 20).
	GasHeadroomPercent int `json:"gasHeadroomPercent"`
	// RevertingCallGas is the gas limit of a call the node's estimate says reverts, so the
	// transaction fails on chain with its reason, as the order's record expects (default
	// 200,000).
	RevertingCallGas uint64 `json:"revertingCallGas"`
}

// Token is one ERC-20 asset of a chain.
type Token struct {
	Symbol   string         `json:"symbol"`
	Address  common.Address `json:"address"`
	Decimals int32          `json:"decimals"`
}

// Venue is a contract and the interface it speaks.
type Venue struct {
	// Kind is the interface: "dev-fixed-price" (DevSwapRouter's swapExactInput) for
	// routers, "aave-v3" (Pool.borrow and Pool.repay) for pools.
	Kind    string         `json:"kind"`
	Address common.Address `json:"address"`
}

// The venue kinds the adapter speaks.
const (
	KindFixedPriceRouter = "dev-fixed-price"
	KindAaveV3Pool       = "aave-v3"
)

// Duration reads "200ms" or "12s" from JSON.
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// withDefaults fills what the configuration left unset and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" || c.ChainID == 0 || c.NativeAsset == "" {
		return c, fmt.Errorf("evm: a chain needs a name, a chainId and a nativeAsset")
	}
	if c.Confirmations <= 0 {
		c.Confirmations = 12
	}
	if c.BlockTime <= 0 {
		c.BlockTime = Duration(12 * time.Second)
	}
	if c.MaxFeePerGasGwei <= 0 {
		c.MaxFeePerGasGwei = 500
	}
	if c.GasHeadroomPercent <= 0 {
		c.GasHeadroomPercent = 20
	}
	if c.RevertingCallGas == 0 {
		c.RevertingCallGas = 200_000
	}
	if c.BatchPartSize < 0 || c.BatchPartSize > 500 {
		return c, fmt.Errorf("evm: %s: batchPartSize %d is not from 1 to 500 recipients (0 for the default)", c.Name, c.BatchPartSize)
	}
	seen := map[string]bool{c.NativeAsset: true}
	for _, t := range c.Tokens {
		if t.Symbol == "" || seen[t.Symbol] || t.Decimals < 0 || t.Decimals > 36 {
			return c, fmt.Errorf("evm: %s: token %q is repeated or has no symbol or bad decimals", c.Name, t.Symbol)
		}
		seen[t.Symbol] = true
	}
	if c.SwapRouter != nil && c.SwapRouter.Kind != KindFixedPriceRouter {
		return c, fmt.Errorf("evm: %s: swap router kind %q is not one the adapter speaks (%s)", c.Name, c.SwapRouter.Kind, KindFixedPriceRouter)
	}
	for p, v := range c.Pools {
		if v.Kind != KindAaveV3Pool {
			return c, fmt.Errorf("evm: %s: pool %s kind %q is not one the adapter speaks (%s)", c.Name, p, v.Kind, KindAaveV3Pool)
		}
	}
	return c, nil
}

func (c Config) maxFeePerGas() *big.Int {
	return new(big.Int).Mul(big.NewInt(c.MaxFeePerGasGwei), big.NewInt(1_000_000_000))
}

// token returns an asset's contract, or false for the native asset.
func (c Config) token(symbol string) (Token, bool, error) {
	if strings.EqualFold(symbol, c.NativeAsset) {
		return Token{Symbol: c.NativeAsset, Decimals: 18}, false, nil
	}
	for _, t := range c.Tokens {
		if t.Symbol == symbol {
			return t, true, nil
		}
	}
	return Token{}, false, fmt.Errorf("%w: %s has no token %q configured", chain.ErrUnsupportedAsset, c.Name, symbol)
}

// tokenAt returns the configured token at an address.
func (c Config) tokenAt(address common.Address) (Token, bool) {
	for _, t := range c.Tokens {
		if t.Address == address {
			return t, true
		}
	}
	return Token{}, false
}
