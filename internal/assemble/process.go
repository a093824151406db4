package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/rpcproxy"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/worker"
	"github.com/opentreasury/treasury/workflows"
)

// Process is one treasury process being put together: its configuration, what its started
// components made (for the components after them), and the group that runs them. Every
// process — treasury api, treasury worker, the dev bundle, the cluster launcher, the bench
// rigs — is a list of the components below, run by its Group.
type Process struct {
	Group
	Config Config
	Log    *slog.Logger

	Store    *store.Store
	Temporal client.Client
	// Live is an API process's live channel (bus, follower, hub, request logs); Events is
	// the bus and follower of a process without one.
	Live   *Live
	Events *Events

	// RPCNodes are the chains' JSON-RPC nodes the API forwards POST /rpc/{chain} to; a
	// process with nodes of its own (the dev bundle's, in process) sets them before its
	// HTTP server starts. Nil: the API dials the configured EVM chains (Config.EVMChains).
	RPCNodes rpcproxy.Nodes

	service *service.Service
	// chains serve a worker's orders, once the chains component has started.
	chains chain.Router
}

// NewProcess starts putting a process together; name labels its logs when it makes its
// own logger (log nil).
func NewProcess(cfg Config, name string, log *slog.Logger) *Process {
	// A logger handed in names its process already (treasury-dev, the cluster's launcher):
	// a second "process" key would make each line JSON that strict readers refuse.
	if log == nil {
		log = NewLogger(cfg.LogLevel).With("process", name)
	}
	return &Process{Config: cfg, Log: log, Group: Group{StopTimeout: cfg.ShutdownTimeout, Log: log}}
}

// Service is the process's one service.Service: the API's routes, the console's pages and
// the dev signer all call this one, over the store, Temporal, the bus and the hub the
// process's components made. Ask for it once they have started.
func (p *Process) Service() *service.Service {
	if p.service != nil {
		return p.service
	}
	svc := &service.Service{Store: p.Store, Webhooks: p.Config.WebhookOptions(), Log: p.Log, ValuationMaxAge: p.Config.ValuationMaxAge,
		StartGrace: p.Config.QueuedStartGrace, PayoutMinInterval: p.Config.PayoutMinInterval, Chains: p.Config.Chains, Passkeys: p.Config.Passkeys(), BatchPartSizes: map[string]int{}}
	for _, c := range p.Config.EVMChains {
		if c.BatchPartSize > 0 {
			svc.BatchPartSizes[c.Name] = c.BatchPartSize
		}
	}
	if p.Temporal != nil {
		svc.Workflows = workflows.Client{Temporal: p.Temporal, DecisionWait: p.Config.SubmitDecisionWait}
		svc.DryRuns = workflows.Client{Temporal: p.Temporal}
		svc.Recoveries = workflows.Client{Temporal: p.Temporal}
		svc.WalletSync = workflows.Client{Temporal: p.Temporal}
		svc.AuditVerifications = workflows.Client{Temporal: p.Temporal}
		svc.Payouts = workflows.PayoutSchedules{Temporal: p.Temporal}
	}
	switch {
	case p.Live != nil:
		svc.Bus, svc.Live = p.Live.Bus, p.Live.Hub
	case p.Events != nil:
		svc.Bus = p.Events.Bus
	}
	p.service = svc
	return svc
}

// Follower is the process's reader of committed events, whichever component made it.
func (p *Process) Follower() *events.Follower {
	if p.Live != nil {
		return p.Live.Follower
	}
	if p.Events != nil {
		return p.Events.Follower
	}
	return nil
}

// MetricsEndpoint serves the process's collectors on Config.MetricsAddr.
func (p *Process) MetricsEndpoint() Component {
	var srv *MetricsServer
	return Component{Name: "metrics endpoint",
		Start: func(context.Context) (err error) {
			if p.Config.Metrics == nil {
				p.Config.Metrics = metrics.New()
			}
			srv, err = ServeMetrics(p.Config.MetricsAddr, p.Config.Metrics, p.Log)
			return err
		},
		Stop: func(context.Context) error { return srv.Stop() },
	}
}

// Database opens (and, if configured, migrates) the store.
func (p *Process) Database() Component {
	return Component{Name: "store",
		Start: func(ctx context.Context) (err error) {
			p.Store, err = OpenStore(ctx, p.Config, p.Log)
			return err
		},
		Stop: func(context.Context) error { return p.Store.Close() },
	}
}

// TemporalClient dials Temporal.
func (p *Process) TemporalClient() Component {
	return Component{Name: "temporal client",
		Start: func(ctx context.Context) (err error) {
			p.Temporal, err = DialTemporal(ctx, p.Config, p.Log)
			return err
		},
		Stop: func(context.Context) error { p.Temporal.Close(); return nil },
	}
}

// LiveChannel starts an API process's bus, follower, WebSocket hub and request-log writer.
// Its stop writes the request logs the drained requests left, so it comes before the HTTP
// server.
func (p *Process) LiveChannel() Component {
	return Component{Name: "live channel",
		Start: func(context.Context) error {
			p.Live = StartLive(p.Store, LiveOptions{PingInterval: p.Config.WSPingInterval, NoSendRing: !p.Config.WSSendRing,
				Metrics: p.Config.Metrics}, p.Log)
			return nil
		},
		Stop: func(context.Context) error { p.Live.Stop(); return nil },
	}
}

// LiveConnections closes every WebSocket connection (1001) when the process stops. It
// comes after the HTTP server so that it stops first: http.Server.Shutdown does not track
// hijacked connections, and a live client would otherwise hold the drain to its timeout.
func (p *Process) LiveConnections() Component {
	return Component{Name: "live connections",
		Stop: func(ctx context.Context) error { p.Live.CloseConnections(ctx); return nil },
	}
}

// EventFollower starts the bus and follower of a process that has no live channel.
func (p *Process) EventFollower() Component {
	return Component{Name: "event follower",
		Start: func(context.Context) error {
			p.Events = StartEvents(p.Store, p.Log)
			return nil
		},
		Stop: func(context.Context) error { p.Events.Stop(); return nil },
	}
}

// Schedules creates or updates the Temporal Schedules (balance sync, price refresh,
// maintenance).
func (p *Process) Schedules() Component {
	return Component{Name: "schedules",
		Start: func(ctx context.Context) error {
			return worker.EnsureSchedules(ctx, p.Temporal, p.Config.BalanceSyncInterval, p.Config.PriceRefreshInterval)
		},
	}
}

// Worker polls the task queue with every workflow and activity, the activities on the
// chain adapter newChain makes (called once the store is open). It stops polling (and lets running activities finish within the
// shutdown timeout) before anything listed before it stops.
func (p *Process) Worker(newChain func() chain.Adapter) Component {
	var w sdkworker.Worker
	return Component{Name: "worker",
		Start: func(context.Context) error {
			w = NewWorker(p.Store, newChain(), p.Temporal, p.Log, p.Config, p.Service(), func(err error) {
				p.Fail(fmt.Errorf("worker: %w", err))
			})
			if err := w.Start(); err != nil {
				return err
			}
			p.Log.Info("worker polling", "taskQueue", workflows.TaskQueue, "namespace", p.Config.TemporalNamespace)
			return nil
		},
		Stop: func(context.Context) error { w.Stop(); p.Log.Info("worker stopped"); return nil },
	}
}

// QueuedStarts starts, every QueuedStartInterval, the order workflows whose submits could
// not start them in time (service.StartQueuedOrders): each worker process shares the
// queue with the others.
func (p *Process) QueuedStarts() Component {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	return Component{Name: "queued order starts",
		Start: func(context.Context) error {
			svc := p.Service()
			go func() {
				defer close(done)
				for {
					// A full batch may have more behind it: go on at once.
					n, err := svc.StartQueuedOrders(ctx, queuedStartBatch)
					if err != nil && ctx.Err() == nil {
						p.Log.Warn("queued order starts", "error", err.Error())
					}
					if n == queuedStartBatch && err == nil {
						continue
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(QueuedStartInterval):
					}
				}
			}()
			return nil
		},
		Stop: func(context.Context) error { cancel(); <-done; return nil },
	}
}

// QueuedStartInterval is how often a worker looks for queued order starts that are due.
const QueuedStartInterval = 2 * time.Second

// queuedStartBatch is how many queued starts one look takes.
const queuedStartBatch = 100

// Webhooks runs the webhook dispatcher, woken by the process's follower.
func (p *Process) Webhooks() Component {
	var hooks *Webhooks
	return Component{Name: "webhook dispatcher",
		Start: func(context.Context) error {
			hooks = StartWebhooks(p.Store, p.Follower(), p.Config.WebhookOptions(), p.Config.WebhookBackoffScale,
				p.Config.Metrics, p.Log)
			return nil
		},
		Stop: func(context.Context) error { hooks.Stop(); return nil },
	}
}

// HTTP serves the handler made by handler (called once the components before it have
// started) on ln, and drains in-flight requests on stop: those still running at the stop's
// deadline are cut off. A server that stops serving on its own fails the process.
func (p *Process) HTTP(ln net.Listener, handler func() http.Handler) Component {
	var srv *http.Server
	served := make(chan error, 1)
	return Component{Name: "http server",
		Start: func(context.Context) error {
			srv = NewHTTPServer(ln.Addr().String(), handler())
			go func() {
				err := srv.Serve(ln)
				if !errors.Is(err, http.ErrServerClosed) {
					p.Fail(fmt.Errorf("the HTTP server stopped serving: %w", err))
				}
				served <- err
			}()
			p.Log.Info("API listening", "addr", ln.Addr().String())
			return nil
		},
		Stop: func(ctx context.Context) error {
			if err := srv.Shutdown(ctx); err != nil {
				p.Log.Warn("requests still running after the shutdown timeout were cut off",
					"timeout", p.Group.StopTimeout.String())
				_ = srv.Close()
			}
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
}

// Events is the bus and follower of a process without a live channel (a worker: its
// webhook dispatcher is woken by commits).
type Events struct {
	Bus      events.Bus
	Follower *events.Follower
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// StartEvents starts a bus on the store's commits and a follower over it, until Stop.
func StartEvents(s *store.Store, log *slog.Logger) *Events {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Events{cancel: cancel}
	e.Bus, e.Follower = followEvents(ctx, s, log, &e.wg)
	return e
}

// Stop ends the follower and the bus.
func (e *Events) Stop() {
	e.cancel()
	e.wg.Wait()
}
