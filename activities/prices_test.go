package activities

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/prices"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// The price refresh reads AggregatorV3 feeds on a real in-process go-ethereum chain through
// the EVM adapter, and fixed prices: each reading is kept with its round, its feed's
// updatedAt and its staleness (twice the heartbeat); a new round moves the price; a
// failing source keeps its last price; the price of an asset no source names is deleted.
func TestRefreshPricesReadsFeedsAndFixedPrices(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		poster, _ := crypto.GenerateKey()
		backend := simulated.NewBackend(types.GenesisAlloc{
			crypto.PubkeyToAddress(poster.PublicKey): {Balance: new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1000))},
		})
		t.Cleanup(func() { _ = backend.Close() })
		d := &devevm.Deployer{Client: backend.Client(), Key: poster, Mine: func() { backend.Commit() }}
		ethFeed, err := d.DeployFeed(ctx, "ETH", decimal.RequireFromString("3000.5"), crypto.PubkeyToAddress(poster.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		adapter, err := evm.New(ctx, evm.Config{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH"}, backend.Client())
		if err != nil {
			t.Fatal(err)
		}
		one := decimal.NewFromInt(1)
		if _, err := s.RecordPrice(ctx, &store.Price{Asset: "DROPPED", USDPrice: one, UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		acts := &Prices{Refresher: prices.Refresher{Store: s, Feeds: chain.Router{"ethereum": adapter}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Sources: []prices.Source{
				{Asset: "ETH", Chain: "ethereum", Feed: ethFeed.Hex(), Heartbeat: prices.Duration(time.Hour)},
				{Asset: "USDC", Fixed: &one},
			}}}
		res, err := acts.RefreshPrices(ctx)
		if err != nil || res.Read != 2 || res.Kept != 2 || res.Failed != 0 || res.Deleted != 1 {
			t.Fatalf("first refresh: %+v, %v", res, err)
		}
		kept, _ := s.Prices(ctx)
		eth, usdc := kept["ETH"], kept["USDC"]
		head, _ := backend.Client().HeaderByNumber(ctx, nil)
		if !eth.USDPrice.Equal(decimal.RequireFromString("3000.5")) || eth.Round != "1" ||
			eth.UpdatedAt.Unix() != int64(head.Time) || eth.StaleAfter == nil || !eth.StaleAfter.Equal(eth.UpdatedAt.Add(2*time.Hour)) {
			t.Fatalf("ETH kept as %+v (head at %d)", eth, head.Time)
		}
		if !usdc.USDPrice.Equal(one) || usdc.StaleAfter != nil || usdc.Source != "fixed" {
			t.Fatalf("USDC kept as %+v", usdc)
		}
		if _, ok := kept["DROPPED"]; ok {
			t.Fatal("the price of an asset no source names was kept")
		}

		// A new round moves the price; the same round read again changes nothing.
		backend.AdjustTime(time.Minute)
		if err := d.PostPrices(ctx, map[common.Address]decimal.Decimal{ethFeed: decimal.RequireFromString("2999.25")}); err != nil {
			t.Fatal(err)
		}
		if res, err := acts.RefreshPrices(ctx); err != nil || res.Read != 2 {
			t.Fatalf("second refresh: %+v, %v", res, err)
		}
		kept, _ = s.Prices(ctx)
		if eth2 := kept["ETH"]; !eth2.USDPrice.Equal(decimal.RequireFromString("2999.25")) || eth2.Round != "2" || !eth2.UpdatedAt.After(eth.UpdatedAt) {
			t.Fatalf("after a new round ETH is %+v (was %+v)", eth2, eth)
		}

		// A source that fails keeps its last price; only when every source fails does the
		// activity fail.
		acts.Refresher.Feeds = failingFeeds{}
		if res, err := acts.RefreshPrices(ctx); err != nil || res.Failed != 1 || res.Read != 1 {
			t.Fatalf("one source failing: %+v, %v", res, err)
		}
		kept, _ = s.Prices(ctx)
		if !kept["ETH"].USDPrice.Equal(decimal.RequireFromString("2999.25")) {
			t.Fatalf("a failed read moved ETH to %s", kept["ETH"].USDPrice)
		}
		acts.Refresher.Sources = acts.Refresher.Sources[:1]
		if _, err := acts.RefreshPrices(ctx); err == nil {
			t.Fatal("every source failed, and the activity did not")
		}
	})
}

type failingFeeds struct{}

func (failingFeeds) LatestRound(context.Context, string, string) (chain.PriceRound, error) {
	return chain.PriceRound{}, errors.New("node unreachable")
}

// A worker without price sources reads nothing and deletes nothing.
func TestRefreshPricesWithoutSourcesLeavesPricesAlone(t *testing.T) {
	s := storetest.NewSQLite(t)
	ctx := context.Background()
	if _, err := s.RecordPrice(ctx, &store.Price{Asset: "ETH", USDPrice: decimal.NewFromInt(3000), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	acts := &Prices{Refresher: prices.Refresher{Store: s, Feeds: chain.Router{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	if res, err := acts.RefreshPrices(ctx); err != nil || res.Read+res.Kept+res.Failed != 0 || res.Deleted != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	if kept, _ := s.Prices(ctx); len(kept) != 1 {
		t.Fatalf("prices %v", kept)
	}
}
