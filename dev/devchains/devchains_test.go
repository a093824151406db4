package devchains

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// Every wallet the store records is funded on its dev chain with exactly what the store
// says it holds, and a process of its own reaches the EVM chains through the file Env
// writes.
func TestTheDevChainsFundTheStoresWallets(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	org := ids.New(ids.Organization)
	if err := s.CreateOrganization(ctx, &store.Organization{ID: org, Name: "Acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	evmKey, _ := keys.Generate(chain.Secp256k1)
	solKey, _ := keys.Generate(chain.Ed25519)
	// By chain: one wallet on each.
	planned := map[string]struct {
		chain, address string
		held           map[string]decimal.Decimal
	}{
		"ethereum": {"ethereum", evmKey.Address(), map[string]decimal.Decimal{"ETH": decimal.RequireFromString("12.5"), "USDC": decimal.RequireFromString("1000.000001")}},
		"polygon":  {"polygon", evmKey.Address(), map[string]decimal.Decimal{"MATIC": decimal.NewFromInt(7)}},
		"solana":   {"solana", solKey.SolanaAddress(), map[string]decimal.Decimal{"SOL": decimal.RequireFromString("3.25"), "USDC": decimal.NewFromInt(40)}},
	}
	for _, p := range planned {
		w := &store.Wallet{ID: ids.New(ids.Wallet), OrgID: org, Chain: p.chain, Address: p.address, PublicKey: "k", CreatedAt: time.Now()}
		if err := s.CreateWallet(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := s.ReplaceBalances(ctx, w.ID, p.held, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	c, err := Start(ctx, Options{Dir: dir, BlockTime: 50 * time.Millisecond, Store: s, HTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	router := c.Router()
	for name, p := range planned {
		got, err := router.Balances(ctx, p.chain, p.address)
		if err != nil {
			t.Fatal(err)
		}
		for asset, want := range p.held {
			if !got[asset].Equal(want) {
				t.Errorf("%s: %s %s on %s, want %s", name, got[asset], asset, p.chain, want)
			}
		}
	}

	env, err := c.Env(filepath.Join(dir, "evm-chains.json"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if len(env) != 1 || vars["CHAINS_FILE"] == "" {
		t.Fatalf("environment %v: want CHAINS_FILE alone", env)
	}
	// The file is what a treasury process reads, and what it reads reaches every chain.
	cfg, err := assemble.ConfigFromEnv(func(name string) string { return vars[name] })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.EVMChains) != 2 || cfg.Solana == nil {
		t.Fatalf("CHAINS_FILE read as %d EVM chains and Solana %+v", len(cfg.EVMChains), cfg.Solana)
	}
	for _, evmCfg := range cfg.EVMChains {
		remote, err := evm.Dial(ctx, evmCfg)
		if err != nil {
			t.Fatalf("%s from the file: %v", evmCfg.Name, err)
		}
		got, err := remote.Balances(ctx, evmCfg.Name, evmKey.Address())
		if err != nil || !got[evmCfg.NativeAsset].Equal(planned[evmCfg.Name].held[evmCfg.NativeAsset]) {
			t.Errorf("%s over HTTP: %v %v", evmCfg.Name, got, err)
		}
	}
	remote, err := solana.Dial(ctx, *cfg.Solana)
	if err != nil {
		t.Fatalf("solana from the file: %v", err)
	}
	if got, err := remote.Balances(ctx, "solana", solKey.SolanaAddress()); err != nil || !got["USDC"].Equal(decimal.NewFromInt(40)) {
		t.Errorf("solana from the file: %v %v", got, err)
	}
}
