package dispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/webhook"
)

// BenchmarkHealthyLatencyBesideAHangingEndpoint measures how long a message to a healthy
// endpoint takes from its commit to its arrival, one at a time, alone and then beside an
// endpoint that hangs on every request with a backlog of 200 messages: the second figure
// over the first is what the hanging neighbour costs (1 when it costs nothing).
//
//	go test -run '^$' -bench HealthyLatency -benchtime 40x ./webhook/dispatch/
func BenchmarkHealthyLatencyBesideAHangingEndpoint(b *testing.B) {
	s := storetest.NewSQLite(b)
	f := newFixture(b, s)
	arrived := make(chan string, 1)
	healthyCfg, _ := f.config(b, "")
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		arrived <- r.Header.Get(webhook.HeaderID)
	}))
	b.Cleanup(healthy.Close)
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(hanging.Close)
	b.Cleanup(func() { close(release) })
	healthyCfg.URL = healthy.URL
	if err := s.SaveWebhookConfig(context.Background(), healthyCfg); err != nil {
		b.Fatal(err)
	}
	d := f.start(b, Options{Timeout: time.Minute, Poll: time.Second})
	measure := func() time.Duration {
		var took []time.Duration
		for range b.N {
			start := time.Now()
			sent := f.queue(b, healthyCfg.ID, 1)[0]
			d.Wake()
			select {
			case got := <-arrived:
				if got != sent.MessageID {
					b.Fatalf("arrived %s, sent %s", got, sent.MessageID)
				}
			case <-time.After(30 * time.Second):
				b.Fatal("the healthy endpoint's message did not arrive within 30 s")
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	b.ResetTimer()
	alone := measure()
	hangingCfg, _ := f.config(b, hanging.URL)
	f.queue(b, hangingCfg.ID, 200)
	d.Wake()
	beside := measure()
	b.StopTimer()
	b.ReportMetric(float64(alone.Microseconds())/1000, "alone-p50-ms")
	b.ReportMetric(float64(beside.Microseconds())/1000, "beside-hanging-p50-ms")
	b.ReportMetric(float64(beside)/float64(alone), "beside/alone")
}
