package assemble

import (
	"context"
	"log/slog"
	"sync"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/webhook/dispatch"
	"github.com/opentreasury/treasury/webhook"
)

// WebhookOptions are the webhook settings of the configuration: the sealing box (nil
// without a key) and where webhooks may go.
func (cfg Config) WebhookOptions() service.WebhookOptions {
	opts := service.WebhookOptions{Guard: webhook.Guard{AllowHTTP: cfg.WebhookAllowHTTP, AllowLoopback: cfg.WebhookAllowLoopback}}
	if key, err := webhook.ParseKey(cfg.WebhookSecretKey); err == nil {
		opts.Box, _ = webhook.NewBox(key)
	}
	return opts
}

// Webhooks is the webhook dispatcher of a worker process.
type Webhooks struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartWebhooks runs a dispatcher over the store, woken by the follower, until Stop; its
// attempts are counted into m. Without a sealing key there is nothing it could sign: it
// does not start.
func StartWebhooks(s *store.Store, follower *events.Follower, opts service.WebhookOptions, scale float64, m *metrics.Metrics, log *slog.Logger) *Webhooks {
	log = log.With("component", "webhooks")
	w := &Webhooks{}
	if opts.Box == nil {
		log.Warn("webhooks are not delivered: no WEBHOOK_SECRET_KEY")
		return w
	}
	d := dispatch.New(dispatch.Options{Store: s, Box: opts.Box, Log: log, Guard: opts.Guard, Schedule: dispatch.Schedule{Scale: scale},
		Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	unsubscribe := follower.Subscribe(d.Subscriber())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer unsubscribe()
		d.Run(ctx)
	}()
	return w
}

// Stop ends the dispatcher: sends in flight are cut off and their deliveries given back.
func (w *Webhooks) Stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}
