// Package gethe2e is the end-to-end suite against separate nodes: `geth --dev` runs as a
// process of its own, the dev contracts are deployed on it and the seeded ethereum wallets
// funded from its developer account; Solana's runtime runs as another (dev/devsvm), the
// seeded Solana wallets funded on it; and the production topology (dev/cluster: Temporal on
// PostgreSQL, two `treasury api` and two `treasury worker` processes) serves ethereum from
// geth through CHAINS_FILE, at a depth of two confirmations, and solana from the SVM
// through SOLANA_RPC_URL, at the confirmed commitment. The processes reach each node through
// a pass-through proxy of the test's, which tests arm to kill the workers between a
// broadcast and its commit (and the Solana one follows the node to its new port when a test
// restarts it). The Solana tests (TestSolana…) run as make test-solana, the others as make
// test-geth. The tests drive the service through its public API
// with the Go client, as an integrator would, and check what reached the chain over
// JSON-RPC against geth directly: receipts, logs, balances, nonces.
//
// It builds nothing: make test-geth builds bin/geth (from the go-ethereum module go.mod
// pins as a tool), bin/treasury and bin/treasury-dev, and sets GETH_BIN, TREASURY_BIN and
// TREASURY_DEV_BIN. The node and the cluster start once, with the first test, and serve
// every test in turn; the tests do not run in parallel, because several count what one
// wallet sent.
package gethe2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/cluster"
	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/freeport"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// confirmations is the depth the worker waits for on geth: more than one, so that a leg
// confirmed at the first block would show.
const confirmations = 2

// svmSlot is the SVM's slot time.
const svmSlot = 100 * time.Millisecond

// The suite's databases on the PostgreSQL server (dropped before and after).
const databaseName = "treasury_gethe2e"

func TestMain(m *testing.M) {
	for _, v := range []string{"GETH_BIN", "TREASURY_BIN", "TREASURY_DEV_BIN"} {
		if os.Getenv(v) == "" {
			fmt.Println("gethe2e: set GETH_BIN, TREASURY_BIN and TREASURY_DEV_BIN (make test-geth does); skipping")
			os.Exit(0)
		}
	}
	code := m.Run()
	if the != nil {
		if err := the.stop(code != 0 || setupErr != nil); err != nil {
			fmt.Println("gethe2e: stopping:", err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

var (
	once     sync.Once
	the      *suite
	setupErr error
)

// env returns the running node and cluster, starting them on the first call.
func env(t *testing.T) *suite {
	t.Helper()
	once.Do(func() {
		started := time.Now()
		the, setupErr = start()
		fmt.Printf("gethe2e: geth and the cluster ready in %s\n", time.Since(started).Round(time.Second))
	})
	if setupErr != nil {
		t.Fatalf("starting geth and the cluster: %v", setupErr)
	}
	return the
}

// suite is geth, the cluster serving ethereum from it, and the integrator's view of both.
type suite struct {
	dir, chainsFile, postgres string

	geth *gethNode
	// proxy passes the treasury processes' JSON-RPC calls to geth (see rpcProxy).
	proxy   *rpcProxy
	eth     *ethclient.Client
	cluster *cluster.Cluster
	// chain is the deployment on geth, as the workers read it from CHAINS_FILE.
	chain evm.Config

	// svm is Solana's runtime, svmProxy the proxy the treasury processes reach it through,
	// svmInfo its chain, and sol the test's own reader of it (straight to the node).
	svm      *devsvm.Node
	svmProxy *rpcProxy
	svmInfo  devsvm.Info
	sol      *solana.Chain
	// solPayer is the first autoSign Solana wallet.
	solPayer seed.Wallet

	// payer is the first autoSign ethereum wallet: it granted the dev contracts their
	// allowances at deployment and sends every order but the fifty payments. fresh is the
	// second: it has sent nothing before the fifty payments, so their nonces are 0..49.
	payer, fresh seed.Wallet

	// writers create and submit orders (each app's sk); readers read them (its read key).
	writers, readers map[string]*client.Client
}

// start runs geth, then the cluster, deploying the dev contracts on geth between the seed
// and the treasury processes (cluster.Options.AfterSeed). It returns what it started even
// on an error, for stop.
func start() (*suite, error) {
	dir, err := os.MkdirTemp("", "gethe2e-")
	if err != nil {
		return nil, err
	}
	s := &suite{dir: dir, chainsFile: filepath.Join(dir, "evm-chains.json"),
		postgres: os.Getenv("GETHE2E_POSTGRES"), writers: map[string]*client.Client{}, readers: map[string]*client.Client{}}
	if s.postgres == "" {
		s.postgres = "postgres://postgres@127.0.0.1:5432/?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if s.geth, err = startGeth(ctx, os.Getenv("GETH_BIN"), filepath.Join(dir, "geth")); err != nil {
		return s, err
	}
	if s.eth, err = ethclient.DialContext(ctx, s.geth.url); err != nil {
		return s, err
	}
	s.proxy = startProxy(s.geth.url)
	// The node outlives the start's context: it stops with the suite.
	if s.svm, err = devsvm.Start(context.Background(), devsvm.Options{Dir: s.svmDir(), SlotTime: svmSlot}); err != nil {
		return s, err
	}
	s.svmProxy = startProxy(s.svm.URL())
	if s.svmInfo, err = s.svm.Info(ctx); err != nil {
		return s, err
	}
	if s.sol, err = s.readerOf(s.svm); err != nil {
		return s, err
	}
	if err := cluster.DropDatabases(ctx, s.postgres, databaseName); err != nil {
		return s, err
	}
	// The one-shot setup (migrate, temporal setup) reads the configuration before the seed
	// has made the wallets: it finds no chain in the file yet. deploy fills it in before
	// the workers start.
	if err := os.WriteFile(s.chainsFile, []byte("[]\n"), 0o600); err != nil {
		return s, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = freeport.OrFree("127.0.0.1", 0); err != nil {
			return s, err
		}
	}
	s.cluster, err = cluster.Start(ctx, cluster.Options{
		TreasuryBin: os.Getenv("TREASURY_BIN"), DevBin: os.Getenv("TREASURY_DEV_BIN"),
		Postgres: s.postgres, Name: databaseName, DataDir: filepath.Join(dir, "cluster"),
		APIPorts: ports[:2], TemporalPort: ports[2], UIPort: ports[3],
		// ethereum from geth, solana from the SVM; polygon is not served. Balances are
		// read back every 5 s so that the service's positions can be compared with the
		// chain's.
		NoDevChains: true,
		Env: []string{"CHAINS=ethereum,solana", "CHAINS_FILE=" + s.chainsFile,
			"SOLANA_RPC_URL=" + s.svmProxy.url(), "SOLANA_USDC_MINT=" + s.svmInfo.USDCMint,
			"SOLANA_GENESIS_HASH=" + s.svmInfo.GenesisHash, "SOLANA_COMMITMENT=confirmed",
			"RATE_LIMIT=100000", "RATE_BURST=100000", "BALANCE_SYNC_INTERVAL=5s",
			"REPLACE_STUCK_AFTER=3s"},
		AfterSeed: s.deploy,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return s, err
	}
	for app, keys := range s.cluster.Credentials.Keys {
		// The apps' clients go to both APIs in turn.
		base := s.cluster.APIURLs[len(s.writers)%len(s.cluster.APIURLs)]
		if s.writers[app], err = client.New(base, client.WithToken(keys.SK)); err != nil {
			return s, err
		}
		if s.readers[app], err = client.New(base, client.WithToken(keys.Read)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// deploy runs between the seed and the treasury processes: it deploys the dev contracts on
// geth from the developer account, funds every seeded ethereum wallet with its SPEC 10
// holdings, has the payer grant the vaults and pools their allowances, and writes the
// chain's configuration where CHAINS_FILE points.
func (s *suite) deploy(ctx context.Context, c *cluster.Cluster) error {
	if err := s.fundSolana(ctx, c); err != nil {
		return err
	}
	var autoSign []seed.Wallet
	funds := map[common.Address]map[string]decimal.Decimal{}
	planned, err := c.Store().ChainHoldings(ctx, "ethereum")
	if err != nil {
		return err
	}
	for _, w := range c.Credentials.Wallets {
		if w.Chain != "ethereum" {
			continue
		}
		funds[common.HexToAddress(w.Address)] = planned[w.Address]
		if w.AutoSign {
			autoSign = append(autoSign, w)
		}
	}
	if len(autoSign) < 2 {
		return fmt.Errorf("the seed made %d autoSign ethereum wallets; the suite needs two", len(autoSign))
	}
	s.payer, s.fresh = autoSign[0], autoSign[1]
	keys, err := seed.WalletKeys(filepath.Join(s.dir, "cluster"))
	if err != nil {
		return err
	}
	payerKey := keys[s.payer.ID].ECDSA()
	if payerKey == nil {
		return errors.New("the payer's key is not a secp256k1 key")
	}
	prices := map[string]decimal.Decimal{}
	for asset, price := range seed.Prices {
		prices[asset] = decimal.RequireFromString(price)
	}
	spec := devevm.Specs[0]
	if spec.Name != "ethereum" {
		return fmt.Errorf("devevm.Specs[0] is %s, not ethereum", spec.Name)
	}
	d := &devevm.Deployer{Client: s.eth, Key: s.geth.faucet} // geth mines on its own
	cfg, err := d.Deploy(ctx, devevm.Plan{Name: spec.Name, ChainID: spec.ChainID, NativeAsset: spec.NativeAsset,
		Tokens: spec.Tokens, PricesUSD: prices, Protocols: devevm.Protocols, Funds: funds,
		Spenders: []*ecdsa.PrivateKey{payerKey}})
	if err != nil {
		return fmt.Errorf("deploying on geth: %w", err)
	}
	cfg.RPCURL, cfg.Confirmations, cfg.BlockTime = s.proxy.url(), confirmations, evm.Duration(time.Second)
	// geth --dev's blocks hold 11.5 M gas: a part of 60 fresh recipients needs 8.3 M with
	// the adapter's headroom, where the default part of 100 would need 14 M.
	cfg.BatchPartSize = batchPartSize
	s.chain = cfg
	raw, err := json.MarshalIndent([]evm.Config{cfg}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(s.chainsFile, raw, 0o600)
}

func (s *suite) svmDir() string { return filepath.Join(s.dir, "solana") }

// readerOf is the test's own reader of the SVM, straight to the node.
func (s *suite) readerOf(n *devsvm.Node) (*solana.Chain, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return solana.Dial(ctx, solana.Config{Name: "solana", RPCURL: n.URL(), Commitment: "confirmed", SlotTime: solana.Duration(svmSlot),
		Tokens: []solana.Token{{Symbol: "USDC", Mint: s.svmInfo.USDCMint, Decimals: int32(s.svmInfo.USDCDecimals)}}})
}

// fundSolana credits every seeded Solana wallet on the SVM with its SPEC 10 holdings.
func (s *suite) fundSolana(ctx context.Context, c *cluster.Cluster) error {
	planned, err := c.Store().ChainHoldings(ctx, "solana")
	if err != nil {
		return err
	}
	for _, w := range c.Credentials.Wallets {
		if w.Chain != "solana" {
			continue
		}
		if w.AutoSign && s.solPayer.ID == "" {
			s.solPayer = w
		}
		for asset, amount := range planned[w.Address] {
			if err := s.svm.Fund(ctx, w.Address, asset, amount); err != nil {
				return fmt.Errorf("funding %s on the SVM: %w", w.Address, err)
			}
		}
	}
	if s.solPayer.ID == "" {
		return errors.New("the seed made no autoSign Solana wallet")
	}
	return nil
}

// stop shuts the cluster down, then geth, and removes what they made; after a failure it
// prints the tail of every log first and keeps the directory.
func (s *suite) stop(failed bool) error {
	if failed {
		dumpLogs(s.dir)
	}
	var errs []error
	if s.cluster != nil {
		errs = append(errs, s.cluster.Shutdown())
	}
	if s.proxy != nil {
		s.proxy.close()
	}
	if s.eth != nil {
		s.eth.Close()
	}
	if s.geth != nil {
		errs = append(errs, s.geth.stop())
	}
	if s.svmProxy != nil {
		s.svmProxy.close()
	}
	if s.svm != nil {
		errs = append(errs, s.svm.Stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs = append(errs, cluster.DropDatabases(ctx, s.postgres, databaseName))
	if failed {
		fmt.Println("gethe2e: logs kept in", s.dir)
	} else {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// dumpLogs prints the tail of geth's log and of every cluster process's.
func dumpLogs(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "cluster", "logs", "*.log"))
	files = append(files, filepath.Join(dir, "geth", "geth.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		for i, l := range lines {
			if len(l) > 400 {
				lines[i] = l[:400] + "…"
			}
		}
		fmt.Printf("== %s\n%s\n", f, strings.Join(lines, "\n"))
	}
}
