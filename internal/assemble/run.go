package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/service"
)

// APIComponents are the components of treasury api, in start order; ln is the API's
// listener.
func APIComponents(p *Process, ln net.Listener) []Component {
	return []Component{
		p.MetricsEndpoint(),
		p.Database(),
		p.TemporalClient(),
		p.LiveChannel(),
		p.HTTP(ln, func() http.Handler { return NewAPIHandler(p) }),
		p.LiveConnections(),
	}
}

// WorkerComponents are the components of treasury worker, in start order: the webhook
// dispatcher runs beside the activities, woken by committed events.
func WorkerComponents(p *Process) []Component {
	return []Component{
		p.MetricsEndpoint(),
		p.Database(),
		p.TemporalClient(),
		p.Schedules(),
		p.EventFollower(),
		p.Webhooks(),
		p.Chains(),
		p.Worker(func() chain.Adapter { return p.chains }),
		p.QueuedStarts(),
	}
}

// RunAPI serves the public API until ctx ends, then closes live connections and drains
// in-flight requests. Its metrics are served on cfg.MetricsAddr.
func RunAPI(ctx context.Context, cfg Config) error {
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	defer func() { _ = ln.Close() }()
	p := NewProcess(cfg, "api", nil)
	err = p.Run(ctx, APIComponents(p, ln)...)
	p.Log.Info("API stopped")
	return err
}

// RunWorker polls the treasury task queue until ctx ends or the worker fails, then lets
// running activities finish. Its metrics (the workflows' and activities' among them) are
// served on cfg.MetricsAddr.
func RunWorker(ctx context.Context, cfg Config) error {
	p := NewProcess(cfg, "worker", nil)
	return p.Run(ctx, WorkerComponents(p)...)
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

// Operate runs an operator's command: fn gets a service over the configured database,
// without Temporal. On PostgreSQL what it announces (an organisation disabled) reaches
// every API process listening on the database.
func Operate(ctx context.Context, cfg Config, fn func(*service.Service) error) error {
	log := NewLogger(max(cfg.LogLevel, slog.LevelWarn)).With("process", "operator")
	s, err := OpenStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	svc := &service.Service{Store: s, Log: log}
	if databaseURL := s.DatabaseURL(); databaseURL != "" {
		svc.Bus = events.NewPostgresBus(databaseURL, s, log)
	}
	return fn(svc)
}
