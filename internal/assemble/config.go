// Package assemble turns configuration into running parts: the store, the Temporal client,
// the API server and the worker. Both binaries (treasury and treasury-dev) build on it.
package assemble

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/prices"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/webhook"
)

// Config is the service configuration; the production binary reads it from the environment.
type Config struct {
	DatabaseURL string
	SQLitePath  string
	// SQLiteNoWriterGate leaves SQLite's write transactions to wait for the database in
	// SQLite's own busy handler instead of taking turns in the process (store.Config).
	SQLiteNoWriterGate bool
	MigrateOnStart     bool
	TemporalAddress    string
	TemporalNamespace  string
	TemporalAPIKey     string
	// TemporalNoCompression sends requests to Temporal uncompressed (the SDK gzips them
	// by default): worth it only when the server is on the same machine, as in the dev
	// bundle, where compressing costs CPU and saves nothing.
	TemporalNoCompression bool
	TemporalTLS           bool
	TemporalTLSCertFile   string
	TemporalTLSKeyFile    string
	HTTPAddr              string
	RequestTimeout        time.Duration
	ShutdownTimeout       time.Duration
	BalanceSyncInterval   time.Duration
	// ValuationMaxAge is how old the prices and portfolio a read is answered with may be
	// (service.Service.ValuationMaxAge); 0 reads them afresh every time.
	ValuationMaxAge      time.Duration
	IdempotencyRetention time.Duration
	RateLimit            float64
	RateBurst            int
	RPCRateLimit         float64
	RPCRateBurst         int
	// SubmitDecisionWait bounds how long a submit waits for the policy's decision once the
	// order's workflow is durably started (workflows.Client.DecisionWait).
	SubmitDecisionWait time.Duration
	// PayoutMinInterval is the shortest every a payout schedule may have
	// (service.Service.PayoutMinInterval).
	PayoutMinInterval time.Duration
	// WorkerCacheSize is how many workflows a worker process keeps in memory between their
	// tasks (the SDK's sticky cache); one evicted is replayed from its history at its next
	// task. WorkerPollers is how many long polls each worker keeps open for workflow tasks
	// on each of its two queues (its own sticky one and the shared one), and for activity
	// tasks. Zero leaves 10,000 and 2.
	WorkerCacheSize, WorkerPollers int
	// QueuedStartGrace is how long an accepted order's workflow has to run before a worker
	// starts it from the queue (service.Service.StartGrace); no setting of its own, for
	// tests.
	QueuedStartGrace time.Duration
	OAuthTokenTTL    time.Duration
	SessionTTL       time.Duration
	// Retention is how long the hourly maintenance keeps each kind of row it deletes, and
	// its batch size; a Config that leaves it zero gets the documented defaults.
	Retention activities.Retention
	// TrustedProxies is a comma-separated list of the addresses or CIDRs of the load
	// balancers whose X-Forwarded-For names the client.
	TrustedProxies string
	WSPingInterval time.Duration
	// WSSendRing lets the live channel batch its sends through io_uring where the kernel
	// allows it.
	WSSendRing bool
	// WebhookSecretKey seals webhook signing secrets at rest (base64 of 32 bytes); without
	// it no webhook can be made or sent.
	WebhookSecretKey string
	// WebhookAllowHTTP and WebhookAllowLoopback let webhooks go to http URLs and to
	// loopback addresses: for test rigs only.
	WebhookAllowHTTP, WebhookAllowLoopback bool
	// WebhookBackoffScale scales the retry schedule (1 in production).
	WebhookBackoffScale float64
	// Console serves the web console under /console/ beside the API.
	Console bool
	// TemporalUIURL links the console's order pages to their workflows; empty leaves the
	// links out.
	TemporalUIURL string
	// PublicURL is the base URL people reach the console at: one-time sign-in links point
	// there. Empty: the API builds them from the request that asked; the operator's
	// commands need it.
	PublicURL string
	// PasskeyRPID and PasskeyOrigins are the relying party people's passkeys belong to
	// (service.PasskeyConfig): by default PublicURL's host and origin.
	PasskeyRPID    string
	PasskeyOrigins []string
	// ConsoleCredentialsFile is where the dev bundle wrote the seeded sign-ins, for the
	// console's sign-in page to name; never read from the environment.
	ConsoleCredentialsFile string
	// ReplaceStuckAfter is how long a leg's transaction may sit below the fee market before
	// the worker asks for its replacement (the same call and nonce, a higher fee).
	ReplaceStuckAfter time.Duration
	// Chains are the chains the worker serves; each needs an adapter: one of EVMChains, or
	// Solana.
	Chains    []string
	EVMChains []evm.Config
	Solana    *solana.Config
	// PriceSources say where each asset's USD price is read from (prices.Defaults for the
	// configured mainnets, replaced asset by asset by PRICES_FILE); PriceRefreshInterval
	// is how often the price schedule reads them.
	PriceSources         []prices.Source
	PriceRefreshInterval time.Duration
	// MetricsAddr is where the process serves /metrics, apart from the public API.
	MetricsAddr string
	LogLevel    slog.Level
	// Metrics are the process's collectors: made by the process, never read from the
	// environment; nil counts nothing.
	Metrics *metrics.Metrics
}

// envVar documents one environment variable the service reads.
type envVar struct {
	Name, Default, Help string
}

// RemovedEnvVars are variables earlier releases read: set, they refuse the start with what
// replaced them, rather than being ignored.
var RemovedEnvVars = map[string]string{
	"EVM_CHAINS_FILE":  "renamed CHAINS_FILE, which lists Solana too (docs/chains.md)",
	"SIMULATED_CHAINS": "the simulated chain is gone: serve each chain in CHAINS from a node, or leave it out of CHAINS (docs/chains.md)",
}

// EnvVars lists every environment variable the treasury binary reads, with its default.
var EnvVars = []envVar{
	{"DATABASE_URL", "", "PostgreSQL URL of the treasury store (postgres://user:pass@host:5432/db?sslmode=disable)"},
	{"SQLITE_PATH", "", "SQLite file of the treasury store when DATABASE_URL is unset (single-node only)"},
	{"SQLITE_WRITER_GATE", "true", "on SQLite, write transactions take turns in the process, each starting the moment the one before it ends; false leaves them to SQLite's busy handler, which sleeps between tries"},
	{"MIGRATE_ON_START", "true", "apply pending migrations when a process opens the store: api, worker, the operator's commands (guarded by a lock)"},
	{"TEMPORAL_ADDRESS", "127.0.0.1:7233", "Temporal frontend host:port"},
	{"TEMPORAL_NAMESPACE", "default", "Temporal namespace"},
	{"TEMPORAL_API_KEY", "", "API key for a hosted Temporal (implies TLS)"},
	{"TEMPORAL_TLS", "false", "connect to Temporal over TLS"},
	{"TEMPORAL_TLS_CERT", "", "client certificate file for mTLS to Temporal"},
	{"TEMPORAL_TLS_KEY", "", "client key file for mTLS to Temporal"},
	{"HTTP_ADDR", ":8080", "address the API listens on"},
	{"REQUEST_TIMEOUT", "30s", "deadline of one API request"},
	{"SHUTDOWN_TIMEOUT", "8s", "how long a graceful shutdown waits for in-flight work"},
	{"BALANCE_SYNC_INTERVAL", "1m", "how often the Temporal Schedule refreshes wallet balances"},
	{"VALUATION_MAX_AGE", "2s", "how old the prices and the portfolio valuation that answer a read may be (a busy dashboard costs one valuation per interval); 0s values every read afresh"},
	{"IDEMPOTENCY_RETENTION", "24h", "how long the response to a write with an Idempotency-Key is kept for replay"},
	{"EVENT_RETENTION", "30d", "how long stored events stay listable at GET /events: whole days such as 30d, or a duration such as 12h, at least 1h; forever keeps every event"},
	{"WEBHOOK_RETENTION", "30d", "how long a webhook delivery that has ended (succeeded, failed or skipped) is kept with its attempts; pending ones are never deleted; forever keeps them all"},
	{"REQUEST_LOG_RETENTION", "7d", "how long request logs (/developer/logs) are kept; forever keeps them all"},
	{"OAUTH_TOKEN_RETENTION", "0s", "how long an expired OAuth access token's row is kept past its expiry (0s: the next hourly maintenance deletes it); forever keeps them all"},
	{"MAINTENANCE_BATCH", "1000", "rows one delete statement of the hourly maintenance takes, each in a short transaction of its own"},
	{"OAUTH_TOKEN_TTL", "15m", "lifetime of an OAuth access token"},
	{"SESSION_TTL", "12h", "how long a person stays signed in"},
	{"TRUSTED_PROXIES", "", "comma-separated addresses or CIDRs of load balancers whose X-Forwarded-For is believed"},
	{"RATE_LIMIT", "50", "requests per second per credential, per API replica"},
	{"RATE_BURST", "100", "burst of requests per credential, per API replica"},
	{"RPC_RATE_LIMIT", "100", "JSON-RPC calls per second per app (every call of a batch counted, shared by the app's credentials), per API replica"},
	{"RPC_RATE_BURST", "200", "burst of JSON-RPC calls per app, per API replica"},
	{"SUBMIT_DECISION_WAIT", "2s", "how long a submit waits for the policy's decision once the order's workflow is durably started; past it the answer is 202 with policyDecision pending"},
	{"PAYOUT_MIN_INTERVAL", "1m", "the shortest interval (every) a payout schedule may have"},
	{"WORKER_CACHE_SIZE", "10000", "workflows a worker keeps in memory between their tasks (Temporal's sticky cache); an order waiting for approvers is one, and one evicted is replayed from its history when it wakes (docs/deployment.md, Sizing workers)"},
	{"WORKER_POLLERS", "2", "the most long polls each worker keeps open for workflow tasks on each of its two queues (its own sticky queue and the shared one, each polled by its own, so neither waits on the other), and for activity tasks"},
	{"WS_PING_INTERVAL", "25s", "how often the WebSocket channel pings each client (a pong must follow within 10 s)"},
	{"WS_SEND_RING", "true", "batch the live channel's sends through io_uring where the kernel allows it; false writes each frame with its own system call"},
	{"WEBHOOK_SECRET_KEY", "", "base64 of 32 random bytes (openssl rand -base64 32) that seals webhook signing secrets at rest; the same on every api and worker; without it webhooks are refused"},
	{"WEBHOOK_ALLOW_HTTP", "false", "let webhooks go to http URLs (test rigs only; https otherwise)"},
	{"WEBHOOK_ALLOW_LOOPBACK", "false", "let webhooks go to loopback addresses (test rigs only)"},
	{"WEBHOOK_BACKOFF_SCALE", "1", "multiplies the webhook retry schedule (5 s … 10 h) and the 5-day failing window; below 1 for tests"},
	{"CONSOLE", "true", "serve the web console for people under /console/ beside the API"},
	{"TEMPORAL_UI_URL", "", "Temporal Web UI base URL (http://temporal-ui:8080) the console links each order's workflow to"},
	{"PUBLIC_URL", "", "base URL people reach the console at (https://treasury.example.com); one-time sign-in links point there"},
	{"PASSKEY_RP_ID", "", "the domain people's passkeys belong to (WebAuthn relying party id); default PUBLIC_URL's host; none: no passkeys"},
	{"PASSKEY_ORIGINS", "", "comma-separated origins the console is reached at, where passkeys may sign; default PUBLIC_URL's origin"},
	{"METRICS_ADDR", ":9464", "address of the Prometheus /metrics endpoint of api and worker, apart from the public API (see docs/metrics.md)"},
	{"LOG_LEVEL", "info", "debug, info, warn or error"},
	{"REPLACE_STUCK_AFTER", "3m", "how long a transaction may stay below the fee market (or dropped by the node) before the worker asks for a replacement at the same nonce with a higher fee"},
	{"CHAINS", "ethereum,polygon,solana", "the chains the worker serves; each needs an adapter, or the worker refuses to start"},
	{"ETHEREUM_RPC_URL", "", "JSON-RPC URL of an Ethereum mainnet node: ethereum runs on the EVM adapter (USDC, WBTC; 12 confirmations)"},
	{"POLYGON_RPC_URL", "", "JSON-RPC URL of a Polygon PoS node: polygon runs on the EVM adapter (USDC; 64 confirmations)"},
	{"CHAINS_FILE", "", "JSON file listing chains in full, EVM (chainId, rpcUrl, tokens, swap router, vaults, pools, confirmations, fee cap) and Solana (kind solana: rpcUrl, mints, commitment, fee cap); wins over the RPC URL variables (docs/chains.md)"},
	{"SOLANA_RPC_URL", "", "JSON-RPC URL of a Solana node: solana runs on the Solana adapter (SOL, and USDC at mainnet-beta's mint unless SOLANA_USDC_MINT names another) (docs/chains.md)"},
	{"SOLANA_USDC_MINT", "", "with SOLANA_RPC_URL: the USDC mint of that cluster (a devnet's, a local validator's); its decimals are checked at start"},
	{"SOLANA_GENESIS_HASH", "", "with SOLANA_RPC_URL: checked against the node's genesis hash at start (mainnet-beta: 5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d)"},
	{"SOLANA_COMMITMENT", "finalized", "with SOLANA_RPC_URL: when a Solana transaction counts as confirmed: processed, confirmed or finalized"},
	{"PRICES_FILE", "", "JSON file of price sources, asset by asset: a Chainlink AggregatorV3 feed on a configured EVM chain ({asset, chain, feed, heartbeat}) or a fixed price ({asset, fixed}); replaces the mainnets' default feeds for the assets it names (docs/deployment.md, Prices)"},
	{"PRICE_REFRESH_INTERVAL", "15s", "how often the Temporal Schedule reads every price source; a price older than twice its feed's heartbeat refuses orders (price_unavailable)"},
	{"TREASURY_TOKEN", "", "treasury signer: a key with the sign action; treasury events tail: a key of the config's app"},
}

// EnvVarNames returns the names of EnvVars.
func EnvVarNames() []string {
	out := make([]string, len(EnvVars))
	for i, v := range EnvVars {
		out[i] = v.Name
	}
	return out
}

// EnvHelp renders the named variables of EnvVars for a usage message, in EnvVars' order;
// no names renders them all.
func EnvHelp(names ...string) string {
	var b strings.Builder
	for _, v := range EnvVars {
		if len(names) > 0 && !slices.Contains(names, v.Name) {
			continue
		}
		def := v.Default
		if def == "" {
			def = "unset"
		}
		fmt.Fprintf(&b, "  %-22s %s (default: %s)\n", v.Name, v.Help, def)
	}
	return b.String()
}

// ConfigFromEnv reads the configuration; getenv is os.Getenv outside tests.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	get := func(name string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		for _, e := range EnvVars {
			if e.Name == name {
				return e.Default
			}
		}
		return ""
	}
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(RemovedEnvVars)) {
		if strings.TrimSpace(getenv(name)) != "" {
			errs = append(errs, name+": "+RemovedEnvVars[name])
		}
	}
	boolean := func(name string) bool {
		b, err := strconv.ParseBool(get(name))
		if err != nil {
			errs = append(errs, name+": not a boolean")
		}
		return b
	}
	duration := func(name string) time.Duration {
		d, err := time.ParseDuration(get(name))
		if err != nil || d <= 0 {
			errs = append(errs, name+": not a positive duration such as 30s")
		}
		return d
	}
	durationOrNone := func(name string) time.Duration {
		d, err := time.ParseDuration(get(name))
		if err != nil || d < 0 {
			errs = append(errs, name+": not a duration such as 2s (0s for none)")
		}
		return d
	}
	// retention reads how long rows are kept, at least least: whole days such as 30d or a
	// duration such as 12h, or "forever" where keeping every row is allowed.
	retention := func(name string, least time.Duration, forever bool) time.Duration {
		v := get(name)
		if forever && v == "forever" {
			return activities.Forever
		}
		d, err := durationInDays(v)
		if err != nil || d < least {
			want := fmt.Sprintf("%s: not a duration such as 30d or 12h", name)
			if least > time.Second {
				want += fmt.Sprintf(", at least %v", least)
			}
			if forever {
				want += ", or forever"
			}
			errs = append(errs, want)
		}
		return d
	}
	whole := func(name string) int {
		n, err := strconv.Atoi(get(name))
		if err != nil || n <= 0 {
			errs = append(errs, name+": not a positive whole number")
		}
		return n
	}
	number := func(name string) float64 {
		n, err := strconv.ParseFloat(get(name), 64)
		if err != nil || n <= 0 {
			errs = append(errs, name+": not a positive number")
		}
		return n
	}
	cfg := Config{
		DatabaseURL:          get("DATABASE_URL"),
		SQLitePath:           get("SQLITE_PATH"),
		SQLiteNoWriterGate:   !boolean("SQLITE_WRITER_GATE"),
		MigrateOnStart:       boolean("MIGRATE_ON_START"),
		TemporalAddress:      get("TEMPORAL_ADDRESS"),
		TemporalNamespace:    get("TEMPORAL_NAMESPACE"),
		TemporalAPIKey:       get("TEMPORAL_API_KEY"),
		TemporalTLS:          boolean("TEMPORAL_TLS"),
		TemporalTLSCertFile:  get("TEMPORAL_TLS_CERT"),
		TemporalTLSKeyFile:   get("TEMPORAL_TLS_KEY"),
		HTTPAddr:             get("HTTP_ADDR"),
		RequestTimeout:       duration("REQUEST_TIMEOUT"),
		ShutdownTimeout:      duration("SHUTDOWN_TIMEOUT"),
		PriceRefreshInterval: duration("PRICE_REFRESH_INTERVAL"),
		BalanceSyncInterval:  duration("BALANCE_SYNC_INTERVAL"),
		ValuationMaxAge:      durationOrNone("VALUATION_MAX_AGE"),
		IdempotencyRetention: retention("IDEMPOTENCY_RETENTION", time.Second, false),
		Retention: activities.Retention{
			// A shorter window could delete events that a replica's live channel, back from
			// a lost database connection, still has to re-read (events.Follower).
			Events:      retention("EVENT_RETENTION", time.Hour, true),
			Webhooks:    retention("WEBHOOK_RETENTION", time.Second, true),
			RequestLogs: retention("REQUEST_LOG_RETENTION", time.Second, true),
			OAuthTokens: retention("OAUTH_TOKEN_RETENTION", 0, true),
			Batch:       whole("MAINTENANCE_BATCH"),
		},
		RateLimit:            number("RATE_LIMIT"),
		RateBurst:            int(number("RATE_BURST")),
		RPCRateLimit:         number("RPC_RATE_LIMIT"),
		RPCRateBurst:         int(number("RPC_RATE_BURST")),
		SubmitDecisionWait:   duration("SUBMIT_DECISION_WAIT"),
		PayoutMinInterval:    duration("PAYOUT_MIN_INTERVAL"),
		WorkerCacheSize:      whole("WORKER_CACHE_SIZE"),
		WorkerPollers:        whole("WORKER_POLLERS"),
		OAuthTokenTTL:        duration("OAUTH_TOKEN_TTL"),
		SessionTTL:           duration("SESSION_TTL"),
		TrustedProxies:       get("TRUSTED_PROXIES"),
		WSPingInterval:       duration("WS_PING_INTERVAL"),
		WSSendRing:           boolean("WS_SEND_RING"),
		WebhookSecretKey:     get("WEBHOOK_SECRET_KEY"),
		WebhookAllowHTTP:     boolean("WEBHOOK_ALLOW_HTTP"),
		WebhookAllowLoopback: boolean("WEBHOOK_ALLOW_LOOPBACK"),
		WebhookBackoffScale:  number("WEBHOOK_BACKOFF_SCALE"),
		Console:              boolean("CONSOLE"),
		TemporalUIURL:        get("TEMPORAL_UI_URL"),
		PublicURL:            get("PUBLIC_URL"),
		PasskeyRPID:          get("PASSKEY_RP_ID"),
		PasskeyOrigins:       origins(get("PASSKEY_ORIGINS")),
		MetricsAddr:          get("METRICS_ADDR"),
		ReplaceStuckAfter:    duration("REPLACE_STUCK_AFTER"),
	}
	var chainErrs []string
	cfg.Chains, cfg.EVMChains, cfg.Solana, chainErrs = chainsFromEnv(get)
	errs = append(errs, chainErrs...)
	var priceErr error
	if cfg.PriceSources, priceErr = priceSourcesFromEnv(get, cfg.EVMChains); priceErr != nil {
		errs = append(errs, priceErr.Error())
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(get("LOG_LEVEL"))); err != nil {
		errs = append(errs, "LOG_LEVEL: one of debug, info, warn, error")
	}
	for _, p := range cfg.TrustedProxyList() {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			errs = append(errs, "TRUSTED_PROXIES: "+p+" is not an address or a CIDR")
		}
	}
	if cfg.WebhookSecretKey != "" {
		if _, err := webhook.ParseKey(cfg.WebhookSecretKey); err != nil {
			errs = append(errs, "WEBHOOK_SECRET_KEY: "+err.Error())
		}
	}
	if u, err := url.Parse(cfg.TemporalUIURL); cfg.TemporalUIURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, "TEMPORAL_UI_URL: not an http(s) URL")
	}
	if u, err := url.Parse(cfg.PublicURL); cfg.PublicURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, "PUBLIC_URL: not an http(s) URL")
	}
	if _, _, err := net.SplitHostPort(cfg.MetricsAddr); err != nil {
		errs = append(errs, "METRICS_ADDR: not host:port, such as :9464")
	}
	if (cfg.TemporalTLSCertFile == "") != (cfg.TemporalTLSKeyFile == "") {
		errs = append(errs, "TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY: set both or neither")
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}

// retention is the configured Retention or, for a Config made in code that sets none (the
// dev bundle's), the documented defaults, which always parse (TestConfigFromEnvDefaults).
func (c Config) retention() activities.Retention {
	if c.Retention != (activities.Retention{}) {
		return c.Retention
	}
	defaults, _ := ConfigFromEnv(func(string) string { return "" })
	return defaults.Retention
}

// durationInDays parses a duration as time.ParseDuration does, or a whole number of days
// such as 30d, the unit retentions are usually thought of in.
func durationInDays(s string) (time.Duration, error) {
	days, ok := strings.CutSuffix(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < 0 || n > math.MaxInt64/int(24*time.Hour) {
		return 0, fmt.Errorf("not a number of days: %q", s)
	}
	return time.Duration(n) * 24 * time.Hour, nil
}

// NewLogger returns the service's structured JSON logger on stderr.
func NewLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// TrustedProxyList is TrustedProxies as a list.
func (c Config) TrustedProxyList() []string {
	var out []string
	for _, p := range strings.Split(c.TrustedProxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Passkeys is the relying party of people's passkeys: PASSKEY_RP_ID and PASSKEY_ORIGINS,
// or PublicURL's host and origin. An IP address is no relying party (WebAuthn wants a
// domain): the console at http://127.0.0.1 offers no passkeys, at http://localhost it does.
func (c Config) Passkeys() service.PasskeyConfig {
	pc := service.PasskeyConfig{RPID: c.PasskeyRPID, Origins: c.PasskeyOrigins}
	if u, err := url.Parse(c.PublicURL); err == nil && u.Host != "" {
		if pc.RPID == "" && net.ParseIP(u.Hostname()) == nil {
			pc.RPID = u.Hostname()
		}
		if len(pc.Origins) == 0 {
			pc.Origins = []string{u.Scheme + "://" + u.Host}
		}
	}
	if pc.RPID == "" {
		return service.PasskeyConfig{}
	}
	return pc
}

// origins splits a comma- or space-separated list; none is nil.
func origins(list string) []string {
	if out := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }); len(out) > 0 {
		return out
	}
	return nil
}
