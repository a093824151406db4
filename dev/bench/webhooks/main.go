// Command webhooks measures how fast the webhook dispatcher drains a backlog of deliveries
// to a receiver on loopback, beside the same requests sent by a bare HTTP client with the
// same concurrency in the same run: the dispatcher's work (leasing, signing, recording
// every attempt) as a share of what the receiver and loopback allow.
//
//	go run ./bench/webhooks -deliveries 10000
//	go run ./bench/webhooks -deliveries 10000 -database-url postgres://…
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/webhook"
)

const payload = `{"id":"evt_0","event":"Order.Confirmed","domain":"payment","orderId":"ord_0","orderStatus":"confirmed","sequence":6,"correlationId":"bench","occurredAt":"2026-11-25T00:00:00.000Z","txHash":"0x0000000000000000000000000000000000000000000000000000000000000000"}`

func main() {
	n := flag.Int("deliveries", 10000, "deliveries in the backlog")
	configs := flag.Int("webhooks", 4, "webhook configs the deliveries are spread over (the dispatcher sends at most 16 at a time to each)")
	databaseURL := flag.String("database-url", "", "PostgreSQL store instead of a SQLite file (an empty schema)")
	flag.Parse()
	if err := run(*n, *configs, *databaseURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(n, configs int, databaseURL string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "treasury-bench-webhooks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var received atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	// The reference: the same requests, the same concurrency, a plain client.
	concurrency := min(64, 16*configs)
	start := time.Now()
	bare(receiver.URL, n, concurrency)
	bareRate := float64(n) / time.Since(start).Seconds()

	// A worker process's webhook side, from the same constructors (assemble): the store,
	// the event follower, and later the dispatcher.
	key, _ := webhook.NewKey()
	p := assemble.NewProcess(assemble.Config{DatabaseURL: databaseURL, SQLitePath: filepath.Join(dir, "treasury.db"),
		MigrateOnStart: true, WebhookSecretKey: key, WebhookAllowHTTP: true, WebhookAllowLoopback: true,
		ShutdownTimeout: 10 * time.Second}, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if databaseURL != "" {
		p.Config.SQLitePath = ""
	}
	if err := p.Start(ctx, p.Database(), p.EventFollower()); err != nil {
		return err
	}
	defer func() { _ = p.Stop() }()
	configIDs, err := queueDeliveries(ctx, p, dir, receiver.URL, n, configs)
	if err != nil {
		return err
	}
	received.Store(0)
	start = time.Now()
	if err := p.Start(ctx, p.Webhooks()); err != nil {
		return err
	}
	for {
		pending, err := countPending(ctx, p.Store, configIDs)
		if err != nil {
			return err
		}
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	rate := float64(n) / took.Seconds()
	db := "SQLite"
	if databaseURL != "" {
		db = "PostgreSQL"
	}
	fmt.Printf("store %s: %d deliveries over %d webhooks, %d sends at a time\n", db, n, configs, concurrency)
	fmt.Printf("dispatcher: %.0f deliveries/s (backlog drained and recorded in %v; receiver got %d requests)\n", rate, took.Round(time.Millisecond), received.Load())
	fmt.Printf("bare client, same requests: %.0f requests/s\n", bareRate)
	fmt.Printf("dispatcher / bare client: %.2f\n", rate/bareRate)
	return nil
}

// queueDeliveries seeds the demo organisation, gives it configs webhooks to url (their
// secrets sealed with the process's key) and queues n deliveries over them.
func queueDeliveries(ctx context.Context, p *assemble.Process, dir, url string, n, configs int) ([]string, error) {
	s := p.Store
	creds, err := seed.Ensure(ctx, s, dir, seed.URLs{}, p.Log)
	if err != nil {
		return nil, err
	}
	box := p.Config.WebhookOptions().Box
	configIDs := make([]string, configs)
	for i := range configIDs {
		secret, _ := webhook.NewSecret()
		sealed, _ := box.Seal(secret)
		now := time.Now().UTC()
		c := &store.WebhookConfig{ID: ids.New(ids.WebhookConfig), OrgID: creds.OrgID, App: "pay", URL: url, Events: "*",
			Enabled: true, Secret: sealed, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateWebhookConfig(ctx, c); err != nil {
			return nil, err
		}
		configIDs[i] = c.ID
	}
	return configIDs, s.Tx(ctx, func(tx *store.Store) error {
		now := time.Now().UTC()
		for i := range n {
			d := &store.WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: ids.New(ids.WebhookMessage),
				ConfigID: configIDs[i%configs], EventID: ids.New(ids.Event), Event: "Order.Confirmed", OrderID: "ord_0",
				CorrelationID: "bench", Payload: payload, Status: store.DeliveryPending, NextAttemptAt: &now, CreatedAt: now}
			if err := tx.CreateWebhookDelivery(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// bare posts n requests to url from concurrency goroutines.
func bare(url string, n, concurrency int) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				res, err := client.Post(url, "application/json", strings.NewReader(payload))
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		})
	}
	wg.Wait()
}

func countPending(ctx context.Context, s *store.Store, configIDs []string) (int, error) {
	total := 0
	for _, id := range configIDs {
		list, _, err := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{ConfigID: id, Status: store.DeliveryPending, Limit: 1})
		if err != nil {
			return 0, err
		}
		total += len(list)
	}
	return total, nil
}
