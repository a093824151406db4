package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/batch"
	"github.com/opentreasury/treasury/internal/service"
)

// /developer/logs shows the app's own recent requests, newest first, without queries,
// bodies or tokens; another app's requests never appear.
func TestRequestLogs(t *testing.T) {
	f := newFixture(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	flushed := make(chan struct{}, 100)
	sink := batch.New("request logs", time.Millisecond, 1000, quiet, f.store.AppendRequestLogs)
	sink.Flushed = func() { flushed <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sink.Run(ctx)
	f.handler = NewRouter(Config{Store: f.store, Log: quiet, RequestLogs: sink, Service: &service.Service{Store: f.store, Log: quiet}})

	pay, trade := f.creds.Keys["pay"], f.creds.Keys["trade"]
	f.do(t, "GET", "/api/v1/payments?limit=2", pay.SK, nil, "X-Correlation-Id", "logs-1")
	f.post(t, "/api/v1/payments", pay.SK, `{"amount":"1"}`)
	f.do(t, "GET", "/api/v1/trade-orders", trade.SK, nil)
	f.do(t, "GET", "/api/v1/payments", "sk_unknownunknownunknownunknownunknownunk", nil)
	// The rows are written in the background: wait for the four requests' flushes.
	var r response
	var page apitypes.Page[apitypes.RequestLog]
	for deadline := time.Now().Add(5 * time.Second); ; {
		select {
		case <-flushed:
		case <-time.After(100 * time.Millisecond):
		}
		r = f.do(t, "GET", "/developer/logs?limit=2", pay.SK, nil)
		if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if len(page.Data) == 2 && page.Data[1].Path == "/api/v1/payments" || time.Now().After(deadline) {
			break
		}
	}
	if len(page.Data) != 2 {
		t.Fatalf("want the pay app's 2 requests, got %+v", page.Data)
	}
	// Newest first; the log's own reads come after these two, so skip them.
	r = f.do(t, "GET", "/developer/logs", pay.SK, nil)
	_ = json.Unmarshal(r.body, &page)
	var mine []apitypes.RequestLog
	for _, row := range page.Data {
		if row.Path == "/api/v1/payments" {
			mine = append(mine, row)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("want the pay app's 2 payment requests, got %+v", page.Data)
	}
	newest, oldest := mine[0], mine[1]
	if newest.Method != "POST" || newest.Path != "/api/v1/payments" || newest.Status != 422 {
		t.Fatalf("newest %+v", newest)
	}
	if oldest.Path != "/api/v1/payments" || oldest.Status != 200 || oldest.CorrelationID != "logs-1" ||
		!strings.HasPrefix(oldest.KeyID, "key_") || oldest.LatencyMs <= 0 || oldest.At.IsZero() {
		t.Fatalf("oldest %+v", oldest)
	}
	if strings.Contains(string(r.body), pay.SK) || strings.Contains(string(r.body), "limit=2") {
		t.Fatalf("a token or a query in the logs: %s", r.body)
	}
	// Filters: one correlation id, one status.
	for query, want := range map[string]string{"correlationId=logs-1": "200 logs-1", "status=422": "422 " + newest.CorrelationID} {
		var got apitypes.Page[apitypes.RequestLog]
		r := f.do(t, "GET", "/developer/logs?"+query, pay.SK, nil)
		if err := json.Unmarshal(r.body, &got); err != nil || len(got.Data) != 1 ||
			fmt.Sprint(got.Data[0].Status, " ", got.Data[0].CorrelationID) != want {
			t.Fatalf("?%s: %d %s", query, r.status, r.body)
		}
	}
	f.do(t, "GET", "/developer/logs?status=teapot", pay.SK, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "GET", "/developer/logs?status=1000", pay.SK, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	// Paging and another app's view.
	if r := f.do(t, "GET", "/developer/logs?limit=1", pay.SK, nil); !strings.Contains(string(r.body), `"nextCursor":"`) {
		t.Fatalf("page of one: %s", r.body)
	}
	if r := f.do(t, "GET", "/developer/logs", trade.SK, nil); strings.Contains(string(r.body), "/api/v1/payments") {
		t.Fatalf("the trade app sees pay requests: %s", r.body)
	}
}
