package devevm

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/freeport"
	"github.com/opentreasury/treasury/internal/chain/evm"
)

// Spec is one of the dev bundle's EVM chains.
type Spec struct {
	Name        string
	ChainID     uint64
	NativeAsset string
	Tokens      []TokenPlan
	// Feeds are the assets whose USD price feed lives on the chain (SOL's on ethereum, as
	// Chainlink publishes it there).
	Feeds []string
}

// Specs are the dev bundle's EVM chains: ethereum and polygon, each with its own chain
// id, so a transaction signed for one is refused by the other.
var Specs = []Spec{
	{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH", Tokens: []TokenPlan{{"USDC", 6}, {"WBTC", 8}},
		Feeds: []string{"ETH", "WBTC", "USDC", "SOL"}},
	{Name: "polygon", ChainID: 1338, NativeAsset: "MATIC", Tokens: []TokenPlan{{"USDC", 6}}, Feeds: []string{"MATIC"}},
}

// Protocols get a vault per token and a lending pool on every dev chain.
var Protocols = []string{"aave", "compound"}

// Chains are the dev bundle's running EVM chains.
type Chains struct {
	nodes    map[string]*Node
	adapters map[string]*evm.Chain
	// usdc is the hash of the transaction that deployed each chain's USDC: a transaction of
	// the chain anyone can look up (the bundle's banner shows it).
	usdc map[string]string
	// feeds are each chain's price feeds, by asset.
	feeds map[string]map[string]common.Address
	log   *slog.Logger
	keeper
}

// deployment is what a chain's first start leaves in Dir/<name>/deployment.json: the
// addresses it deployed, for the bundle's own restarts. It is not a chain configuration
// for the treasury binary (that is CHAINS_FILE, docs/chains.md).
type deployment struct {
	evm.Config
	USDCDeployedIn string `json:"usdcDeployedIn"`
	// Feeds are the price feeds by asset; a directory made before feeds existed gets them
	// at its next start.
	Feeds map[string]common.Address `json:"feeds,omitempty"`
}

// ChainsOptions configure the dev chains.
type ChainsOptions struct {
	// Dir keeps each chain in Dir/<name>, its deployment in Dir/<name>/deployment.json.
	Dir           string
	BlockTime     time.Duration
	Confirmations int
	PricesUSD     map[string]decimal.Decimal
	// Wallets returns, on a chain's first start, the wallets to fund and the keys that
	// grant the dev contracts their allowances.
	Wallets func(ctx context.Context, chainName string) (map[common.Address]map[string]decimal.Decimal, []*ecdsa.PrivateKey, error)
	// HTTP also serves each chain's JSON-RPC on a loopback port (Node.URL).
	HTTP bool
	Log  *slog.Logger
}

// StartChains starts every dev chain. A chain's first start deploys the dev contracts and
// funds the wallets; later starts resume the chain kept in its directory.
func StartChains(ctx context.Context, o ChainsOptions) (*Chains, error) {
	c := &Chains{nodes: map[string]*Node{}, adapters: map[string]*evm.Chain{}, usdc: map[string]string{},
		feeds: map[string]map[string]common.Address{}, log: o.Log}
	for _, spec := range Specs {
		if err := c.start(ctx, o, spec); err != nil {
			c.Close()
			return nil, fmt.Errorf("dev chain %s: %w", spec.Name, err)
		}
	}
	return c, nil
}

func (c *Chains) start(ctx context.Context, o ChainsOptions, spec Spec) error {
	port := 0
	if o.HTTP {
		var err error
		if port, err = freeport.OrFree("127.0.0.1", 0); err != nil {
			return err
		}
	}
	n, err := StartNode(NodeOptions{Dir: filepath.Join(o.Dir, spec.Name), ChainID: spec.ChainID, BlockTime: o.BlockTime,
		Confirmations: o.Confirmations, HTTPPort: port, Log: o.Log})
	if err != nil {
		return err
	}
	c.nodes[spec.Name] = n
	file := filepath.Join(o.Dir, spec.Name, "deployment.json")
	// Earlier versions kept it beside the chain's directory, as <name>.json.
	if err := os.Rename(filepath.Join(o.Dir, spec.Name+".json"), file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var dep deployment
	raw, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &dep); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if dep, err = c.deploy(ctx, o, spec, n); err != nil {
			return err
		}
	default:
		return err
	}
	if len(dep.Feeds) == 0 && len(spec.Feeds) > 0 {
		d := &Deployer{Client: n.Client(), Key: FaucetKey(), Mine: n.Seal}
		if dep.Feeds, err = d.deployFeeds(ctx, spec.Feeds, o.PricesUSD); err != nil {
			return err
		}
		raw = nil
	}
	if raw == nil {
		// The record names contracts: their blocks are on disk first.
		if err := n.Flush(); err != nil {
			return err
		}
		out, err := json.MarshalIndent(dep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, out, 0o600); err != nil {
			return err
		}
	}
	c.feeds[spec.Name] = dep.Feeds
	cfg := dep.Config
	c.usdc[spec.Name] = dep.USDCDeployedIn
	cfg.Confirmations, cfg.BlockTime = max(o.Confirmations, 1), evm.Duration(o.BlockTime)
	adapter, err := evm.New(ctx, cfg, n.Client())
	if err != nil {
		return err
	}
	c.adapters[spec.Name] = adapter
	return nil
}

func (c *Chains) deploy(ctx context.Context, o ChainsOptions, spec Spec, n *Node) (deployment, error) {
	funds, spenders, err := o.Wallets(ctx, spec.Name)
	if err != nil {
		return deployment{}, err
	}
	started := time.Now()
	d := &Deployer{Client: n.Client(), Key: FaucetKey(), Mine: n.Seal}
	cfg, err := d.Deploy(ctx, Plan{Name: spec.Name, ChainID: spec.ChainID, NativeAsset: spec.NativeAsset, Tokens: spec.Tokens,
		PricesUSD: o.PricesUSD, Protocols: Protocols, Funds: funds, Spenders: spenders})
	if err != nil {
		return deployment{}, err
	}
	if o.Log != nil {
		o.Log.Info("deployed the dev contracts", "chain", spec.Name, "chainId", spec.ChainID, "wallets", len(funds),
			"took", time.Since(started).Round(time.Millisecond).String())
	}
	return deployment{Config: cfg, USDCDeployedIn: d.Created["USDC"].Hex()}, nil
}

// USDCDeployedIn is the hash of the transaction that deployed a chain's USDC, "" if none.
func (c *Chains) USDCDeployedIn(name string) string { return c.usdc[name] }

// Fund credits an address on a dev chain from its faucet, as a faucet would.
func (c *Chains) Fund(ctx context.Context, chainName, address, asset string, amount decimal.Decimal) error {
	n, a := c.nodes[chainName], c.adapters[chainName]
	if n == nil || a == nil {
		return fmt.Errorf("devevm: no dev chain %s", chainName)
	}
	d := &Deployer{Client: n.Client(), Key: FaucetKey()}
	return d.Fund(ctx, a.Config(), common.HexToAddress(address), asset, amount)
}

// Adapter returns a chain's adapter, or nil.
func (c *Chains) Adapter(name string) *evm.Chain { return c.adapters[name] }

// Node returns a chain's node, or nil.
func (c *Chains) Node(name string) *Node { return c.nodes[name] }

// Close stops the price keeper and every chain; they stay in their directories.
func (c *Chains) Close() {
	if c.stopKeeper != nil {
		c.stopKeeper()
		c.keeperDone.Wait()
	}
	for _, n := range c.nodes {
		_ = n.Close()
	}
}
