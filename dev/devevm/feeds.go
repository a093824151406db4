package devevm

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/prices"
)

// FeedDecimals are the dev price feeds' decimals, as Chainlink's USD feeds have.
const FeedDecimals = 8

// FeedHeartbeat is how long a dev feed goes without a round, unless told otherwise: the
// keeper posts well within it, so a price goes stale only when its feed is held (twice the
// heartbeat later).
const FeedHeartbeat = time.Minute

// KeeperKey posts the dev feeds' rounds: a key of its own, so its posts never race the
// faucet's nonces.
func KeeperKey() *ecdsa.PrivateKey {
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("treasury dev price keeper")))
	if err != nil {
		panic(err)
	}
	return k
}

// keeperFunds is the native amount the keeper starts with: gas for years of rounds.
var keeperFunds = decimal.NewFromInt(1000)

// deployFeeds deploys a DevPriceFeed per asset at its price and funds the keeper that
// posts to them.
func (d *Deployer) deployFeeds(ctx context.Context, assets []string, pricesUSD map[string]decimal.Decimal) (map[string]common.Address, error) {
	keeper := crypto.PubkeyToAddress(KeeperKey().PublicKey)
	out := map[string]common.Address{}
	for _, asset := range assets {
		price, ok := pricesUSD[asset]
		if !ok {
			return nil, fmt.Errorf("devevm: no price for %s's feed", asset)
		}
		addr, err := d.DeployFeed(ctx, asset, price, keeper)
		if err != nil {
			return nil, err
		}
		out[asset] = addr
	}
	units, err := evm.Units(keeperFunds, 18)
	if err != nil {
		return nil, err
	}
	return out, d.send(ctx, d.Key, []call{{to: keeper, value: units}})
}

// DeployFeed deploys an asset's USD price feed (DevPriceFeed, FeedDecimals) holding a
// first round at price; only poster may post to it.
func (d *Deployer) DeployFeed(ctx context.Context, asset string, price decimal.Decimal, poster common.Address) (common.Address, error) {
	answer, err := feedAnswer(price)
	if err != nil {
		return common.Address{}, err
	}
	addr, err := d.create(ctx, contracts.PriceFeed, uint8(FeedDecimals), asset+" / USD", answer, poster)
	if err != nil {
		return common.Address{}, fmt.Errorf("devevm: deploying the %s / USD feed: %w", asset, err)
	}
	return addr, nil
}

// PostPrices posts a round to each feed, from the Deployer's key (the feeds' poster), and
// waits for them to be mined.
func (d *Deployer) PostPrices(ctx context.Context, answers map[common.Address]decimal.Decimal) error {
	feedABI := contracts.ABI(contracts.PriceFeed)
	var calls []call
	for _, feed := range slices.SortedFunc(maps.Keys(answers), func(a, b common.Address) int { return a.Cmp(b) }) {
		answer, err := feedAnswer(answers[feed])
		if err != nil {
			return err
		}
		calls = append(calls, call{to: feed, abi: feedABI, method: "post", args: []any{answer}})
	}
	return d.send(ctx, d.Key, calls)
}

// feedAnswer is a USD price in a dev feed's units.
func feedAnswer(usd decimal.Decimal) (*big.Int, error) {
	if !usd.IsPositive() || usd.Exponent() < -FeedDecimals {
		return nil, fmt.Errorf("devevm: %s is not a price of at most %d decimals above zero", usd, FeedDecimals)
	}
	return usd.Shift(FeedDecimals).BigInt(), nil
}

// PriceSources are the price sources of the dev chains' feeds, for the worker to read as
// it reads Chainlink's, each with the heartbeat given.
func (c *Chains) PriceSources(heartbeat time.Duration) []prices.Source {
	var out []prices.Source
	for _, spec := range Specs {
		for asset, feed := range c.feeds[spec.Name] {
			out = append(out, prices.Source{Asset: asset, Chain: spec.Name, Feed: feed.Hex(), Heartbeat: prices.Duration(heartbeat)})
		}
	}
	slices.SortFunc(out, func(a, b prices.Source) int { return strings.Compare(a.Asset, b.Asset) })
	return out
}

// feedOf finds an asset's feed on whichever dev chain holds it.
func (c *Chains) feedOf(asset string) (string, common.Address, bool) {
	for _, spec := range Specs {
		if a, ok := c.feeds[spec.Name][asset]; ok {
			return spec.Name, a, true
		}
	}
	return "", common.Address{}, false
}

// SetPrice posts a new round to an asset's dev feed. The price stays on the chain: the
// keeper re-posts whatever the feed last said.
func (c *Chains) SetPrice(ctx context.Context, asset string, usd decimal.Decimal) error {
	name, feed, ok := c.feedOf(asset)
	if !ok {
		return fmt.Errorf("devevm: no dev price feed for %s (feeds: %s)", asset, strings.Join(c.feedAssets(), ", "))
	}
	return c.post(ctx, name, map[common.Address]decimal.Decimal{feed: usd})
}

func (c *Chains) feedAssets() []string {
	var out []string
	for _, spec := range Specs {
		out = append(out, slices.Collect(maps.Keys(c.feeds[spec.Name]))...)
	}
	slices.Sort(out)
	return out
}

// post sends a round to each feed of one chain from the keeper. A send refused for lack of
// funds right after the keeper was funded (the pool has not yet taken in the funding
// block) is tried again for a few seconds.
func (c *Chains) post(ctx context.Context, chainName string, answers map[common.Address]decimal.Decimal) error {
	c.keeperMu.Lock()
	defer c.keeperMu.Unlock()
	d := &Deployer{Client: c.nodes[chainName].Client(), Key: KeeperKey()}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := d.PostPrices(ctx, answers)
		if !evm.ShortOfFunds(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// latestAnswers reads what each feed of a chain says now.
func (c *Chains) latestAnswers(ctx context.Context, chainName string, skip []string) (map[common.Address]decimal.Decimal, error) {
	a := c.adapters[chainName]
	out := map[common.Address]decimal.Decimal{}
	for asset, feed := range c.feeds[chainName] {
		if slices.Contains(skip, asset) {
			continue
		}
		r, err := a.LatestRound(ctx, feed.Hex())
		if err != nil {
			return nil, err
		}
		out[feed] = r.Answer
	}
	return out, nil
}

// KeepFeeds posts every feed's latest answer again now, then every interval until Close,
// as an aggregator's heartbeat does; the feeds of the assets held are left alone, so their
// prices go stale. The first round is posted before it returns, so a data directory left
// for a while starts with fresh prices.
func (c *Chains) KeepFeeds(ctx context.Context, interval time.Duration, held []string) error {
	for _, asset := range held {
		if _, _, ok := c.feedOf(asset); !ok {
			return fmt.Errorf("devevm: no dev price feed for %s to hold (feeds: %s)", asset, strings.Join(c.feedAssets(), ", "))
		}
	}
	round := func(ctx context.Context) error {
		var errs []error
		for _, spec := range Specs {
			if c.nodes[spec.Name] == nil || len(c.feeds[spec.Name]) == 0 {
				continue
			}
			answers, err := c.latestAnswers(ctx, spec.Name, held)
			if err == nil && len(answers) > 0 {
				err = c.post(ctx, spec.Name, answers)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", spec.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	if err := round(ctx); err != nil {
		return fmt.Errorf("devevm: the price keeper's first round: %w", err)
	}
	keepCtx, cancel := context.WithCancel(context.Background())
	c.stopKeeper = cancel
	c.keeperDone.Add(1)
	go func() {
		defer c.keeperDone.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-keepCtx.Done():
				return
			case <-t.C:
			}
			if err := round(keepCtx); err != nil && keepCtx.Err() == nil && c.log != nil {
				c.log.Warn("the dev price keeper could not post a round", "error", err.Error())
			}
		}
	}()
	return nil
}

// keeper is the state of the feeds' keeper, kept in Chains.
type keeper struct {
	keeperMu   sync.Mutex
	stopKeeper context.CancelFunc
	keeperDone sync.WaitGroup
}
