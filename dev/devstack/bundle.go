package devstack

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devchains"
	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/devsigner"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/freeport"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/webhook"
)

// Options configure the dev bundle; the treasury-dev flags map onto them.
type Options struct {
	DataDir      string
	HTTPAddr     string
	TemporalPort int
	UIPort       int
	// HistoryShards of the embedded server; fixed when the data directory is created.
	HistoryShards int32
	// DatabaseURL puts the treasury store on PostgreSQL instead of SQLite in DataDir.
	DatabaseURL         string
	BalanceSyncInterval time.Duration
	ShutdownTimeout     time.Duration
	// RateLimit and RateBurst per credential (50/s and 100 when zero).
	RateLimit float64
	RateBurst int
	// SubmitDecisionWait bounds a submit's wait for the policy's decision (2 s when zero);
	// QueuedStartGrace is how long an accepted order's workflow has to run before a worker
	// starts it from the queue (30 s when zero).
	SubmitDecisionWait, QueuedStartGrace time.Duration
	// WorkerCacheSize is the worker's sticky cache of workflows (the SDK's 10,000 when
	// zero).
	WorkerCacheSize int
	// WSPingInterval is how often WebSocket clients are pinged (25 s when zero).
	WSPingInterval time.Duration
	// NoWSSendRing writes every live frame with its own system call, never through io_uring.
	NoWSSendRing bool
	// WebhookBackoffScale scales the webhook retry schedule (1 when zero); below 1 makes
	// retries come in seconds for tests and demos.
	WebhookBackoffScale float64
	// NoWebhookLoopback refuses webhooks to loopback addresses, as production does.
	NoWebhookLoopback bool
	// DevSigner signs the autoSign wallets' signing requests in-process.
	DevSigner bool
	// BlockTime and Confirmations of every chain (200 ms, 1 by default).
	BlockTime     time.Duration
	Confirmations int
	// PriceRefreshInterval is how often the worker reads the prices (15 s when zero);
	// PriceHeartbeat is the dev feeds' heartbeat (1 min when zero): a price is stale twice
	// it after its last round; PriceKeeperInterval is how often the keeper posts a round to
	// every dev feed (a third of the heartbeat when zero).
	PriceRefreshInterval, PriceHeartbeat, PriceKeeperInterval time.Duration
	// Prices move dev feeds to these USD prices at start (they stay on the chain);
	// HoldPrices are the assets whose feed the keeper leaves alone, so that their price
	// goes stale two heartbeats after its last round.
	Prices     map[string]decimal.Decimal
	HoldPrices []string
	// ReplaceStuckAfter is how long a transaction may stay below the fee market before its
	// replacement is asked for (30 s when zero).
	ReplaceStuckAfter time.Duration
	// TemporalLogLevel is the embedded server's own log level (default error).
	TemporalLogLevel string
	Log              *slog.Logger
}

// Bundle is a running dev bundle.
type Bundle struct {
	Credentials     *seed.Credentials
	CredentialsPath string
	APIURL          string
	TemporalAddr    string
	TemporalUIURL   string
	Namespace       string
	// Metrics are the bundle's collectors, the API's and the worker's in one; MetricsURL
	// serves them, beside the API on its own address.
	Metrics    *metrics.Metrics
	MetricsURL string

	proc     *assemble.Process
	temporal *Temporal
	// dev are the dev chains: ethereum and polygon in this process, solana a child process.
	dev *devchains.Chains
}

// Start brings the whole bundle up: store, embedded Temporal and UI, seed, worker, API.
// On error everything already started is stopped again.
func Start(ctx context.Context, opts Options) (*Bundle, error) {
	opts = opts.withDefaults()
	b := &Bundle{Namespace: "default", Metrics: metrics.New()}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, err
	}
	if err := freeport.Busy(opts.wantedPorts()...); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("API address %s (--http-addr): %w", opts.HTTPAddr, err)
	}
	b.APIURL = "http://" + ln.Addr().String()
	b.MetricsURL = b.APIURL + metrics.Path
	cfg, err := b.config(opts)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	// Passkeys want a domain, not an IP address: the console signs with them when opened
	// at http://localhost:<port>, which browsers treat as a secure context.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg.PasskeyRPID, cfg.PasskeyOrigins = "localhost", []string{"http://localhost:" + port}
	b.proc = assemble.NewProcess(cfg, "dev", opts.Log)
	p := b.proc
	err = p.Start(ctx,
		p.Database(),
		p.LiveChannel(),
		b.temporalServer(opts),
		b.seed(opts, ln),
		p.TemporalClient(),
		// A data directory made before a search attribute was added gets it now.
		assemble.Component{Name: "search attributes", Start: func(ctx context.Context) error {
			return assemble.RegisterSearchAttributes(ctx, p.Temporal, b.Namespace)
		}},
		p.Schedules(),
		b.devChains(opts),
		p.Worker(func() chain.Adapter { return b.dev.Router() }),
		p.QueuedStarts(),
		p.Webhooks(),
		devSigner(p, opts),
		// One process, one local address: /metrics is served beside the API, not apart
		// from it as treasury api serves it (see docs/metrics.md).
		p.HTTP(ln, func() http.Handler { return assemble.WithMetrics(assemble.NewAPIHandler(p), b.Metrics) }),
		p.LiveConnections(),
	)
	if err != nil {
		_ = ln.Close() // the HTTP server's once it serves, which it did not reach
		return nil, err
	}
	return b, nil
}

func (o Options) withDefaults() Options {
	o.DataDir = cmp.Or(o.DataDir, ".data")
	o.HTTPAddr = cmp.Or(o.HTTPAddr, "127.0.0.1:8080")
	o.BalanceSyncInterval = cmp.Or(o.BalanceSyncInterval, time.Minute)
	// Each step of a stop gets this; with the rest, a stop stays well under 10 s.
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, 3*time.Second)
	if o.Log == nil {
		o.Log = assemble.NewLogger(slog.LevelInfo).With("process", "dev")
	}
	return o
}

// wantedPorts are the addresses the bundle binds, with the flags that move them: all are
// checked before anything starts, so that a second bundle is told every clash at once.
func (o Options) wantedPorts() []freeport.Wanted {
	w := []freeport.Wanted{{Flag: "--http-addr", Addr: o.HTTPAddr}}
	if o.TemporalPort > 0 {
		w = append(w, freeport.Wanted{Flag: "--temporal-port", Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.TemporalPort))})
	}
	if o.UIPort > 0 {
		w = append(w, freeport.Wanted{Flag: "--ui-port", Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.UIPort))})
	}
	return w
}

// config is the configuration of the bundle's one process: the API's and the worker's.
func (b *Bundle) config(opts Options) (assemble.Config, error) {
	cfg := assemble.Config{
		DatabaseURL:          opts.DatabaseURL,
		SQLitePath:           filepath.Join(opts.DataDir, "treasury.db"),
		MigrateOnStart:       true,
		TemporalNamespace:    b.Namespace,
		RequestTimeout:       30 * time.Second,
		IdempotencyRetention: 24 * time.Hour,
		RateLimit:            opts.RateLimit,
		RateBurst:            opts.RateBurst,
		SubmitDecisionWait:   opts.SubmitDecisionWait,
		QueuedStartGrace:     opts.QueuedStartGrace,
		// A schedule every second can be watched run.
		PayoutMinInterval:    time.Second,
		WorkerCacheSize:      opts.WorkerCacheSize,
		OAuthTokenTTL:        15 * time.Minute,
		ShutdownTimeout:      opts.ShutdownTimeout,
		BalanceSyncInterval:  opts.BalanceSyncInterval,
		PriceRefreshInterval: cmp.Or(opts.PriceRefreshInterval, 15*time.Second),
		WSPingInterval:       opts.WSPingInterval,
		WSSendRing:           !opts.NoWSSendRing,
		Console:              true,
		Metrics:              b.Metrics,
		// The server is in this process: gzip on loopback is CPU for nothing.
		TemporalNoCompression: true,
		ReplaceStuckAfter:     cmp.Or(opts.ReplaceStuckAfter, 30*time.Second),
	}
	if opts.DatabaseURL != "" {
		cfg.SQLitePath = ""
	}
	// Webhooks: plain http to receivers on this machine is fine in development.
	var err error
	if cfg.WebhookSecretKey, err = webhook.KeyFile(filepath.Join(opts.DataDir, webhookKeyFile)); err != nil {
		return cfg, err
	}
	cfg.WebhookAllowHTTP, cfg.WebhookAllowLoopback, cfg.WebhookBackoffScale = true, !opts.NoWebhookLoopback, opts.WebhookBackoffScale
	if cfg.WebhookBackoffScale <= 0 {
		cfg.WebhookBackoffScale = 1
	}
	return cfg, nil
}

// temporalServer runs the embedded Temporal server and its UI.
func (b *Bundle) temporalServer(opts Options) assemble.Component {
	return assemble.Component{Name: "temporal server",
		Start: func(ctx context.Context) (err error) {
			b.temporal, err = StartTemporal(ctx, TemporalConfig{
				DataDir:          filepath.Join(opts.DataDir, "temporal"),
				Port:             opts.TemporalPort,
				UIPort:           opts.UIPort,
				Namespace:        b.Namespace,
				SearchAttributes: assemble.SearchAttributeTypes(),
				HistoryShards:    opts.HistoryShards,
				LogLevel:         opts.TemporalLogLevel,
				Log:              b.proc.Log,
			})
			if err != nil {
				return err
			}
			b.TemporalAddr, b.TemporalUIURL = b.temporal.FrontendAddr, b.temporal.UIURL
			b.proc.Config.TemporalAddress, b.proc.Config.TemporalUIURL = b.TemporalAddr, b.TemporalUIURL
			return nil
		},
		Stop: func(context.Context) error { b.temporal.Stop(); return nil },
	}
}

// seed makes (or finds) the demo organisation and its credentials file.
func (b *Bundle) seed(opts Options, ln net.Listener) assemble.Component {
	return assemble.Component{Name: "seed",
		Start: func(ctx context.Context) (err error) {
			urls := seed.URLs{BaseURL: b.APIURL, WSURL: "ws://" + ln.Addr().String(), TemporalUIURL: b.TemporalUIURL}
			if b.Credentials, err = seed.Ensure(ctx, b.proc.Store, opts.DataDir, urls, b.proc.Log); err != nil {
				return err
			}
			b.CredentialsPath = filepath.Join(opts.DataDir, seed.CredentialsFile)
			// The sign-in page is read in a browser, which knows nothing of this process's
			// working directory.
			b.proc.Config.ConsoleCredentialsFile, err = filepath.Abs(b.CredentialsPath)
			return err
		},
	}
}

// devSigner signs the autoSign wallets' signing requests in-process, unless turned off.
func devSigner(p *assemble.Process, opts Options) assemble.Component {
	if !opts.DevSigner {
		return assemble.Component{Name: "dev signer (off)"}
	}
	return devsigner.Component(p, opts.DataDir)
}

// devChains runs the dev chains (see devchains): ethereum and polygon as EVM chains in this
// process, solana as Solana's own runtime in a child process.
func (b *Bundle) devChains(opts Options) assemble.Component {
	return assemble.Component{Name: "dev chains",
		Start: func(ctx context.Context) (err error) {
			for _, w := range b.Credentials.Wallets {
				if w.Chain != devchains.SolanaChain && w.Scheme != chain.Secp256k1 {
					return fmt.Errorf("the data directory %s was made by an earlier version, whose %s wallets sign for a simulated chain: remove it to start over on the dev EVM chains", opts.DataDir, w.Chain)
				}
			}
			b.dev, err = devchains.Start(ctx, devchains.Options{Dir: opts.DataDir, BlockTime: opts.BlockTime,
				Confirmations: opts.Confirmations, Store: b.proc.Store, Spenders: devchains.SeededSpenders(opts.DataDir, b.Credentials), Log: b.proc.Log})
			if err != nil {
				return err
			}
			if err := b.keepPrices(ctx, opts); err != nil {
				_ = b.dev.Close()
				return err
			}
			// The API, in this process too, forwards /rpc/{chain} to the nodes themselves.
			b.proc.RPCNodes = b.dev.RPCNodes()
			return nil
		},
		Stop: func(context.Context) error { return b.dev.Close() },
	}
}

// keepPrices moves the dev feeds the options name, starts their keeper, and has the
// worker read them as it reads Chainlink's.
func (b *Bundle) keepPrices(ctx context.Context, opts Options) error {
	for _, asset := range slices.Sorted(maps.Keys(opts.Prices)) {
		if err := b.dev.EVM.SetPrice(ctx, asset, opts.Prices[asset]); err != nil {
			return err
		}
	}
	heartbeat := cmp.Or(opts.PriceHeartbeat, devevm.FeedHeartbeat)
	if err := b.dev.EVM.KeepFeeds(ctx, cmp.Or(opts.PriceKeeperInterval, heartbeat/3), opts.HoldPrices); err != nil {
		return err
	}
	b.proc.Config.PriceSources = b.dev.EVM.PriceSources(heartbeat)
	return nil
}

// webhookKeyFile holds the dev bundle's webhook sealing key, made on first start.
const webhookKeyFile = "webhook-key"

// Fund credits an address on one of the bundle's chains, as a faucet would: on an EVM
// chain a transfer from its faucet (or a mint of the token), on Solana an airdrop (or a
// mint of USDC).
func (b *Bundle) Fund(ctx context.Context, chainName, address, asset string, amount decimal.Decimal) error {
	return b.dev.Fund(ctx, chainName, address, asset, amount)
}

// SolanaRPCURL is the dev Solana chain's JSON-RPC endpoint.
func (b *Bundle) SolanaRPCURL() string { return b.dev.SVM.URL() }

// chainsLine says what runs each chain.
func (b *Bundle) chainsLine() string {
	var evmChains []string
	usdcTx := ""
	for _, spec := range devevm.Specs {
		evmChains = append(evmChains, fmt.Sprintf("%s (chain id %d)", spec.Name, spec.ChainID))
		if tx := b.dev.EVM.USDCDeployedIn(spec.Name); tx != "" && usdcTx == "" {
			usdcTx = fmt.Sprintf("\n                %s USDC deployed in transaction %s", spec.Name, tx)
		}
	}
	return strings.Join(evmChains, ", ") + ": EVM chains (go-ethereum) in this process\n                " +
		fmt.Sprintf("solana: Solana's own runtime (litesvm) in a child process at %s, USDC mint %s", b.dev.SVM.URL(), devsvm.USDCMint) + usdcTx
}

// Banner is what treasury-dev prints once it is ready.
func (b *Bundle) Banner(w io.Writer) {
	c := b.Credentials
	fmt.Fprintf(w, `
treasury-dev is ready (development only: secrets in the clear)

  Console       %s/console/
    sign in as  %s
    password    %s
    or member   %s, password %s (Approve and Developer on every app)
  API           %s/api/v1
  Temporal UI   %s
  Temporal      %s (namespace %s)
  Metrics       %s
  Credentials   %s
  Chains        %s
  Failures      a transfer to %s (EVM) or a USDC one to %s (Solana) fails on chain

  treasury sk   %s
  pay sk        %s
  pay approver  %s

  Try:  curl -H "Authorization: Bearer %s" %s/api/v1/treasury/portfolio

Press Ctrl-C to stop.
`, b.APIURL, c.Owner.Email, c.Owner.Password, c.Member.Email, c.Member.Password, b.APIURL, b.TemporalUIURL, b.TemporalAddr, b.Namespace, b.MetricsURL, b.CredentialsPath,
		b.chainsLine(), seed.EVMFailAddress, cmp.Or(c.SolanaFailAddress, devsvm.FrozenOwner), c.Keys["treasury"].SK, c.Keys["pay"].SK, c.Keys["pay"].Approve, c.Keys["treasury"].SK, b.APIURL)
}

// Wait blocks until ctx ends (nil) or a part of the bundle fails (its error; the API
// server stopped serving, say): the bundle is broken then.
func (b *Bundle) Wait(ctx context.Context) error { return b.proc.Wait(ctx) }

// Shutdown stops everything in the reverse of the start order: live connections close,
// the API drains, the dev signer, the webhook dispatcher and the worker stop, then the
// Temporal client and server, the live channel and the database.
func (b *Bundle) Shutdown() error {
	if b.temporal != nil {
		b.temporal.Quiet()
	}
	return b.proc.Stop()
}
