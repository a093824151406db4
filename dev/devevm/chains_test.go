package devevm

import (
	"context"
	"crypto/ecdsa"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/shopspring/decimal"
)

// The dev chains' second start finds what the first deployed, in the chain's own
// directory, and moves the record an earlier version left beside it there. With HTTP,
// each chain also answers JSON-RPC on its own loopback port, as itself.
func TestTheDevChainsResumeTheirDeployment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := ChainsOptions{Dir: dir, BlockTime: 20 * time.Millisecond, Confirmations: 1, HTTP: true,
		PricesUSD: map[string]decimal.Decimal{"ETH": decimal.NewFromInt(3000), "WBTC": decimal.NewFromInt(60000),
			"USDC": decimal.NewFromInt(1), "SOL": decimal.NewFromInt(150), "MATIC": decimal.RequireFromString("0.5")},
		Wallets: func(context.Context, string) (map[common.Address]map[string]decimal.Decimal, []*ecdsa.PrivateKey, error) {
			return nil, nil, nil
		}}
	first, err := StartChains(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	token := first.Adapter("ethereum").Config().Tokens
	feeds := first.PriceSources(time.Hour)
	first.Close()
	record := filepath.Join(dir, "ethereum", "deployment.json")
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the deployment's record: %v", err)
	}
	if err := os.Rename(record, filepath.Join(dir, "ethereum.json")); err != nil {
		t.Fatal(err)
	}

	again, err := StartChains(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := again.Adapter("ethereum").Config().Tokens; len(got) != len(token) || got[0].Address != token[0].Address {
		t.Fatalf("tokens after a restart %+v, were %+v", got, token)
	}
	for _, spec := range Specs {
		remote, err := ethclient.DialContext(ctx, again.Node(spec.Name).URL())
		if err != nil {
			t.Fatal(err)
		}
		id, err := remote.ChainID(ctx)
		remote.Close()
		if err != nil || id.Uint64() != spec.ChainID {
			t.Fatalf("%s over HTTP at %q: chain id %v %v, want %d", spec.Name, again.Node(spec.Name).URL(), id, err, spec.ChainID)
		}
	}
	if got := again.PriceSources(time.Hour); len(got) != 5 || got[0] != feeds[0] {
		t.Fatalf("feeds after a restart %+v, were %+v", got, feeds)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the earlier record was not moved into the chain's directory: %v", err)
	}
}
