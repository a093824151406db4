package assemble

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/prices"
)

// Mainnet are the EVM chains ETHEREUM_RPC_URL and POLYGON_RPC_URL select, with their
// tokens. Swap routers, vaults and pools have no default: trades, Earn and Borrow on a
// chain need them configured in CHAINS_FILE (see docs/chains.md).
var Mainnet = map[string]evm.Config{
	"ethereum": {Name: "ethereum", ChainID: 1, NativeAsset: "ETH", Confirmations: 12, BlockTime: evm.Duration(12 * time.Second),
		Tokens: []evm.Token{
			{Symbol: "USDC", Address: common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"), Decimals: 6},
			{Symbol: "WBTC", Address: common.HexToAddress("0x2260FAC5E5542a773Aa44fBCfeDf7C193bc2C599"), Decimals: 8},
		}},
	"polygon": {Name: "polygon", ChainID: 137, NativeAsset: "MATIC", Confirmations: 64, BlockTime: evm.Duration(2 * time.Second),
		Tokens: []evm.Token{
			{Symbol: "USDC", Address: common.HexToAddress("0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"), Decimals: 6},
		}},
}

// chainsFromEnv reads the chains' configuration: ETHEREUM_RPC_URL and POLYGON_RPC_URL
// select mainnet with its tokens, SOLANA_RPC_URL (and SOLANA_*) Solana; CHAINS_FILE (a JSON
// array of chains, EVM and Solana) configures any chain in full and wins over them.
func chainsFromEnv(get func(string) string) (served []string, evmChains []evm.Config, sol *solana.Config, errs []string) {
	for _, name := range strings.Split(get("CHAINS"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			if _, ok := orders.ChainAssets[name]; !ok {
				errs = append(errs, "CHAINS: orders know no chain "+name)
			}
			served = append(served, name)
		}
	}
	byName := map[string]evm.Config{}
	for _, name := range []string{"ethereum", "polygon"} {
		if url := get(strings.ToUpper(name) + "_RPC_URL"); url != "" {
			c := Mainnet[name]
			c.RPCURL = url
			byName[name] = c
		}
	}
	sol = solanaFromEnv(get)
	if path := get("CHAINS_FILE"); path != "" {
		listed, listedSolana, err := readChainsFile(path)
		if err != nil {
			errs = append(errs, "CHAINS_FILE: "+err.Error())
		}
		for _, c := range listed {
			byName[c.Name] = c
		}
		if listedSolana != nil {
			sol = listedSolana
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c := byName[name]
		if c.RPCURL == "" {
			errs = append(errs, "chain "+name+": no rpcUrl")
		}
		evmChains = append(evmChains, c)
	}
	return served, evmChains, sol, errs
}

// ChainsFileEntry is one chain of CHAINS_FILE: an EVM chain's configuration (kind "evm",
// the default), or Solana's (kind "solana").
type ChainsFileEntry struct {
	EVM    *evm.Config
	Solana *solana.Config
}

// MarshalJSON writes the entry as one object: its kind beside the chain's fields. Exactly
// one of EVM and Solana is set.
func (e ChainsFileEntry) MarshalJSON() ([]byte, error) {
	if (e.Solana == nil) == (e.EVM == nil) {
		return nil, fmt.Errorf("a chains file entry is one chain, EVM or Solana")
	}
	if e.Solana != nil {
		return json.Marshal(struct {
			Kind string `json:"kind"`
			solana.Config
		}{chainKindSolana, *e.Solana})
	}
	return json.Marshal(struct {
		Kind string `json:"kind"`
		evm.Config
	}{chainKindEVM, *e.EVM})
}

// UnmarshalJSON reads an entry by its kind: "evm" (the default) or "solana".
func (e *ChainsFileEntry) UnmarshalJSON(raw []byte) error {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	switch head.Kind {
	case "", chainKindEVM:
		e.EVM = &evm.Config{}
		return json.Unmarshal(raw, e.EVM)
	case chainKindSolana:
		e.Solana = &solana.Config{}
		return json.Unmarshal(raw, e.Solana)
	default:
		return fmt.Errorf("chain kind %q is neither %q nor %q", head.Kind, chainKindEVM, chainKindSolana)
	}
}

const (
	chainKindEVM    = "evm"
	chainKindSolana = "solana"
)

// readChainsFile reads CHAINS_FILE: EVM chains, and at most one Solana chain, named solana.
func readChainsFile(path string) (evmChains []evm.Config, sol *solana.Config, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var entries []ChainsFileEntry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if e.Solana == nil {
			evmChains = append(evmChains, *e.EVM)
			continue
		}
		if sol != nil {
			return nil, nil, fmt.Errorf("two Solana chains; the service serves one, named %s", solanaChain)
		}
		if e.Solana.Name = cmp.Or(e.Solana.Name, solanaChain); e.Solana.Name != solanaChain {
			return nil, nil, fmt.Errorf("a Solana chain named %q; the service's is named %s", e.Solana.Name, solanaChain)
		}
		sol = e.Solana
	}
	return evmChains, sol, nil
}

// solanaFromEnv reads Solana's configuration: SOLANA_RPC_URL, with mainnet's USDC mint
// unless SOLANA_USDC_MINT names another (a devnet's, a local validator's);
// SOLANA_GENESIS_HASH, when set, is checked against the node's; SOLANA_COMMITMENT is the
// level a transaction counts as confirmed at (default finalized).
func solanaFromEnv(get func(string) string) *solana.Config {
	url := get("SOLANA_RPC_URL")
	if url == "" {
		return nil
	}
	usdc := solana.MainnetUSDC
	if mint := get("SOLANA_USDC_MINT"); mint != "" {
		usdc.Mint = mint
	}
	return &solana.Config{Name: solanaChain, RPCURL: url, GenesisHash: get("SOLANA_GENESIS_HASH"),
		Commitment: get("SOLANA_COMMITMENT"), Tokens: []solana.Token{usdc}}
}

const solanaChain = "solana"

// howToConfigure says how a chain gets a real adapter.
func howToConfigure(name string) string {
	if name == solanaChain {
		return "set SOLANA_RPC_URL or list it in CHAINS_FILE"
	}
	if _, ok := Mainnet[name]; ok {
		return "set " + strings.ToUpper(name) + "_RPC_URL or list it in CHAINS_FILE"
	}
	return "list it in CHAINS_FILE"
}

// Chains connects to every configured chain and serves each by its adapter. Every chain
// the worker serves (CHAINS) must have one: a chain with no adapter refuses the start.
func (p *Process) Chains() Component {
	return Component{Name: "chains",
		Start: func(ctx context.Context) error {
			router := chain.Router{}
			for _, cfg := range p.Config.EVMChains {
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				adapter, err := evm.Dial(dctx, cfg)
				cancel()
				if err != nil {
					return err
				}
				router[cfg.Name] = adapter
				p.Log.Info("chain adapter ready", "chain", cfg.Name, "kind", "evm", "chainId", cfg.ChainID,
					"confirmations", adapter.Config().Confirmations)
			}
			if cfg := p.Config.Solana; cfg != nil {
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				adapter, err := solana.Dial(dctx, *cfg)
				cancel()
				if err != nil {
					return err
				}
				router[cfg.Name] = adapter
				p.Log.Info("chain adapter ready", "chain", cfg.Name, "kind", "solana", "commitment", adapter.Config().Commitment)
			}
			for _, name := range p.Config.Chains {
				if _, ok := router[name]; !ok {
					return fmt.Errorf("chain %s is served (CHAINS) but has no adapter: %s, or leave it out of CHAINS",
						name, howToConfigure(name))
				}
			}
			p.chains = router
			return nil
		},
	}
}

// priceSourcesFromEnv reads where prices come from: the default feeds of the configured
// mainnets (prices.Defaults), replaced asset by asset by PRICES_FILE. A feed on a chain
// that is not configured refuses the start.
func priceSourcesFromEnv(get func(string) string, evmChains []evm.Config) ([]prices.Source, error) {
	ids := map[string]uint64{}
	names := make([]string, 0, len(evmChains))
	for _, c := range evmChains {
		ids[c.Name] = c.ChainID
		names = append(names, c.Name)
	}
	var given []prices.Source
	if path := get("PRICES_FILE"); path != "" {
		var err error
		if given, err = prices.ReadFile(path); err != nil {
			return nil, fmt.Errorf("PRICES_FILE: %w", err)
		}
		if err := prices.Check(given, names); err != nil {
			return nil, fmt.Errorf("PRICES_FILE: %w", err)
		}
	}
	sources := prices.Merge(prices.Defaults(ids), given)
	return sources, prices.Check(sources, names)
}
