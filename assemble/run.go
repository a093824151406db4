package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/opentreasury/treasury/chain/devchain"
	"github.com/opentreasury/treasury/metrics"
	"github.com/opentreasury/treasury/store"
	"github.com/opentreasury/treasury/worker"
	"github.com/opentreasury/treasury/workflows"
)

// connect opens the store and the Temporal client that api and worker both need; close
// releases them.
func connect(ctx context.Context, cfg Config, log *slog.Logger) (s *store.Store, tc client.Client, closeAll func(), err error) {
	if s, err = OpenStore(ctx, cfg, log); err != nil {
		return nil, nil, nil, err
	}
	if tc, err = DialTemporal(ctx, cfg, log); err != nil {
		_ = s.Close()
		return nil, nil, nil, err
	}
	return s, tc, func() { tc.Close(); _ = s.Close() }, nil
}

// serveMetrics gives the process its collectors and serves them on cfg.MetricsAddr
// until the returned stop.
func serveMetrics(cfg *Config, log *slog.Logger) (stop func(), err error) {
	cfg.Metrics = metrics.New()
	srv, err := ServeMetrics(cfg.MetricsAddr, cfg.Metrics, log)
	if err != nil {
		return nil, err
	}
	return func() { _ = srv.Stop() }, nil
}

// RunAPI serves the public API until ctx ends, then drains in-flight requests. Its
// metrics are served on cfg.MetricsAddr.
func RunAPI(ctx context.Context, cfg Config) error {
	log := NewLogger(cfg.LogLevel).With("process", "api")
	stopMetrics, err := serveMetrics(&cfg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	s, tc, closeAll, err := connect(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeAll()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	live := StartLive(s, LiveOptions{PingInterval: cfg.WSPingInterval, NoSendRing: !cfg.WSSendRing, Metrics: cfg.Metrics}, log)
	log.Info("API listening", "addr", ln.Addr().String())
	srv := NewHTTPServer(cfg.HTTPAddr, NewAPIHandler(cfg, s, tc, live, log))
	err = ServeHTTP(ctx, srv, ln, live, cfg.ShutdownTimeout, log)
	log.Info("API stopped")
	return err
}

// RunWorker polls the treasury task queue until ctx ends, then lets running activities
// finish. Its metrics (the workflows' and activities' among them) are served on
// cfg.MetricsAddr.
func RunWorker(ctx context.Context, cfg Config) error {
	log := NewLogger(cfg.LogLevel).With("process", "worker")
	stopMetrics, err := serveMetrics(&cfg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	s, tc, closeAll, err := connect(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := worker.EnsureSchedules(ctx, tc, cfg.BalanceSyncInterval); err != nil {
		return err
	}
	// The webhook dispatcher runs beside the activities, woken by committed events.
	evCtx, stopEvents := context.WithCancel(context.Background())
	var evWG sync.WaitGroup
	_, follower := followEvents(evCtx, s, log, &evWG)
	hooks := StartWebhooks(s, follower, cfg.WebhookOptions(), cfg.WebhookBackoffScale, cfg.Metrics, log)
	defer func() {
		hooks.Stop()
		stopEvents()
		evWG.Wait()
	}()
	// Only the simulated chain exists so far; a real adapter plugs in here.
	w := NewWorker(s, devchain.New(s), tc, log, cfg.ShutdownTimeout)
	log.Info("worker polling", "taskQueue", workflows.TaskQueue, "namespace", cfg.TemporalNamespace)
	// Run returns on the interrupt, or on a fatal worker error, which ends the process.
	interrupt := make(chan any)
	go func() { <-ctx.Done(); close(interrupt) }()
	if err := w.Run(interrupt); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	log.Info("worker stopped")
	return nil
}

// Migrate applies pending migrations and returns.
func Migrate(ctx context.Context, cfg Config) error {
	log := NewLogger(cfg.LogLevel).With("process", "migrate")
	cfg.MigrateOnStart = true
	s, err := OpenStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	log.Info("database schema is up to date")
	return s.Close()
}

// SetupTemporal registers the custom search attributes on the configured namespace.
func SetupTemporal(ctx context.Context, cfg Config) error {
	log := NewLogger(cfg.LogLevel).With("process", "temporal-setup")
	tc, err := DialTemporal(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	// A namespace registered moments ago reaches the frontend's cache within seconds
	// (its refresh interval); until then the operator API answers not found.
	deadline := time.Now().Add(time.Minute)
	for {
		err := RegisterSearchAttributes(ctx, tc, cfg.TemporalNamespace)
		var notFound *serviceerror.NamespaceNotFound
		if err == nil {
			break
		}
		if !errors.As(err, &notFound) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
	log.Info("search attributes registered", "namespace", cfg.TemporalNamespace)
	return nil
}
