// Package devchains runs the dev chains for the wallets of a store: ethereum and polygon as
// go-ethereum nodes in this process (devevm), solana as Solana's own runtime in a child
// process (devsvm). Each wallet is funded, on its chain's first start, with what the store
// records it holds: for the seeded wallets, the seed's plan. Nothing here is simulated: the
// treasury serves these chains by the adapters it serves real networks with.
package devchains

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/rpcproxy"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/store"
)

// Options configure the dev chains.
type Options struct {
	// Dir keeps the EVM chains in Dir/chains and Solana's in SolanaDir(Dir).
	Dir string
	// BlockTime (and Solana's slot time) and Confirmations: 200 ms and 1 when zero.
	BlockTime     time.Duration
	Confirmations int
	// Store holds the wallets to fund.
	Store *store.Store
	// Spenders are the keys, among a chain's wallets, that grant the dev contracts their
	// allowances (vaults, pools) on the chain's first start.
	Spenders func(chainName string) ([]*ecdsa.PrivateKey, error)
	// HTTP also serves each EVM chain's JSON-RPC on a loopback port, for treasury
	// processes of their own (Env).
	HTTP bool
	Log  *slog.Logger
}

// Chains are the running dev chains.
type Chains struct {
	EVM *devevm.Chains
	SVM *devsvm.Node
	// Solana is the Solana adapter on SVM, as the treasury dials it.
	Solana *solana.Chain
	store  *store.Store
}

// SolanaChain is the name of the chain devsvm runs.
const SolanaChain = "solana"

// SolanaDir is where dev chains on dir keep Solana's.
func SolanaDir(dir string) string { return filepath.Join(dir, "solana") }

// Start starts every dev chain. A start that fails stops what it started and returns nil.
func Start(ctx context.Context, o Options) (_ *Chains, err error) {
	o.BlockTime, o.Confirmations = cmp.Or(o.BlockTime, 200*time.Millisecond), cmp.Or(o.Confirmations, 1)
	c := &Chains{store: o.Store}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	prices := map[string]decimal.Decimal{}
	for asset, price := range seed.Prices {
		prices[asset] = decimal.RequireFromString(price)
	}
	c.EVM, err = devevm.StartChains(ctx, devevm.ChainsOptions{Dir: filepath.Join(o.Dir, "chains"),
		BlockTime: o.BlockTime, Confirmations: o.Confirmations, PricesUSD: prices, Wallets: c.evmWallets(o), HTTP: o.HTTP, Log: o.Log})
	if err != nil {
		return nil, err
	}
	// The node lives until Close, not as long as the start's context.
	if c.SVM, err = devsvm.Start(context.WithoutCancel(ctx), devsvm.Options{Dir: SolanaDir(o.Dir), SlotTime: o.BlockTime, Log: o.Log}); err != nil {
		return nil, err
	}
	info, err := c.SVM.Info(ctx)
	if err != nil {
		return nil, err
	}
	// One confirmation, as on the dev EVM chains: confirmed is one slot deep.
	c.Solana, err = solana.Dial(ctx, solana.Config{Name: SolanaChain, RPCURL: c.SVM.URL(), GenesisHash: info.GenesisHash,
		Commitment: "confirmed", SlotTime: solana.Duration(o.BlockTime),
		Tokens: []solana.Token{{Symbol: "USDC", Mint: info.USDCMint, Decimals: int32(info.USDCDecimals)}}})
	if err != nil {
		return nil, err
	}
	if err := c.fundSolana(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// evmWallets funds every wallet of a dev EVM chain with what the store records it holds.
func (c *Chains) evmWallets(o Options) func(ctx context.Context, chainName string) (map[common.Address]map[string]decimal.Decimal, []*ecdsa.PrivateKey, error) {
	return func(ctx context.Context, chainName string) (map[common.Address]map[string]decimal.Decimal, []*ecdsa.PrivateKey, error) {
		held, err := o.Store.ChainHoldings(ctx, chainName)
		if err != nil {
			return nil, nil, err
		}
		funds := make(map[common.Address]map[string]decimal.Decimal, len(held))
		for address, assets := range held {
			funds[common.HexToAddress(address)] = assets
		}
		var spenders []*ecdsa.PrivateKey
		if o.Spenders != nil {
			if spenders, err = o.Spenders(chainName); err != nil {
				return nil, nil, err
			}
		}
		return funds, spenders, nil
	}
}

// SeededSpenders are the keys of a chain's seeded wallets, kept in dataDir by the seed
// (Options.Spenders); none without credentials (a start from nothing).
func SeededSpenders(dataDir string, creds *seed.Credentials) func(chainName string) ([]*ecdsa.PrivateKey, error) {
	return func(chainName string) ([]*ecdsa.PrivateKey, error) {
		if creds == nil {
			return nil, nil
		}
		all, err := seed.WalletKeys(dataDir)
		if err != nil {
			return nil, err
		}
		var out []*ecdsa.PrivateKey
		for _, w := range creds.Wallets {
			if w.Chain == chainName && all[w.ID] != nil && all[w.ID].ECDSA() != nil {
				out = append(out, all[w.ID].ECDSA())
			}
		}
		return out, nil
	}
}

// fundSolana credits every Solana wallet in the store that holds nothing on the dev chain
// with what the store records it holds: a new chain, or a wallet seeded since.
func (c *Chains) fundSolana(ctx context.Context) error {
	held, err := c.store.ChainHoldings(ctx, SolanaChain)
	if err != nil {
		return err
	}
	for _, address := range slices.Sorted(maps.Keys(held)) {
		onChain, err := c.Solana.Balances(ctx, SolanaChain, address)
		if err != nil {
			return err
		}
		if !onChain[solana.NativeAsset].IsZero() || !onChain["USDC"].IsZero() {
			continue
		}
		for _, asset := range slices.Sorted(maps.Keys(held[address])) {
			if amount := held[address][asset]; amount.IsPositive() {
				if err := c.SVM.Fund(ctx, address, asset, amount); err != nil {
					return fmt.Errorf("funding %s on the dev Solana chain: %w", address, err)
				}
			}
		}
	}
	return nil
}

// Router serves each dev chain by its adapter.
func (c *Chains) Router() chain.Router {
	router := chain.Router{SolanaChain: c.Solana}
	for _, spec := range devevm.Specs {
		router[spec.Name] = c.EVM.Adapter(spec.Name)
	}
	return router
}

// RPCNodes are the nodes the API's /rpc/{chain} forwards to.
func (c *Chains) RPCNodes() rpcproxy.Nodes {
	nodes := rpcproxy.Nodes{SolanaChain: rpcproxy.Dial(c.SVM.URL())}
	for _, spec := range devevm.Specs {
		nodes[spec.Name] = c.EVM.Node(spec.Name).RPC()
	}
	return nodes
}

// Fund credits an address on a dev chain, as a faucet would.
func (c *Chains) Fund(ctx context.Context, chainName, address, asset string, amount decimal.Decimal) error {
	if chainName == SolanaChain {
		return c.SVM.Fund(ctx, address, asset, amount)
	}
	return c.EVM.Fund(ctx, chainName, address, asset, amount)
}

// Env writes every dev chain's configuration to file and returns the environment that
// has a treasury process of its own serve them: CHAINS_FILE. The EVM chains must serve
// HTTP (Options.HTTP).
func (c *Chains) Env(file string) ([]string, error) {
	var entries []assemble.ChainsFileEntry
	for _, spec := range devevm.Specs {
		cfg := c.EVM.Adapter(spec.Name).Config()
		if cfg.RPCURL = c.EVM.Node(spec.Name).URL(); cfg.RPCURL == "" {
			return nil, fmt.Errorf("devchains: %s serves no HTTP endpoint", spec.Name)
		}
		entries = append(entries, assemble.ChainsFileEntry{EVM: &cfg})
	}
	sol := c.Solana.Config()
	entries = append(entries, assemble.ChainsFileEntry{Solana: &sol})
	raw, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return nil, err
	}
	return []string{"CHAINS_FILE=" + file}, nil
}

// Close stops every chain; they stay in their directories.
func (c *Chains) Close() error {
	var err error
	if c.SVM != nil {
		err = c.SVM.Stop()
	}
	if c.EVM != nil {
		c.EVM.Close()
	}
	return err
}
