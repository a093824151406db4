package assemble

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/devsvm/devsvmtest"
	"github.com/opentreasury/treasury/internal/prices"
)

// env returns a getenv over a fixed map.
func env(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatalf("ConfigFromEnv(empty): %v", err)
	}
	want := Config{
		MigrateOnStart:       true,
		TemporalAddress:      "127.0.0.1:7233",
		TemporalNamespace:    "default",
		HTTPAddr:             ":8080",
		RequestTimeout:       30 * time.Second,
		ShutdownTimeout:      8 * time.Second,
		BalanceSyncInterval:  time.Minute,
		PriceRefreshInterval: 15 * time.Second,
		ValuationMaxAge:      2 * time.Second,
		IdempotencyRetention: 24 * time.Hour,
		RateLimit:            50,
		RateBurst:            100,
		RPCRateLimit:         100,
		RPCRateBurst:         200,
		SubmitDecisionWait:   2 * time.Second,
		PayoutMinInterval:    time.Minute,
		WorkerCacheSize:      10000,
		WorkerPollers:        2,
		OAuthTokenTTL:        15 * time.Minute,
		SessionTTL:           12 * time.Hour,
		WSPingInterval:       25 * time.Second,
		WSSendRing:           true,
		WebhookBackoffScale:  1,
		Console:              true,
		MetricsAddr:          ":9464",
		LogLevel:             slog.LevelInfo,
		Chains:               []string{"ethereum", "polygon", "solana"},
		ReplaceStuckAfter:    3 * time.Minute,
		Retention: activities.Retention{Events: 30 * 24 * time.Hour, Webhooks: 30 * 24 * time.Hour,
			RequestLogs: 7 * 24 * time.Hour, Batch: 1000},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestConfigFromEnvDefaultsMatchEnvVars(t *testing.T) {
	// The documented default of each variable is what an empty environment yields:
	// setting every variable explicitly to its documented default changes nothing.
	explicit := map[string]string{}
	for _, v := range EnvVars {
		explicit[v.Name] = v.Default
	}
	a, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ConfigFromEnv(env(explicit))
	if err != nil {
		t.Fatalf("documented defaults do not parse: %v", err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("empty env %+v != documented defaults %+v", a, b)
	}
}

func TestConfigFromEnvValues(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{
		"DATABASE_URL":           "postgres://u:p@db:5432/treasury",
		"SQLITE_PATH":            "/tmp/t.db",
		"MIGRATE_ON_START":       "false",
		"TEMPORAL_ADDRESS":       " temporal:7233 ",
		"TEMPORAL_NAMESPACE":     "prod",
		"TEMPORAL_API_KEY":       "secret",
		"TEMPORAL_TLS":           "true",
		"TEMPORAL_TLS_CERT":      "/c.pem",
		"TEMPORAL_TLS_KEY":       "/k.pem",
		"HTTP_ADDR":              "0.0.0.0:9000",
		"REQUEST_TIMEOUT":        "5s",
		"SHUTDOWN_TIMEOUT":       "1m30s",
		"BALANCE_SYNC_INTERVAL":  "10m",
		"PRICE_REFRESH_INTERVAL": "30s",
		"VALUATION_MAX_AGE":      "0s",
		"IDEMPOTENCY_RETENTION":  "2h",
		"EVENT_RETENTION":        "90d",
		"WEBHOOK_RETENTION":      "forever",
		"REQUEST_LOG_RETENTION":  "36h",
		"OAUTH_TOKEN_RETENTION":  "1d",
		"MAINTENANCE_BATCH":      "250",
		"RATE_LIMIT":             "10.5",
		"RATE_BURST":             "20",
		"RPC_RATE_LIMIT":         "7.5",
		"RPC_RATE_BURST":         "15",
		"SUBMIT_DECISION_WAIT":   "750ms",
		"PAYOUT_MIN_INTERVAL":    "30s",
		"WORKER_CACHE_SIZE":      "25000",
		"WORKER_POLLERS":         "4",
		"OAUTH_TOKEN_TTL":        "5m",
		"SESSION_TTL":            "30m",
		"TRUSTED_PROXIES":        "10.0.0.0/8, 192.0.2.7",
		"WS_PING_INTERVAL":       "5s",
		"WS_SEND_RING":           "false",
		"WEBHOOK_SECRET_KEY":     "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"WEBHOOK_ALLOW_HTTP":     "true",
		"WEBHOOK_ALLOW_LOOPBACK": "true",
		"WEBHOOK_BACKOFF_SCALE":  "0.01",
		"CONSOLE":                "false",
		"TEMPORAL_UI_URL":        "https://temporal-ui.internal:8443",
		"METRICS_ADDR":           "127.0.0.1:9100",
		"LOG_LEVEL":              "debug",
	}))
	if err != nil {
		t.Fatalf("ConfigFromEnv: %v", err)
	}
	want := Config{
		DatabaseURL:          "postgres://u:p@db:5432/treasury",
		SQLitePath:           "/tmp/t.db",
		MigrateOnStart:       false,
		TemporalAddress:      "temporal:7233",
		TemporalNamespace:    "prod",
		TemporalAPIKey:       "secret",
		TemporalTLS:          true,
		TemporalTLSCertFile:  "/c.pem",
		TemporalTLSKeyFile:   "/k.pem",
		HTTPAddr:             "0.0.0.0:9000",
		RequestTimeout:       5 * time.Second,
		ShutdownTimeout:      90 * time.Second,
		BalanceSyncInterval:  10 * time.Minute,
		PriceRefreshInterval: 30 * time.Second,
		ValuationMaxAge:      0,
		IdempotencyRetention: 2 * time.Hour,
		RateLimit:            10.5,
		RateBurst:            20,
		RPCRateLimit:         7.5,
		RPCRateBurst:         15,
		SubmitDecisionWait:   750 * time.Millisecond,
		PayoutMinInterval:    30 * time.Second,
		WorkerCacheSize:      25000,
		WorkerPollers:        4,
		OAuthTokenTTL:        5 * time.Minute,
		SessionTTL:           30 * time.Minute,
		TrustedProxies:       "10.0.0.0/8, 192.0.2.7",
		WSPingInterval:       5 * time.Second,
		WebhookSecretKey:     "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		WebhookAllowHTTP:     true,
		WebhookAllowLoopback: true,
		WebhookBackoffScale:  0.01,
		TemporalUIURL:        "https://temporal-ui.internal:8443",
		MetricsAddr:          "127.0.0.1:9100",
		LogLevel:             slog.LevelDebug,
		Chains:               []string{"ethereum", "polygon", "solana"},
		ReplaceStuckAfter:    3 * time.Minute,
		Retention: activities.Retention{Events: 90 * 24 * time.Hour, Webhooks: activities.Forever,
			RequestLogs: 36 * time.Hour, OAuthTokens: 24 * time.Hour, Batch: 250},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("\n got %+v\nwant %+v", cfg, want)
	}
}

func TestConfigFromEnvErrors(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		names []string // every one must be named in the error
	}{
		{"timeout not a duration", map[string]string{"REQUEST_TIMEOUT": "abc"}, []string{"REQUEST_TIMEOUT"}},
		{"timeout negative", map[string]string{"REQUEST_TIMEOUT": "-1s"}, []string{"REQUEST_TIMEOUT"}},
		{"timeout zero", map[string]string{"REQUEST_TIMEOUT": "0s"}, []string{"REQUEST_TIMEOUT"}},
		{"timeout without unit", map[string]string{"REQUEST_TIMEOUT": "30"}, []string{"REQUEST_TIMEOUT"}},
		{"shutdown timeout", map[string]string{"SHUTDOWN_TIMEOUT": "soon"}, []string{"SHUTDOWN_TIMEOUT"}},
		{"sync interval", map[string]string{"BALANCE_SYNC_INTERVAL": "-5m"}, []string{"BALANCE_SYNC_INTERVAL"}},
		{"migrate maybe", map[string]string{"MIGRATE_ON_START": "maybe"}, []string{"MIGRATE_ON_START"}},
		{"tls yes", map[string]string{"TEMPORAL_TLS": "yes"}, []string{"TEMPORAL_TLS"}},
		{"log level loud", map[string]string{"LOG_LEVEL": "loud"}, []string{"LOG_LEVEL"}},
		{"proxy not an address", map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8,balancer"}, []string{"TRUSTED_PROXIES"}},
		{"cert without key", map[string]string{"TEMPORAL_TLS_CERT": "/c.pem"}, []string{"TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY"}},
		{"key without cert", map[string]string{"TEMPORAL_TLS_KEY": "/k.pem"}, []string{"TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY"}},
		{"webhook key too short", map[string]string{"WEBHOOK_SECRET_KEY": "c2hvcnQ="}, []string{"WEBHOOK_SECRET_KEY"}},
		{"webhook scale", map[string]string{"WEBHOOK_BACKOFF_SCALE": "0"}, []string{"WEBHOOK_BACKOFF_SCALE"}},
		{"events kept under an hour", map[string]string{"EVENT_RETENTION": "30m"}, []string{"EVENT_RETENTION"}},
		{"retention in weeks", map[string]string{"REQUEST_LOG_RETENTION": "2w"}, []string{"REQUEST_LOG_RETENTION"}},
		{"part of a day", map[string]string{"WEBHOOK_RETENTION": "1.5d"}, []string{"WEBHOOK_RETENTION"}},
		{"no retention", map[string]string{"WEBHOOK_RETENTION": "0s"}, []string{"WEBHOOK_RETENTION"}},
		{"tokens kept negative", map[string]string{"OAUTH_TOKEN_RETENTION": "-1h"}, []string{"OAUTH_TOKEN_RETENTION"}},
		{"idempotency forever", map[string]string{"IDEMPOTENCY_RETENTION": "forever"}, []string{"IDEMPOTENCY_RETENTION"}},
		{"batch of none", map[string]string{"MAINTENANCE_BATCH": "0"}, []string{"MAINTENANCE_BATCH"}},
		{"batch of a fraction", map[string]string{"MAINTENANCE_BATCH": "0.5"}, []string{"MAINTENANCE_BATCH"}},
		{"no poller", map[string]string{"WORKER_POLLERS": "0"}, []string{"WORKER_POLLERS"}},
		{"no cache", map[string]string{"WORKER_CACHE_SIZE": "0"}, []string{"WORKER_CACHE_SIZE"}},
		{"console maybe", map[string]string{"CONSOLE": "maybe"}, []string{"CONSOLE"}},
		{"temporal ui not a URL", map[string]string{"TEMPORAL_UI_URL": "temporal-ui:8080"}, []string{"TEMPORAL_UI_URL"}},
		{"metrics address without port", map[string]string{"METRICS_ADDR": "metrics"}, []string{"METRICS_ADDR"}},
		{"cert with blank key", map[string]string{"TEMPORAL_TLS_CERT": "/c.pem", "TEMPORAL_TLS_KEY": "  "}, []string{"TEMPORAL_TLS_KEY"}},
		{"several at once", map[string]string{"REQUEST_TIMEOUT": "abc", "LOG_LEVEL": "loud", "MIGRATE_ON_START": "maybe"},
			[]string{"REQUEST_TIMEOUT", "LOG_LEVEL", "MIGRATE_ON_START"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromEnv(env(tc.env))
			if err == nil {
				t.Fatalf("ConfigFromEnv(%v) = nil error", tc.env)
			}
			for _, name := range tc.names {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
		})
	}
}

func TestConfigFromEnvWhitespaceFallsBack(t *testing.T) {
	blank := map[string]string{}
	for i, name := range EnvVarNames() {
		blank[name] = []string{" ", "\t", "\n", "  \t \n"}[i%4]
	}
	cfg, err := ConfigFromEnv(env(blank))
	if err != nil {
		t.Fatalf("whitespace-only values: %v", err)
	}
	def, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, def) {
		t.Fatalf("whitespace-only values:\n got %+v\nwant defaults %+v", cfg, def)
	}
}

func TestConfigFromEnvNilGetenv(t *testing.T) {
	for _, name := range EnvVarNames() {
		t.Setenv(name, "")
	}
	t.Setenv("TEMPORAL_NAMESPACE", "from-os")
	cfg, err := ConfigFromEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TemporalNamespace != "from-os" {
		t.Fatalf("nil getenv did not read the process environment: namespace %q", cfg.TemporalNamespace)
	}
}

func TestEnvVarsDocumented(t *testing.T) {
	if len(EnvVars) == 0 {
		t.Fatal("EnvVars is empty")
	}
	for _, v := range EnvVars {
		if strings.TrimSpace(v.Help) == "" {
			t.Errorf("%s has no help", v.Name)
		}
		if v.Name == "" || strings.ToUpper(v.Name) != v.Name || strings.ContainsAny(v.Name, " \t=") {
			t.Errorf("bad variable name %q", v.Name)
		}
	}
	names := EnvVarNames()
	if len(names) != len(EnvVars) {
		t.Fatalf("EnvVarNames has %d names, EnvVars %d entries", len(names), len(EnvVars))
	}
	seen := map[string]bool{}
	for i, n := range names {
		if n != EnvVars[i].Name {
			t.Errorf("EnvVarNames()[%d] = %q, want %q", i, n, EnvVars[i].Name)
		}
		if seen[n] {
			t.Errorf("%s listed twice", n)
		}
		seen[n] = true
	}
	// Every variable ConfigFromEnv reads is documented (and so listed in the usage text).
	help := EnvHelp()
	for _, n := range []string{"DATABASE_URL", "SQLITE_PATH", "MIGRATE_ON_START", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE",
		"TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "HTTP_ADDR", "REQUEST_TIMEOUT",
		"SHUTDOWN_TIMEOUT", "BALANCE_SYNC_INTERVAL", "LOG_LEVEL"} {
		if !seen[n] {
			t.Errorf("%s is read but not in EnvVars", n)
		}
		if !strings.Contains(help, n) {
			t.Errorf("EnvHelp does not mention %s", n)
		}
	}
}

func TestConfigFromEnvReadsOnlyDocumentedNames(t *testing.T) {
	documented := map[string]bool{}
	for _, n := range EnvVarNames() {
		documented[n] = true
	}
	for n := range RemovedEnvVars { // read only to refuse them
		documented[n] = true
	}
	_, err := ConfigFromEnv(func(name string) string {
		if !documented[name] {
			t.Errorf("ConfigFromEnv reads undocumented variable %s", name)
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestChainsFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "chains.json")
	if err := os.WriteFile(file, []byte(`[{"name": "polygon", "chainId": 80002, "rpcUrl": "http://amoy:8545", "nativeAsset": "MATIC"},
		{"kind": "solana", "rpcUrl": "http://devnet:8899", "commitment": "confirmed", "tokens": [{"symbol": "USDC", "mint": "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU", "decimals": 6}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromEnv(env(map[string]string{"ETHEREUM_RPC_URL": "http://geth:8545", "POLYGON_RPC_URL": "http://bor:8545",
		"SOLANA_RPC_URL": "http://mainnet:8899", "CHAINS_FILE": file}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.EVMChains) != 2 || cfg.EVMChains[0].Name != "ethereum" || cfg.EVMChains[0].RPCURL != "http://geth:8545" ||
		cfg.EVMChains[0].ChainID != 1 || len(cfg.EVMChains[0].Tokens) != 2 {
		t.Fatalf("ETHEREUM_RPC_URL selects mainnet with its tokens: %+v", cfg.EVMChains)
	}
	if cfg.EVMChains[1].ChainID != 80002 || cfg.EVMChains[1].RPCURL != "http://amoy:8545" {
		t.Fatalf("CHAINS_FILE wins over POLYGON_RPC_URL: %+v", cfg.EVMChains[1])
	}
	if cfg.Solana == nil || cfg.Solana.Name != "solana" || cfg.Solana.RPCURL != "http://devnet:8899" || cfg.Solana.Commitment != "confirmed" ||
		len(cfg.Solana.Tokens) != 1 || cfg.Solana.Tokens[0].Mint != "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU" {
		t.Fatalf("CHAINS_FILE's Solana chain wins over SOLANA_RPC_URL: %+v", cfg.Solana)
	}
	// What a file says is what the file written back from it says.
	entries := []ChainsFileEntry{{EVM: &cfg.EVMChains[1]}, {Solana: cfg.Solana}}
	raw, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	var again []ChainsFileEntry
	if err := json.Unmarshal(raw, &again); err != nil || len(again) != 2 || again[0].EVM == nil || again[0].EVM.ChainID != 80002 ||
		again[1].Solana == nil || again[1].Solana.RPCURL != "http://devnet:8899" {
		t.Fatalf("written back: %s, read %+v %v", raw, again, err)
	}
	bad := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, vars := range []map[string]string{
		{"CHAINS": "bitcoin"},
		{"CHAINS_FILE": filepath.Join(dir, "missing.json")},
		{"EVM_CHAINS_FILE": file},
		{"SIMULATED_CHAINS": "solana"},
		{"CHAINS_FILE": bad("kind.json", `[{"kind": "bitcoin", "name": "bitcoin", "rpcUrl": "http://x"}]`)},
		{"CHAINS_FILE": bad("two.json", `[{"kind": "solana", "rpcUrl": "http://a"}, {"kind": "solana", "rpcUrl": "http://b"}]`)},
		{"CHAINS_FILE": bad("named.json", `[{"kind": "solana", "name": "eclipse", "rpcUrl": "http://a"}]`)},
	} {
		if _, err := ConfigFromEnv(env(vars)); err == nil {
			t.Errorf("%v: accepted", vars)
		}
	}
}

// A worker refuses to start while a chain it serves has no adapter: nothing is simulated.
func TestAWorkerRefusesAChainWithoutAnAdapter(t *testing.T) {
	for _, vars := range []map[string]string{{}, {"CHAINS": "solana"}} {
		cfg, err := ConfigFromEnv(env(vars))
		if err != nil {
			t.Fatal(err)
		}
		p := NewProcess(cfg, "worker", slog.New(slog.DiscardHandler))
		err = p.Chains().Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "no adapter") {
			t.Errorf("%v: start error %v, want a refusal that says why", vars, err)
		}
	}
}

// Each configured mainnet brings Chainlink's USD feeds; PRICES_FILE replaces a source asset
// by asset or adds one; a testnet brings none; a feed on a chain that is not configured,
// or a source that is neither a feed nor a fixed price, refuses the start.
func TestPriceSourcesFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	byAsset := func(cfg Config) map[string]prices.Source {
		out := map[string]prices.Source{}
		for _, s := range cfg.PriceSources {
			out[s.Asset] = s
		}
		return out
	}
	cfg, err := ConfigFromEnv(env(map[string]string{"ETHEREUM_RPC_URL": "http://geth:8545", "POLYGON_RPC_URL": "http://bor:8545"}))
	if err != nil {
		t.Fatal(err)
	}
	got := byAsset(cfg)
	if len(got) != 5 || got["ETH"].Chain != "ethereum" || got["ETH"].Feed != "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419" ||
		got["SOL"].Chain != "ethereum" || got["USDC"].Chain != "ethereum" || got["MATIC"].Chain != "polygon" ||
		time.Duration(got["ETH"].Heartbeat) != time.Hour {
		t.Fatalf("mainnets' defaults: %+v", cfg.PriceSources)
	}
	if cfg.PriceRefreshInterval != 15*time.Second {
		t.Fatalf("refresh every %s", cfg.PriceRefreshInterval)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{"POLYGON_RPC_URL": "http://bor:8545"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := byAsset(cfg); len(got) != 2 || got["USDC"].Chain != "polygon" {
		t.Fatalf("polygon alone prices USDC from its own feed: %+v", cfg.PriceSources)
	}

	testnet := write("chains.json", `[{"name": "ethereum", "chainId": 11155111, "rpcUrl": "http://sepolia:8545", "nativeAsset": "ETH"}]`)
	cfg, err = ConfigFromEnv(env(map[string]string{"CHAINS_FILE": testnet}))
	if err != nil || len(cfg.PriceSources) != 0 {
		t.Fatalf("a testnet brings no sources: %+v, %v", cfg.PriceSources, err)
	}
	file := write("prices.json", `[{"asset": "ETH", "chain": "ethereum", "feed": "0x694AA1769357215DE4FAC081bf1f309aDC325306", "heartbeat": "1h"},
		{"asset": "USDC", "fixed": "1.00"}]`)
	cfg, err = ConfigFromEnv(env(map[string]string{"CHAINS_FILE": testnet, "PRICES_FILE": file}))
	if err != nil {
		t.Fatal(err)
	}
	got = byAsset(cfg)
	if len(got) != 2 || got["ETH"].Feed != "0x694AA1769357215DE4FAC081bf1f309aDC325306" || got["USDC"].Fixed == nil || got["USDC"].Fixed.String() != "1" {
		t.Fatalf("PRICES_FILE: %+v", cfg.PriceSources)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{"ETHEREUM_RPC_URL": "http://geth:8545", "PRICES_FILE": write("usdc.json", `[{"asset": "USDC", "fixed": "1"}]`)}))
	if err != nil {
		t.Fatal(err)
	}
	if got := byAsset(cfg); len(got) != 4 || got["USDC"].Fixed == nil || got["ETH"].Feed == "" {
		t.Fatalf("PRICES_FILE replaces USDC alone: %+v", cfg.PriceSources)
	}
	for name, body := range map[string]string{
		"unconfigured chain": `[{"asset": "ETH", "chain": "ethereum", "feed": "0x694AA1769357215DE4FAC081bf1f309aDC325306", "heartbeat": "1h"}]`,
		"no heartbeat":       `[{"asset": "ETH", "chain": "polygon", "feed": "0x694AA1769357215DE4FAC081bf1f309aDC325306"}]`,
		"neither":            `[{"asset": "ETH"}]`,
		"both":               `[{"asset": "ETH", "chain": "polygon", "feed": "0x694AA1769357215DE4FAC081bf1f309aDC325306", "heartbeat": "1h", "fixed": "1"}]`,
		"zero":               `[{"asset": "USDC", "fixed": "0"}]`,
		"not an address":     `[{"asset": "ETH", "chain": "polygon", "feed": "0x12", "heartbeat": "1h"}]`,
		"unknown field":      `[{"asset": "ETH", "fixd": "1"}]`,
		"twice":              `[{"asset": "USDC", "fixed": "1"}, {"asset": "USDC", "fixed": "1"}]`,
	} {
		if _, err := ConfigFromEnv(env(map[string]string{"POLYGON_RPC_URL": "http://bor:8545", "PRICES_FILE": write("bad.json", body)})); err == nil {
			t.Errorf("%s: a PRICES_FILE of %s was accepted", name, body)
		}
	}
}

func TestPasskeysBelongToTheConsolesDomain(t *testing.T) {
	for _, c := range []struct {
		cfg          Config
		rpID, origin string
	}{
		{Config{PublicURL: "https://treasury.example.com"}, "treasury.example.com", "https://treasury.example.com"},
		{Config{PublicURL: "http://127.0.0.1:8080"}, "", ""},
		{Config{}, "", ""},
		{Config{PublicURL: "http://127.0.0.1:8080", PasskeyRPID: "localhost", PasskeyOrigins: []string{"http://localhost:8080"}}, "localhost", "http://localhost:8080"},
		{Config{PublicURL: "https://a.example.com", PasskeyRPID: "example.com"}, "example.com", "https://a.example.com"},
	} {
		got := c.cfg.Passkeys()
		if got.RPID != c.rpID || (c.origin == "") != (len(got.Origins) == 0) || (c.origin != "" && got.Origins[0] != c.origin) || got.Enabled() != (c.rpID != "") {
			t.Errorf("%+v: %+v", c.cfg, got)
		}
	}
}

// SOLANA_RPC_URL serves solana by the real adapter, against a node it checks first: a
// node of another cluster (its genesis hash) or a mint it does not have refuses the start.
func TestSolanaIsServedFromSOLANA_RPC_URL(t *testing.T) {
	node, info := devsvmtest.Start(t, 50*time.Millisecond)
	for _, tc := range []struct {
		env    map[string]string
		refuse string
	}{
		{map[string]string{"CHAINS": "solana", "SOLANA_RPC_URL": node.URL(), "SOLANA_USDC_MINT": devsvm.USDCMint, "SOLANA_GENESIS_HASH": info.GenesisHash}, ""},
		{map[string]string{"CHAINS": "solana", "SOLANA_RPC_URL": node.URL(), "SOLANA_USDC_MINT": devsvm.USDCMint,
			"SOLANA_GENESIS_HASH": "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d"}, "genesis"},
		{map[string]string{"CHAINS": "solana", "SOLANA_RPC_URL": node.URL()}, "mint"}, // mainnet's USDC is not on this chain
		{map[string]string{"CHAINS": "solana"}, "SOLANA_RPC_URL"},
	} {
		cfg, err := ConfigFromEnv(env(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		p := NewProcess(cfg, "worker", slog.New(slog.DiscardHandler))
		err = p.Chains().Start(context.Background())
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.refuse == "" && p.chains["solana"] == nil:
			t.Errorf("%v: solana is not served", tc.env)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%v: start error %v, want one about %s", tc.env, err, tc.refuse)
		}
	}
}
