package assemble

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain/fakechain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/webhook"
	"github.com/opentreasury/treasury/workflows"
)

// suiteOrders runs each submitted order's real workflow, with the real activities on the
// store, in the SDK's test environment, to its end: what a worker would do.
type suiteOrders struct {
	t     *testing.T
	store *store.Store
	keys  map[string]*keys.Key
	m     *metrics.Metrics
	log   *slog.Logger
	mu    sync.Mutex
	// chain is funded from the seeded balances at the first order.
	chain *fakechain.Chain
}

func (w *suiteOrders) Start(context.Context, workflows.Submission) error { return nil }

func (w *suiteOrders) SubmitOutcome(context.Context, string, string) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{}, workflows.ErrUnknownSubmission
}

func (w *suiteOrders) Submit(ctx context.Context, o workflows.Submission) (workflows.PolicyDecision, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(w.m.Temporal())
	suite.SetLogger(sdklog.NewStructuredLogger(w.log))
	env := suite.NewTestWorkflowEnvironment()
	if w.chain == nil {
		var err error
		if w.chain, err = fakechain.NewFunded(ctx, w.store.ChainHoldings); err != nil {
			return workflows.PolicyDecision{}, err
		}
		w.chain.BlockTime = 0
	}
	acts := &activities.Orders{Store: w.store, Chain: w.chain, Log: w.log}
	env.RegisterWorkflowWithOptions(workflows.OrderLifecycle, workflow.RegisterOptions{Name: workflows.OrderWorkflow})
	// Registered as the worker registers it: every method, under its own name.
	env.RegisterActivity(acts)
	// The paired signer signs each leg's request an hour (of the environment's time) in.
	for i := range o.Legs {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(workflows.QueryState)
			if err != nil {
				w.t.Error(err)
				return
			}
			var st workflows.OrderState
			_ = v.Get(&st)
			if len(st.Requests) <= i {
				w.t.Errorf("no signing request for leg %d: %+v", i, st)
				return
			}
			req, err := w.store.SigningRequest(context.Background(), o.OrgID, st.Requests[i])
			if err != nil {
				w.t.Error(err)
				return
			}
			digest, _ := hex.DecodeString(req.Digest)
			sig, err := w.keys[o.WalletID].Sign(digest)
			if err != nil {
				w.t.Error(err)
				return
			}
			env.SignalWorkflow(workflows.SignalSignature, workflows.Signature{SigningRequestID: req.ID,
				Signature: base64.StdEncoding.EncodeToString(sig)})
		}, time.Duration(i+1)*time.Hour)
	}
	env.ExecuteWorkflow(workflows.OrderWorkflow, workflows.OrderInput{OrderID: o.OrderID, CorrelationID: o.CorrelationID, Legs: o.Legs})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		return workflows.PolicyDecision{}, fmt.Errorf("workflow completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	return workflows.PolicyDecision{Allowed: true}, nil
}

func (w *suiteOrders) SignalApproval(context.Context, string, workflows.ApprovalDecision) error {
	return nil
}
func (w *suiteOrders) SignalSignature(context.Context, string, workflows.Signature) error { return nil }
func (w *suiteOrders) SignalRefusal(context.Context, string, workflows.Refusal) error     { return nil }

// idLike matches a value that carries an id, a key or a token of the service.
var idLike = regexp.MustCompile(`(^|[^a-z])(ord|apr|sig|evt|wal|key|wsc|whk|msg|dlv|oac|org|usr|aud|rep|wkr|sk|pk|tk|at|ocs)_[0-9a-zA-Z]`)

// A payment goes its whole way (the API, the workflow and its activities on the store,
// the live channel, a webhook) in one process with one registry; then /metrics, scraped
// from its own server, has every series with the right labels, and no label carries an id.
func TestMetricsAfterALifecycle(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := metrics.New()
	dir := t.TempDir()
	key, _ := webhook.NewKey()
	cfg := Config{SQLitePath: filepath.Join(dir, "treasury.db"), MigrateOnStart: true, Metrics: m,
		WebhookSecretKey: key, WebhookAllowHTTP: true, WebhookAllowLoopback: true, WebhookBackoffScale: 1}
	s, err := OpenStore(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	creds, err := seed.Ensure(ctx, s, dir, seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := seed.LoadSignerKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	live := StartLive(s, LiveOptions{Metrics: m, NoSendRing: true}, log)
	hooks := StartWebhooks(s, live.Follower, cfg.WebhookOptions(), cfg.WebhookBackoffScale, m, log)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		live.Shutdown(sctx)
		hooks.Stop()
	})
	const burst = 10
	router := api.NewRouter(api.Config{
		Store:     s,
		Log:       log,
		Live:      live.Hub,
		Metrics:   m,
		RateLimit: 0.001,
		RateBurst: burst,
		Service:   &service.Service{Store: s, Log: log, Workflows: &suiteOrders{t: t, store: s, keys: keys, m: m, log: log}, Bus: live.Bus, Webhooks: cfg.WebhookOptions(), Live: live.Hub},
	})
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	ms, err := ServeMetrics("127.0.0.1:0", m, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Stop() })

	call := func(method, path, token, body string, headers ...string) (int, http.Header, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, res.Header, out
	}
	pay := creds.Keys["pay"].SK

	// A webhook receiver, and a live connection, both for the pay app.
	confirmed := make(chan struct{}, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"Order.Confirmed"`) {
			confirmed <- struct{}{}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	if status, _, out := call("POST", "/developer/webhooks", pay, `{"url":"`+receiver.URL+`/hook","events":["Order.*"]}`); status != 201 {
		t.Fatalf("webhook: %d %v", status, out)
	}
	status, _, out := call("POST", "/developer/websockets", pay, `{"events":["*"]}`)
	if status != 201 {
		t.Fatalf("websocket config: %d %v", status, out)
	}
	configID := out["id"].(string)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/api/v1/ws?id="+configID+"&token="+pay, nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan string, 100)
	go func() {
		defer close(frames)
		for {
			var f struct{ Type, Event string }
			if err := ws.ReadJSON(&f); err != nil {
				return
			}
			frames <- f.Type + " " + f.Event
		}
	}()

	// A payment, created twice with one Idempotency-Key (the second is a replay), submitted.
	payment := `{"walletId":"` + creds.Wallets[0].ID + `","asset":"USDC","amount":"500","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	status, _, out = call("POST", "/api/v1/payments", pay, payment, "Idempotency-Key", "metrics-1")
	if status != 201 {
		t.Fatalf("payment: %d %v", status, out)
	}
	orderID := out["id"].(string)
	if status, header, _ := call("POST", "/api/v1/payments", pay, payment, "Idempotency-Key", "metrics-1"); status != 201 ||
		header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", status, header)
	}
	if status, _, out := call("POST", "/api/v1/payments/"+orderID+"/submit", pay, "{}"); status != 202 {
		t.Fatalf("submit: %d %v", status, out)
	}
	// Another credential runs out of its burst.
	refused := 0
	for range burst + 1 {
		if status, _, _ := call("GET", "/api/v1/treasury/portfolio", creds.Keys["treasury"].SK, ""); status == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the burst was not refused")
	}

	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("the live connection ended early")
			}
			seen = f == "event Order.Confirmed"
		case <-deadline:
			t.Fatal("no Order.Confirmed frame")
		}
	}
	select {
	case <-confirmed:
	case <-deadline:
		t.Fatal("no Order.Confirmed webhook")
	}

	// While connected: one connection.
	fams := scrape(t, ms.URL)
	if v := value(t, fams, "treasury_websocket_connections", nil); v != 1 {
		t.Fatalf("treasury_websocket_connections %v, want 1", v)
	}
	// The client closes (1000): the server answers and counts it.
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	for range frames {
	}
	// The close, the frames and the four webhook attempts (Order.*) are counted once they
	// are over: a frame is counted after its write returns, which may be after the client
	// has read it.
	wait.For(t, 10*time.Second, "the close, the frames and the webhook attempts to be counted", func() bool {
		fams = scrape(t, ms.URL)
		hooks := find(fams, "treasury_webhook_delivery_attempts_total", map[string]string{"outcome": "succeeded"})
		frames := find(fams, "treasury_websocket_frames_sent_total", nil)
		return find(fams, "treasury_websocket_closes_total", map[string]string{"code": "1000"}) != nil &&
			hooks != nil && hooks.GetCounter().GetValue() >= 4 && frames != nil && frames.GetCounter().GetValue() >= 8
	})

	atLeast := func(name string, labels map[string]string, min float64) {
		t.Helper()
		if v := value(t, fams, name, labels); v < min {
			t.Errorf("%s%v = %v, want at least %v", name, labels, v, min)
		}
	}
	atLeast("treasury_http_requests_total", map[string]string{"route": "/api/v1/payments", "method": "POST", "status": "201"}, 2)
	atLeast("treasury_http_requests_total", map[string]string{"route": "/api/v1/payments/:id/submit", "method": "POST", "status": "202"}, 1)
	atLeast("treasury_http_requests_total", map[string]string{"route": "/api/v1/treasury/portfolio", "method": "GET", "status": "429"}, 1)
	atLeast("treasury_http_requests_total", map[string]string{"route": "/api/v1/ws", "method": "GET", "status": "101"}, 1)
	atLeast("treasury_http_request_duration_seconds", map[string]string{"route": "/api/v1/payments/:id/submit", "method": "POST"}, 1)
	atLeast("treasury_idempotency_replays_total", nil, 1)
	atLeast("treasury_rate_limit_refusals_total", map[string]string{"limiter": "credential"}, float64(refused))
	for _, ev := range []string{"Order.Created", "Order.Submitted", "Wallet.SigningRequested", "Wallet.TransactionSigned",
		"Order.Broadcast", "Order.Confirmed"} {
		if v := value(t, fams, "treasury_events_committed_total", map[string]string{"event": ev}); v != 1 {
			t.Errorf("treasury_events_committed_total{event=%q} = %v, want 1", ev, v)
		}
	}
	atLeast("treasury_webhook_delivery_attempts_total", map[string]string{"outcome": "succeeded"}, 4)
	atLeast("treasury_webhook_delivery_duration_seconds", map[string]string{"outcome": "succeeded"}, 4)
	// connection.ready, six events, the close frame.
	atLeast("treasury_websocket_frames_sent_total", nil, 8)
	atLeast("treasury_websocket_closes_total", map[string]string{"code": "1000"}, 1)
	if v := value(t, fams, "treasury_websocket_connections", nil); v != 0 {
		t.Errorf("treasury_websocket_connections %v after the close, want 0", v)
	}
	atLeast("go_goroutines", nil, 1)
	// The SDK reports through the handler: the test environment runs the workflow's local
	// activities as a worker would (its other series need a server: e2e).
	atLeast("temporal_local_activity_total", map[string]string{"activity_type": "ConfirmLeg", "workflow_type": "OrderLifecycle"}, 1)
	atLeast("temporal_local_activity_execution_latency_seconds", map[string]string{"activity_type": "MarkSubmitted",
		"workflow_type": "OrderLifecycle"}, 1)

	// No label carries an id, a key or a raw path.
	secrets := []string{orderID, configID, creds.OrgID, pay, creds.Keys["treasury"].SK, creds.Wallets[0].ID}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				v := l.GetValue()
				if idLike.MatchString(v) {
					t.Errorf("%s has label %s=%q, which looks like an id", f.GetName(), l.GetName(), v)
				}
				for _, s := range secrets {
					if strings.Contains(v, s) {
						t.Errorf("%s has label %s=%q, which carries %q", f.GetName(), l.GetName(), v, s)
					}
				}
			}
		}
	}
	// Only /metrics is served there.
	res, err := http.Get(ms.URL + "/api/v1/treasury/portfolio")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("the metrics server answered %d for another path", res.StatusCode)
	}
}

// scrape reads a metrics server's /metrics as Prometheus would.
func scrape(t *testing.T, baseURL string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(baseURL + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// find returns the series of a family whose labels include these, or nil.
func find(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	for _, mt := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range mt.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
			}
		}
		if match {
			return mt
		}
	}
	return nil
}

// value is a series' value: a counter's or a gauge's, a histogram's count.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	mt := find(fams, name, labels)
	switch {
	case mt == nil:
		t.Errorf("no series %s%v", name, labels)
		return 0
	case mt.Counter != nil:
		return mt.GetCounter().GetValue()
	case mt.Gauge != nil:
		return mt.GetGauge().GetValue()
	case mt.Histogram != nil:
		return float64(mt.GetHistogram().GetSampleCount())
	}
	return mt.GetUntyped().GetValue()
}
