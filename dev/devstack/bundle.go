package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/opentreasury/treasury/assemble"
	"github.com/opentreasury/treasury/chain/devchain"
	"github.com/opentreasury/treasury/dev/devsigner"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/metrics"
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/webhook"
	"github.com/opentreasury/treasury/worker"
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
	// BlockTime and Confirmations of the devchain (200 ms, 1 by default).
	BlockTime     time.Duration
	Confirmations int
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

	opts       Options
	log        *slog.Logger
	store      *store.Store
	temporal   *Temporal
	client     client.Client
	worker     sdkworker.Worker
	listener   net.Listener
	stopSigner context.CancelFunc
	signerDone chan struct{}
	http       *http.Server
	live       *assemble.Live
	webhooks   *assemble.Webhooks
	// serveDone closes when the API server stops serving; serveErr says why.
	serveDone chan struct{}
	serveErr  error
}

// Start brings the whole bundle up: store, embedded Temporal and UI, seed, worker, API.
// On error everything already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Bundle, err error) {
	if opts.DataDir == "" {
		opts.DataDir = ".data"
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "127.0.0.1:8080"
	}
	if opts.BalanceSyncInterval == 0 {
		opts.BalanceSyncInterval = time.Minute
	}
	if opts.ShutdownTimeout == 0 {
		// Drain and worker stop each get this; with the rest, a stop stays well under 10 s.
		opts.ShutdownTimeout = 3 * time.Second
	}
	log := opts.Log
	if log == nil {
		log = assemble.NewLogger(slog.LevelInfo)
	}
	b := &Bundle{opts: opts, log: log, Namespace: "default", Metrics: metrics.New()}
	defer func() {
		if err != nil {
			_ = b.stop()
		}
	}()
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("API address %s: %w", opts.HTTPAddr, err)
	}
	b.listener = ln
	b.APIURL = "http://" + ln.Addr().String()
	b.MetricsURL = b.APIURL + metrics.Path

	cfg := assemble.Config{
		DatabaseURL:          opts.DatabaseURL,
		SQLitePath:           filepath.Join(opts.DataDir, "treasury.db"),
		MigrateOnStart:       true,
		TemporalNamespace:    b.Namespace,
		RequestTimeout:       30 * time.Second,
		IdempotencyRetention: 24 * time.Hour,
		RateLimit:            opts.RateLimit,
		RateBurst:            opts.RateBurst,
		OAuthTokenTTL:        15 * time.Minute,
		ShutdownTimeout:      opts.ShutdownTimeout,
		BalanceSyncInterval:  opts.BalanceSyncInterval,
		Console:              true,
		Metrics:              b.Metrics,
		// The server is in this process: gzip on loopback is CPU for nothing.
		TemporalNoCompression: true,
	}
	if opts.DatabaseURL != "" {
		cfg.SQLitePath = ""
	}
	// Webhooks: plain http to receivers on this machine is fine in development.
	if cfg.WebhookSecretKey, err = webhook.KeyFile(filepath.Join(opts.DataDir, webhookKeyFile)); err != nil {
		return nil, err
	}
	cfg.WebhookAllowHTTP, cfg.WebhookAllowLoopback, cfg.WebhookBackoffScale = true, !opts.NoWebhookLoopback, opts.WebhookBackoffScale
	if cfg.WebhookBackoffScale <= 0 {
		cfg.WebhookBackoffScale = 1
	}
	if b.store, err = assemble.OpenStore(ctx, cfg, log); err != nil {
		return nil, err
	}
	b.live = assemble.StartLive(b.store, assemble.LiveOptions{PingInterval: opts.WSPingInterval, NoSendRing: opts.NoWSSendRing,
		Metrics: b.Metrics}, log)

	b.temporal, err = StartTemporal(ctx, TemporalConfig{
		DataDir:          filepath.Join(opts.DataDir, "temporal"),
		Port:             opts.TemporalPort,
		UIPort:           opts.UIPort,
		Namespace:        b.Namespace,
		SearchAttributes: assemble.SearchAttributeTypes(),
		HistoryShards:    opts.HistoryShards,
		LogLevel:         opts.TemporalLogLevel,
		Log:              log,
	})
	if err != nil {
		return nil, err
	}
	b.TemporalAddr, b.TemporalUIURL = b.temporal.FrontendAddr, b.temporal.UIURL
	cfg.TemporalAddress, cfg.TemporalUIURL = b.TemporalAddr, b.TemporalUIURL

	urls := seed.URLs{BaseURL: b.APIURL, WSURL: "ws://" + ln.Addr().String(), TemporalUIURL: b.TemporalUIURL}
	if b.Credentials, err = seed.Ensure(ctx, b.store, opts.DataDir, urls, log); err != nil {
		return nil, err
	}
	b.CredentialsPath = filepath.Join(opts.DataDir, seed.CredentialsFile)
	// The sign-in page is read in a browser, which knows nothing of this process's
	// working directory.
	if cfg.ConsoleCredentialsFile, err = filepath.Abs(b.CredentialsPath); err != nil {
		return nil, err
	}

	if b.client, err = assemble.DialTemporal(ctx, cfg, log); err != nil {
		return nil, err
	}
	// A data directory made before a search attribute was added gets it now.
	if err := assemble.RegisterSearchAttributes(ctx, b.client, b.Namespace); err != nil {
		return nil, err
	}
	if err := worker.EnsureSchedules(ctx, b.client, opts.BalanceSyncInterval); err != nil {
		return nil, err
	}
	dev := devchain.New(b.store)
	if opts.BlockTime > 0 {
		dev.BlockTime = opts.BlockTime
	}
	if opts.Confirmations > 0 {
		dev.Confirmations = opts.Confirmations
	}
	b.worker = assemble.NewWorker(b.store, dev, b.client, log, opts.ShutdownTimeout)
	if err := b.worker.Start(); err != nil {
		b.worker = nil
		return nil, fmt.Errorf("start worker: %w", err)
	}

	b.webhooks = assemble.StartWebhooks(b.store, b.live.Follower, cfg.WebhookOptions(), cfg.WebhookBackoffScale, b.Metrics, log)

	if opts.DevSigner {
		keys, err := seed.LoadSignerKeys(opts.DataDir)
		if err != nil {
			return nil, err
		}
		signerCtx, cancel := context.WithCancel(context.Background())
		b.stopSigner = cancel
		svc := &service.Service{Store: b.store, Workflows: assemble.TemporalOrders{Client: b.client}, Log: log}
		signer := devsigner.New(b.store, svc, keys, log.With("component", "dev-signer"))
		unsubscribe := b.live.Follower.Subscribe(signer)
		b.signerDone = make(chan struct{})
		go func() {
			defer close(b.signerDone)
			defer unsubscribe()
			signer.Run(signerCtx)
		}()
	}

	// One process, one local address: /metrics is served beside the API, not apart from
	// it as treasury api serves it (see docs/metrics.md).
	b.http = assemble.NewHTTPServer(ln.Addr().String(), assemble.WithMetrics(assemble.NewAPIHandler(cfg, b.store, b.client, b.live, log), b.Metrics))
	b.serveDone = make(chan struct{})
	go func() {
		b.serveErr = b.http.Serve(ln)
		close(b.serveDone)
	}()
	b.listener = nil // owned by the server now
	return b, nil
}

// webhookKeyFile holds the dev bundle's webhook sealing key, made on first start.
const webhookKeyFile = "webhook-key"

// Banner is what treasury-dev prints once it is ready.
func (b *Bundle) Banner(w io.Writer) {
	c := b.Credentials
	fmt.Fprintf(w, `
treasury-dev is ready (development only: simulated chain, secrets in the clear)

  Console       %s/console/
    sign in as  %s
    password    %s
  API           %s/api/v1
  Temporal UI   %s
  Temporal      %s (namespace %s)
  Metrics       %s
  Credentials   %s

  treasury sk   %s
  pay sk        %s
  pay approver  %s

  Try:  curl -H "Authorization: Bearer %s" %s/api/v1/treasury/portfolio

Press Ctrl-C to stop.
`, b.APIURL, c.Owner.Email, c.Owner.Password, b.APIURL, b.TemporalUIURL, b.TemporalAddr, b.Namespace, b.MetricsURL, b.CredentialsPath,
		c.Keys["treasury"].SK, c.Keys["pay"].SK, c.Keys["pay"].Approve, c.Keys["treasury"].SK, b.APIURL)
}

// Done is closed if the API server stops serving before Shutdown: the bundle is broken.
func (b *Bundle) Done() <-chan struct{} { return b.serveDone }

// Shutdown stops everything in order: the API drains, the worker stops, the Temporal
// server stops, the database closes.
func (b *Bundle) Shutdown() error {
	return b.stop()
}

func (b *Bundle) stop() error {
	var errs []error
	if b.temporal != nil {
		b.temporal.Quiet()
	}
	if b.http != nil || b.live != nil {
		assemble.StopServing(b.http, b.live, b.opts.ShutdownTimeout, b.log)
		b.live = nil
	}
	if b.http != nil {
		<-b.serveDone
		if b.serveErr != nil && !errors.Is(b.serveErr, http.ErrServerClosed) {
			errs = append(errs, b.serveErr)
		}
		b.http = nil
	}
	if b.listener != nil {
		_ = b.listener.Close()
		b.listener = nil
	}
	if b.stopSigner != nil {
		b.stopSigner()
		<-b.signerDone
		b.stopSigner = nil
	}
	if b.webhooks != nil {
		b.webhooks.Stop()
		b.webhooks = nil
	}
	if b.worker != nil {
		b.worker.Stop()
		b.worker = nil
	}
	if b.client != nil {
		b.client.Close()
		b.client = nil
	}
	if b.temporal != nil {
		b.temporal.Stop()
		b.temporal = nil
	}
	if b.store != nil {
		if err := b.store.Close(); err != nil {
			errs = append(errs, err)
		}
		b.store = nil
	}
	return errors.Join(errs...)
}
