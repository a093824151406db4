// Package devstack embeds a Temporal dev server (the real server from go.temporal.io/server,
// persisted in SQLite) and its Web UI, and assembles the one-process dev bundle around
// them. It is the only package, besides cmd/treasury-dev, that links the Temporal server.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/opentreasury/treasury/dev/freeport"
)

// TemporalConfig describes the embedded Temporal server.
type TemporalConfig struct {
	// DataDir holds the server's SQLite file, temporal.db.
	DataDir string
	// PostgresURL, when set, puts persistence in that PostgreSQL database and visibility
	// in the one named like it with _visibility appended, instead of SQLite in DataDir.
	// Both are created and their schemas brought up to date on start.
	PostgresURL string
	// IP is the address every service binds to; loopback by default.
	IP string
	// Port is the frontend gRPC port (7233 by default); 0 picks a free one.
	Port int
	// UIPort is the Web UI port (8233 by default); 0 picks a free one, -1 disables the UI.
	UIPort int
	// Namespace is created at first start, with the search attributes.
	Namespace        string
	SearchAttributes map[string]enumspb.IndexedValueType
	// HistoryShards is fixed when the data directory is first created.
	HistoryShards int32
	// Retention of closed workflows in the namespace.
	Retention time.Duration
	// LogLevel of the server's own log (it is verbose at info).
	LogLevel string
	Log      *slog.Logger
}

// Temporal is a running embedded server.
type Temporal struct {
	server       temporal.Server
	ui           *uiserver.Server
	uiDone       chan struct{}
	logLevel     zap.AtomicLevel
	FrontendAddr string
	UIURL        string
}

// StartTemporal starts the embedded server (and the UI unless disabled) and returns once
// the frontend accepts connections.
func StartTemporal(ctx context.Context, cfg TemporalConfig) (*Temporal, error) {
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.HistoryShards <= 0 {
		cfg.HistoryShards = 1
	}
	if cfg.Retention == 0 {
		cfg.Retention = 72 * time.Hour
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	var err error
	if cfg.Port, err = freeport.OrFree(cfg.IP, cfg.Port); err != nil {
		return nil, fmt.Errorf("temporal frontend port: %w", err)
	}
	if cfg.UIPort >= 0 {
		if cfg.UIPort, err = freeport.OrFree(cfg.IP, cfg.UIPort); err != nil {
			return nil, fmt.Errorf("temporal UI port: %w", err)
		}
	}
	level, logger, err := serverLogger(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	srv, err := newServer(cfg, logger)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("temporal: start server: %w", err)
	}
	t := &Temporal{server: srv, logLevel: level, FrontendAddr: net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.Port))}
	if err := freeport.WaitOpen(ctx, t.FrontendAddr, 30*time.Second); err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("temporal: frontend did not open: %w", err)
	}
	if cfg.PostgresURL != "" {
		if err := registerNamespace(ctx, t.FrontendAddr, cfg.Namespace, cfg.Retention); err != nil {
			_ = srv.Stop()
			return nil, err
		}
	}
	if cfg.UIPort >= 0 {
		t.startUI(cfg)
		t.UIURL = "http://" + net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.UIPort))
		if err := freeport.WaitOpen(ctx, net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.UIPort)), 10*time.Second); err != nil {
			t.Stop()
			return nil, fmt.Errorf("temporal UI did not open: %w", err)
		}
	}
	return t, nil
}

// serverLogger is the embedded server's own logger, at its own level (Quiet raises it).
func serverLogger(name string) (zap.AtomicLevel, tlog.Logger, error) {
	level, err := zap.ParseAtomicLevel(name)
	if err != nil {
		return level, nil, fmt.Errorf("temporal log level: %w", err)
	}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = level
	zcfg.Sampling = nil
	zcfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	zl, err := zcfg.Build()
	if err != nil {
		return level, nil, err
	}
	return level, tlog.NewZapLogger(zl), nil
}

// newServer prepares the server's databases (SQLite in the data directory, or PostgreSQL)
// and builds the server on them, all services in this process.
func newServer(cfg TemporalConfig, logger tlog.Logger) (temporal.Server, error) {
	var (
		persistence, visibility *config.SQL
		err                     error
	)
	if cfg.PostgresURL != "" {
		if persistence, visibility, err = postgresStores(cfg.PostgresURL); err != nil {
			return nil, err
		}
		if err := preparePostgres(persistence, visibility, logger); err != nil {
			return nil, err
		}
	} else if persistence, err = prepareSQLite(cfg); err != nil {
		return nil, err
	}
	serverCfg, hosts, err := serverConfig(cfg, persistence, visibility)
	if err != nil {
		return nil, err
	}
	authorizer, err := authorization.GetAuthorizerFromConfig(&serverCfg.Global.Authorization)
	if err != nil {
		return nil, err
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&serverCfg.Global.Authorization, logger)
	if err != nil {
		return nil, err
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(serverCfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(logger),
		temporal.WithStaticHosts(hosts),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
			// A search attribute added at run time is usable at once, not after a cache refresh.
			dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
			// One partition per task queue, as suits one server and a few workers: with the
			// default four, a task written to a partition where no poller waits is forwarded
			// or read back from the database, and a new order's first workflow task waited
			// up to 60 ms for a worker that was idle (p99 of the submit call).
			dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
			dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
			// The transfer queue hands new workflow and activity tasks to matching; read at
			// most 20 times a second per shard (the default), each waited for the next read,
			// up to 50 ms on this one-shard server.
			dynamicconfig.TransferProcessorMaxPollRPS.Key(): 1000,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal: build server: %w", err)
	}
	return srv, nil
}

// prepareSQLite creates the server's SQLite database in the data directory on first start
// and writes the namespace, with the search attributes, straight into it.
func prepareSQLite(cfg TemporalConfig) (*config.SQL, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(cfg.DataDir, "temporal.db")
	sqlCfg := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbPath,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "normal",
			"busy_timeout": "10000",
		},
	}
	if _, statErr := os.Stat(dbPath); errors.Is(statErr, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
			return nil, fmt.Errorf("temporal: create schema: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", cfg.Namespace, false, cfg.SearchAttributes)
	if err != nil {
		return nil, err
	}
	ns.Detail.Config.Retention = durationpb.New(cfg.Retention)
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("temporal: create namespace: %w", err)
	}

	return sqlCfg, nil
}

func serverConfig(cfg TemporalConfig, persistence, visibility *config.SQL) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
	services := map[string]config.Service{}
	// One process runs every service, so membership is static: no gossip ring whose
	// stale members (from an earlier run on other ports) would have to time out first.
	hosts := map[primitives.ServiceName]static.Hosts{}
	for _, name := range []primitives.ServiceName{primitives.FrontendService, primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		port := 0
		if name == primitives.FrontendService {
			port = cfg.Port
		}
		port, err := freeport.OrFree(cfg.IP, port)
		if err != nil {
			return nil, nil, err
		}
		services[string(name)] = config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: cfg.IP}}
		hosts[name] = static.SingleLocalHost(net.JoinHostPort(cfg.IP, strconv.Itoa(port)))
	}
	frontend := net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.Port))
	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: cfg.IP},
		},
		Persistence: persistenceConfig(cfg.HistoryShards, persistence, visibility),
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        "active",
			CurrentClusterName:       "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		// The server's internal workers (schedules, batch jobs) dial the frontend with this.
		PublicClient: config.PublicClient{HostPort: frontend},
	}, hosts, nil
}

// persistenceConfig uses one store for both when visibility is nil (SQLite).
func persistenceConfig(shards int32, persistence, visibility *config.SQL) config.Persistence {
	p := config.Persistence{
		DefaultStore:     "default",
		VisibilityStore:  "default",
		NumHistoryShards: shards,
		DataStores:       map[string]config.DataStore{"default": {SQL: persistence}},
	}
	if visibility != nil {
		p.VisibilityStore = "visibility"
		p.DataStores["visibility"] = config.DataStore{SQL: visibility}
	}
	return p
}

func (t *Temporal) startUI(cfg TemporalConfig) {
	t.ui = uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		TemporalGRPCAddress: net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.Port)),
		Host:                cfg.IP,
		Port:                cfg.UIPort,
		EnableUI:            true,
		DefaultNamespace:    cfg.Namespace,
		HideLogs:            true,
		DisableNewsFetch:    true,
		Distribution:        "treasury-dev",
		CORS:                uiconfig.CORS{CookieInsecure: true},
	}))
	t.uiDone = make(chan struct{})
	go func() {
		defer close(t.uiDone)
		// Start returns when Stop closes the server; the port was checked free beforehand.
		if err := t.ui.Start(); err != nil && cfg.Log != nil {
			cfg.Log.Error("temporal UI stopped", "error", err.Error())
		}
	}()
}

// Quiet silences the server's log: while the bundle stops, its parts report each other
// gone one by one, which is expected and not worth an error line.
func (t *Temporal) Quiet() { t.logLevel.SetLevel(zapcore.FatalLevel) }

// Stop stops the UI and the server.
func (t *Temporal) Stop() {
	t.Quiet()
	if t.ui != nil {
		t.ui.Stop()
		<-t.uiDone
	}
	_ = t.server.Stop()
}
