package assemble

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/rpcproxy"
	"github.com/opentreasury/treasury/internal/console"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/prices"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/worker"
	"github.com/opentreasury/treasury/workflows"
)

// SearchAttributeTypes are the custom search attributes the order workflows set, by name,
// as a namespace registers them.
func SearchAttributeTypes() map[string]enumspb.IndexedValueType {
	out := make(map[string]enumspb.IndexedValueType, len(workflows.SearchAttributes))
	for _, k := range workflows.SearchAttributes {
		out[k.GetName()] = k.GetValueType()
	}
	return out
}

// OpenStore connects to the configured database and, unless disabled, migrates it. The
// events its transactions commit are counted into cfg.Metrics.
func OpenStore(ctx context.Context, cfg Config, log *slog.Logger) (*store.Store, error) {
	s, err := store.Open(ctx, store.Config{DatabaseURL: cfg.DatabaseURL, SQLitePath: cfg.SQLitePath, NoWriterGate: cfg.SQLiteNoWriterGate})
	if err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		s.OnEventNamesCommitted(cfg.Metrics.EventsCommitted)
	}
	if cfg.DatabaseURL != "" {
		log.Info("store on PostgreSQL", "database", store.RedactDatabaseURL(cfg.DatabaseURL))
	} else {
		log.Info("store on SQLite", "path", cfg.SQLitePath)
	}
	if cfg.MigrateOnStart {
		if err := s.Migrate(ctx, log); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// DialTemporal connects a Temporal client, waiting up to a minute for the frontend. The
// SDK reports its metrics (and those of workers built on the client) into cfg.Metrics.
func DialTemporal(ctx context.Context, cfg Config, log *slog.Logger) (client.Client, error) {
	opts := client.Options{
		HostPort:       cfg.TemporalAddress,
		Namespace:      cfg.TemporalNamespace,
		Logger:         sdklog.NewStructuredLogger(log.With("component", "temporal-sdk")),
		MetricsHandler: cfg.Metrics.Temporal(),
	}
	if cfg.TemporalNoCompression {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if cfg.TemporalTLS || cfg.TemporalAPIKey != "" || cfg.TemporalTLSCertFile != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TemporalTLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(cfg.TemporalTLSCertFile, cfg.TemporalTLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("temporal mTLS: %w", err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		opts.ConnectionOptions.TLS = t
	}
	if cfg.TemporalAPIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.TemporalAPIKey)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
		}
		log.Warn("Temporal not reachable yet; retrying", "address", cfg.TemporalAddress, "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// RegisterSearchAttributes adds the custom search attributes to a namespace; the ones
// already there are left alone, so it is safe to run at every start.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range SearchAttributeTypes() {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}

// NewAPIHandler builds the API's HTTP handler over the process's store, service, Temporal
// client and live channel, with the console's pages beside the routes when configured:
// both on the one service, authenticator and sign-in service of the process.
func NewAPIHandler(p *Process) http.Handler {
	cfg := p.Config
	ready := []api.ReadinessCheck{{Name: "database", Check: p.Store.Ping}}
	if tc := p.Temporal; tc != nil {
		ready = append(ready, api.ReadinessCheck{Name: "temporal", Check: func(ctx context.Context) error {
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}})
	}
	routes := api.Config{
		Service:              p.Service(),
		Authn:                auth.NewAuthenticator(p.credentials()),
		Live:                 p.Live.Hub,
		RequestLogs:          p.Live.RequestLogs,
		Store:                p.Store,
		Log:                  p.Log,
		RequestTimeout:       cfg.RequestTimeout,
		IdempotencyRetention: cfg.IdempotencyRetention,
		RateLimit:            cfg.RateLimit,
		RateBurst:            cfg.RateBurst,
		RPCRateLimit:         cfg.RPCRateLimit,
		RPCRateBurst:         cfg.RPCRateBurst,
		OAuthTokenTTL:        cfg.OAuthTokenTTL,
		SessionTTL:           cfg.SessionTTL,
		TrustedProxies:       cfg.TrustedProxyList(),
		Metrics:              cfg.Metrics,
		Readiness:            ready,
		RPCNodes:             p.rpcNodes(),
		PublicURL:            cfg.PublicURL,
	}
	routes.Sessions = api.NewSessions(routes)
	if cfg.Console {
		pages, err := console.New(console.Config{Service: routes.Service, Sessions: routes.Sessions, Authn: routes.Authn,
			Log: p.Log, Options: console.Options{TemporalUIURL: cfg.TemporalUIURL, Namespace: cfg.TemporalNamespace, PublicURL: cfg.PublicURL,
				CredentialsFile: cfg.ConsoleCredentialsFile}})
		if err != nil {
			// The pages are embedded in the binary: one that does not parse is a defect of
			// the build, which no configuration mends.
			panic("console pages do not parse: " + err.Error())
		}
		routes.Pages = pages
	}
	return api.NewRouter(routes)
}

// credentialMaxAge bounds how long a process may go on accepting a revoked key whose
// revocation it did not hear announced (the bus lost it); an announced one fails at once.
const credentialMaxAge = 30 * time.Second

// credentials are the keys and access tokens the process's authenticator reads: the
// store's, remembered until the bus announces their revocation (or it reconnects, having
// perhaps missed announcements), at most credentialMaxAge.
func (p *Process) credentials() auth.KeyStore {
	bus := p.Service().Bus
	if bus == nil {
		return p.Store
	}
	cache := auth.NewCachedKeys(p.Store, credentialMaxAge)
	bus.Subscribe(func(n events.Notice) {
		switch {
		case n.Control != nil && n.Control.Kind == events.ControlCredentialRevoked:
			cache.Forget(n.Control.CredentialID)
		case n.Control != nil && n.Control.Kind == events.ControlOrgDisabled:
			cache.ForgetOrg(n.Control.OrgID)
		case !n.ResyncSince.IsZero():
			cache.ForgetAll()
		}
	})
	return cache
}

// rpcNodes are the nodes the API's /rpc/{chain} forwards to: the process's own, or else
// each configured EVM chain's, connected on first use so that the API starts, and serves
// everything else, while a node is down.
func (p *Process) rpcNodes() rpcproxy.Nodes {
	if p.RPCNodes != nil {
		return p.RPCNodes
	}
	nodes := rpcproxy.Nodes{}
	for _, c := range p.Config.EVMChains {
		nodes[c.Name] = rpcproxy.Dial(c.RPCURL)
	}
	if c := p.Config.Solana; c != nil {
		nodes[c.Name] = rpcproxy.Dial(c.RPCURL)
	}
	return nodes
}

// NewWorker builds the worker with every activity wired to the store and chain adapter
// (cfg gives how long a transaction may stay below the fee market before it is replaced),
// and the payout schedules' runs to payouts (the process's service).
// On Stop it waits up to cfg.ShutdownTimeout for running activities before cancelling
// them; onFatal hears an error the worker cannot recover from.
func NewWorker(s *store.Store, ch chain.Adapter, tc client.Client, log *slog.Logger, cfg Config, payouts activities.PayoutRunner, onFatal func(error)) sdkworker.Worker {
	var feeds prices.Feeds = chain.Router{}
	if f, ok := ch.(prices.Feeds); ok {
		feeds = f
	}
	return worker.New(tc, worker.Activities{
		Portfolio:   &activities.Portfolio{Store: s, Chain: ch, Log: log},
		Maintenance: &activities.Maintenance{Store: s, Retention: cfg.retention()},
		Orders:      &activities.Orders{Store: s, Chain: ch, Log: log, ReplaceAfter: cfg.ReplaceStuckAfter},
		Policies:    &activities.Policies{Store: s, Log: log},
		Webhooks:    &activities.WebhookRecoveries{Store: s},
		Prices:      &activities.Prices{Refresher: prices.Refresher{Store: s, Feeds: feeds, Sources: cfg.PriceSources, Log: log}},
		Audit:       &activities.Audit{Store: s},
		Payouts:     &activities.Payouts{Runner: payouts},
	}, workerOptions(cfg, onFatal))
}

// workerOptions are the worker's settings from cfg. The sticky cache is the SDK's, shared
// by the process's workers: it is sized before the first of them starts.
func workerOptions(cfg Config, onFatal func(error)) sdkworker.Options {
	if cfg.WorkerCacheSize > 0 {
		sdkworker.SetStickyWorkflowCacheSize(cfg.WorkerCacheSize)
	}
	pollers := cmp.Or(cfg.WorkerPollers, 2)
	// Workflow tasks are polled from the worker's own sticky queue and from the shared one
	// by pollers of their own (the SDK's autoscaling behaviour). With one pool for both
	// (the SDK's default), every poll goes to the sticky queue while it has a backlog: under
	// load a task that waited out its 5 s there moves to the shared queue and is not taken
	// for minutes, and an order's nonce holds up every later one of its wallet
	// (temporalio/temporal#4562; docs/benchmarks.md, the crowd of waiting orders).
	return sdkworker.Options{WorkerStopTimeout: cfg.ShutdownTimeout, OnFatalError: onFatal,
		WorkflowTaskPollerBehavior: sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: pollers, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: pollers}),
		MaxConcurrentActivityTaskPollers: pollers}
}

// NewHTTPServer wraps the API's handler in an http.Server with a timeout on every phase.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return newServer(addr, h, limits{readHeader: 10 * time.Second, read: 30 * time.Second, write: 60 * time.Second,
		idle: 2 * time.Minute, maxHeader: 64 << 10})
}

// limits bound every phase of a server's requests, and their headers.
type limits struct {
	readHeader, read, write, idle time.Duration
	maxHeader                     int
}

func newServer(addr string, h http.Handler, l limits) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: l.readHeader, ReadTimeout: l.read,
		WriteTimeout: l.write, IdleTimeout: l.idle, MaxHeaderBytes: l.maxHeader}
}
