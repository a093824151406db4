// Package prices says where each asset's USD price comes from and when a reading of it is
// too old to value an order: a Chainlink AggregatorV3 feed on an EVM chain, or a fixed price
// the operator pegs; and the refresh that reads them (Refresher), which the price
// activity runs on its schedule.
package prices

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"
)

// Source is where one asset's price comes from: a feed (Chain, Feed, Heartbeat) or Fixed.
type Source struct {
	Asset string `json:"asset"`
	// Chain is the configured EVM chain the feed lives on (by name).
	Chain string `json:"chain,omitempty"`
	// Feed is the AggregatorV3 contract's address (a proxy, for Chainlink's).
	Feed string `json:"feed,omitempty"`
	// Heartbeat is the longest the feed goes without a new round; a reading older than
	// twice it is stale.
	Heartbeat Duration `json:"heartbeat,omitempty"`
	// Fixed is a price the operator pegs (a stablecoin): never stale.
	Fixed *decimal.Decimal `json:"fixed,omitempty"`
}

// Name says what the source is, for the stored reading and the logs.
func (s Source) Name() string {
	if s.Fixed != nil {
		return "fixed"
	}
	return "feed:" + s.Chain + ":" + s.Feed
}

// StaleAfter is when a reading updated at updatedAt stops valuing orders: twice the
// feed's heartbeat later; nil (never) for a fixed price.
func (s Source) StaleAfter(updatedAt time.Time) *time.Time {
	if s.Fixed != nil {
		return nil
	}
	t := updatedAt.Add(2 * time.Duration(s.Heartbeat))
	return &t
}

// Duration reads "1h" or "27s" from JSON.
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func feed(asset, chain, address string, heartbeat time.Duration) Source {
	return Source{Asset: asset, Chain: chain, Feed: address, Heartbeat: Duration(heartbeat)}
}

// Chain ids whose Chainlink feeds are the defaults.
const (
	EthereumMainnet = 1
	PolygonMainnet  = 137
)

// Defaults are the sources the configured chains bring without a PRICES_FILE: Chainlink's
// USD feeds on Ethereum mainnet (ETH, BTC for WBTC, USDC, and SOL, which Chainlink
// publishes there), and on Polygon PoS POL (MATIC), with USDC from Polygon when Ethereum
// is not read. chainIDs maps each configured EVM chain's name to its chain id; a testnet
// brings none. The heartbeats are the feeds' published ones.
func Defaults(chainIDs map[string]uint64) []Source {
	var out []Source
	names := slices.Sorted(maps.Keys(chainIDs))
	byID := func(id uint64) string {
		for _, n := range names {
			if chainIDs[n] == id {
				return n
			}
		}
		return ""
	}
	if eth := byID(EthereumMainnet); eth != "" {
		out = append(out,
			feed("ETH", eth, "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419", time.Hour),
			feed("WBTC", eth, "0xF4030086522a5bEEa4988F8cA5B36dbC97BeE88c", time.Hour),
			feed("USDC", eth, "0x8fFfFfd4AfB6115b954Bd326cbe7B4BA576818f6", 24*time.Hour),
			feed("SOL", eth, "0x4ffC43a60e009B551865A93d232E33Fce9f01507", 24*time.Hour))
	}
	if pol := byID(PolygonMainnet); pol != "" {
		out = append(out, feed("MATIC", pol, "0xAB594600376Ec9fD91F8e885dADF0CE036862dE0", 27*time.Second))
		if byID(EthereumMainnet) == "" {
			out = append(out, feed("USDC", pol, "0xfE4A8cc5b5B2366C1B58Bea3858e81843581b2F7", 27*time.Second))
		}
	}
	return out
}

// ReadFile reads a PRICES_FILE: a JSON array of sources.
func ReadFile(path string) ([]Source, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var out []Source
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Merge replaces defaults asset by asset with the sources given; an asset only given is
// added. The result is in asset order.
func Merge(defaults, given []Source) []Source {
	by := map[string]Source{}
	for _, s := range defaults {
		by[s.Asset] = s
	}
	for _, s := range given {
		by[s.Asset] = s
	}
	var out []Source
	for _, a := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[a])
	}
	return out
}

// Check refuses sources the worker could not read: an asset twice or unnamed, neither or
// both of a feed and a fixed price, a feed on a chain that is not configured (chains),
// a feed address that is not one, no heartbeat, a price that is not positive.
func Check(sources []Source, chains []string) error {
	var errs []string
	seen := map[string]bool{}
	for _, s := range sources {
		what := "prices: " + s.Asset
		switch {
		case s.Asset == "":
			errs = append(errs, "prices: a source names no asset")
		case seen[s.Asset]:
			errs = append(errs, what+": named twice")
		case s.Fixed != nil && s.Feed != "":
			errs = append(errs, what+": both a feed and a fixed price")
		case s.Fixed != nil:
			if !s.Fixed.IsPositive() {
				errs = append(errs, what+": a fixed price must be positive")
			}
		case s.Feed == "":
			errs = append(errs, what+": neither a feed nor a fixed price")
		case !common.IsHexAddress(s.Feed):
			errs = append(errs, what+": feed "+s.Feed+" is not an address")
		case !slices.Contains(chains, s.Chain):
			errs = append(errs, what+": its feed is on chain "+fmt.Sprintf("%q", s.Chain)+", which is not a configured EVM chain")
		case s.Heartbeat <= 0:
			errs = append(errs, what+": a feed needs its heartbeat (\"1h\", \"27s\")")
		}
		seen[s.Asset] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
