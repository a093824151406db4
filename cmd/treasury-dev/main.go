// Command treasury-dev runs the whole service on one machine: an embedded Temporal dev
// server with its Web UI, the worker, the API, a SQLite store, the dev chains (ethereum and
// polygon on go-ethereum, solana on Solana's own runtime) and a seeded demo organisation
// whose credentials it prints. For development only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/internal/assemble"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	switch {
	case len(args) >= 2 && args[0] == "temporal" && args[1] == "serve":
		return runTemporalServe(args[2:])
	case len(args) >= 1 && args[0] == "cluster":
		return runCluster(args[1:])
	}
	f, code := parseBundleFlags(args)
	if f == nil {
		return code
	}
	log := f.opts.Log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	b, err := devstack.Start(ctx, f.opts)
	if err != nil {
		log.Error("treasury-dev could not start", "error", err.Error())
		return 1
	}
	log.Info("ready", "api", b.APIURL, "temporalUi", b.TemporalUIURL, "credentials", b.CredentialsPath,
		"startupMs", time.Since(started).Milliseconds())
	b.Banner(os.Stdout)
	if f.cpuProfile != "" {
		stopProfile, err := profileCPU(f.cpuProfile)
		if err != nil {
			log.Error("no CPU profile", "error", err.Error())
		} else {
			defer stopProfile()
		}
	}
	if f.allocProfile != "" {
		defer writeAllocProfile(f.allocProfile, log)
	}

	code = 0
	if err := b.Wait(ctx); err != nil {
		log.Error("a part of the bundle failed; shutting down", "error", err.Error())
		code = 1
	}
	stop()
	log.Info("shutting down")
	stopping := time.Now()
	if err := b.Shutdown(); err != nil {
		log.Error("shutdown", "error", err.Error())
		return 1
	}
	log.Info("stopped", "shutdownMs", time.Since(stopping).Milliseconds())
	return code
}

// bundleFlags are the dev bundle's options and the profiles asked for on the command line.
type bundleFlags struct {
	opts                     devstack.Options
	cpuProfile, allocProfile string
}

// parseBundleFlags reads the flags; nil with the exit code when the process should end.
func parseBundleFlags(args []string) (*bundleFlags, int) {
	fs := flag.NewFlagSet("treasury-dev", flag.ContinueOnError)
	dataDir := fs.String("data-dir", ".data", "directory for the SQLite databases and credentials.json")
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "address of the API")
	temporalPort := fs.Int("temporal-port", 7233, "port of the embedded Temporal frontend (gRPC)")
	uiPort := fs.Int("ui-port", 8233, "port of the Temporal Web UI (-1 disables it)")
	shards := fs.Int("history-shards", 1, "history shards of the embedded Temporal server (fixed when the data dir is created)")
	syncEvery := fs.Duration("balance-sync-interval", time.Minute, "how often the Temporal Schedule refreshes wallet balances")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	devSigner := fs.Bool("dev-signer", true, "sign the autoSign wallets' signing requests in-process")
	blockTime := fs.Duration("block-time", 200*time.Millisecond, "block time of the chains (the EVM chains seal a block this often while transactions wait)")
	confirmations := fs.Int("confirmations", 1, "blocks a transaction waits before it is final, on every chain")
	replaceAfter := fs.Duration("replace-stuck-after", 30*time.Second, "how long a transaction may stay below the fee market before the worker asks for its replacement")
	rateLimit := fs.Float64("rate-limit", 50, "API requests per second per credential")
	rateBurst := fs.Int("rate-burst", 100, "API request burst per credential")
	decisionWait := fs.Duration("submit-decision-wait", 2*time.Second, "how long a submit waits for the policy's decision once the workflow is durably started (then 202 with policyDecision pending)")
	cacheSize := fs.Int("worker-cache-size", 10000, "workflows the worker keeps in memory between their tasks (WORKER_CACHE_SIZE)")
	wsPing := fs.Duration("ws-ping-interval", 25*time.Second, "how often WebSocket clients are pinged; a pong must follow within 10 s")
	wsRing := fs.Bool("ws-send-ring", true, "batch the live channel's sends through io_uring where the kernel allows it; false writes each frame with its own system call")
	hookScale := fs.Float64("webhook-backoff-scale", 1, "multiplies the webhook retry schedule (5 s … 10 h); 0.001 makes retries come in milliseconds to seconds")
	hookLoopback := fs.Bool("webhook-allow-loopback", true, "let webhooks go to loopback addresses (receivers on this machine); false refuses them as production does")
	temporalLogLevel := fs.String("temporal-log-level", "error", "log level of the embedded Temporal server")
	priceEvery := fs.Duration("price-refresh-interval", 15*time.Second, "how often the Temporal Schedule reads every price feed")
	f := &bundleFlags{}
	fs.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile (pprof) of the whole process to this file, from ready to shutdown")
	fs.StringVar(&f.allocProfile, "alloc-profile", "", "write an allocation profile (pprof) of the whole process to this file at shutdown")
	prices := addPriceFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: treasury-dev [flags]\n       treasury-dev temporal serve --postgres URL [flags]\n       treasury-dev cluster [flags]\n\nRuns the treasury dev bundle. DATABASE_URL, when set, puts the store on PostgreSQL.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, 0
		}
		return nil, 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "treasury-dev: --log-level must be debug, info, warn or error")
		return nil, 2
	}
	f.opts = devstack.Options{
		DataDir:              *dataDir,
		HTTPAddr:             *httpAddr,
		TemporalPort:         *temporalPort,
		UIPort:               *uiPort,
		HistoryShards:        int32(*shards),
		DatabaseURL:          os.Getenv("DATABASE_URL"),
		BalanceSyncInterval:  *syncEvery,
		TemporalLogLevel:     *temporalLogLevel,
		DevSigner:            *devSigner,
		BlockTime:            *blockTime,
		Confirmations:        *confirmations,
		ReplaceStuckAfter:    *replaceAfter,
		RateLimit:            *rateLimit,
		RateBurst:            *rateBurst,
		SubmitDecisionWait:   *decisionWait,
		WorkerCacheSize:      *cacheSize,
		WSPingInterval:       *wsPing,
		NoWSSendRing:         !*wsRing,
		WebhookBackoffScale:  *hookScale,
		NoWebhookLoopback:    !*hookLoopback,
		PriceRefreshInterval: *priceEvery,
		Prices:               prices.moved,
		HoldPrices:           prices.held,
		Log:                  assemble.NewLogger(level).With("process", "treasury-dev"),
	}
	return f, 0
}

// priceFlags are --price and --hold-price, which move and hold the dev price feeds.
type priceFlags struct {
	moved map[string]decimal.Decimal
	held  []string
}

func addPriceFlags(fs *flag.FlagSet) *priceFlags {
	p := &priceFlags{}
	fs.Func("price", "ASSET=USD: move an asset's dev price feed at start (repeatable; the price stays on the chain across restarts)", func(v string) error {
		asset, usd, ok := strings.Cut(v, "=")
		price, err := decimal.NewFromString(strings.TrimSpace(usd))
		if !ok || strings.TrimSpace(asset) == "" || err != nil || !price.IsPositive() {
			return fmt.Errorf("want ASSET=USD with a positive price, such as ETH=3500")
		}
		if p.moved == nil {
			p.moved = map[string]decimal.Decimal{}
		}
		p.moved[strings.ToUpper(strings.TrimSpace(asset))] = price
		return nil
	})
	fs.Func("hold-price", "ASSET[,ASSET…]: the price keeper stops posting to these assets' dev feeds, so their prices go stale two heartbeats (2 min) after their last round and their orders are refused price_unavailable", func(v string) error {
		for _, a := range splitList(v) {
			p.held = append(p.held, strings.ToUpper(a))
		}
		return nil
	})
	return p
}

// splitList reads a comma-separated list.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// profileCPU starts a CPU profile into path; the returned function ends it.
func profileCPU(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// writeAllocProfile writes every allocation since the process started (the heap
// profile's alloc_space and alloc_objects) to path.
func writeAllocProfile(path string, log *slog.Logger) {
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		log.Error("no allocation profile", "error", err.Error())
	}
}
