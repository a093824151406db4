package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/wait"
)

// hookReceiver is an integrator's webhook endpoint: it verifies each message with the
// published secret, answers 503 while down, and remembers what it accepted.
type hookReceiver struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	up     bool
	// accepted counts the 2xx answers per webhook-id; events holds each accepted body.
	accepted map[string]int
	events   map[string]map[string]any
	refused  int
	bad      int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{accepted: map[string]int{}, events: map[string]map[string]any{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := client.VerifyWebhook(r.secret, req.Header, body); err != nil {
			r.bad++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !r.up {
			r.refused++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var ev map[string]any
		_ = json.Unmarshal(body, &ev)
		r.accepted[req.Header.Get("webhook-id")]++
		r.events[ev["id"].(string)] = ev
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) setUp(up bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up = up
}

func (r *hookReceiver) has(ids []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if r.events[id] == nil {
			return false
		}
	}
	return true
}

// A receiver that is down while 100 orders of all four domains complete receives every
// event once it is back (retried on schedule, each message accepted once); a WebSocket
// config on the same events gets them too; a disabled webhook gets nothing; another app's
// events never reach a webhook.
func TestWebhooksDeliverEveryEventAfterTheReceiverComesBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", UIPort: -1,
		BalanceSyncInterval: time.Hour, DevSigner: true, BlockTime: 50 * time.Millisecond, RateLimit: 1e6, RateBurst: 1e6,
		// Retries in seconds: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h become 2.5 ms … 18 s.
		WebhookBackoffScale: 0.0005, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	wallet := b.Credentials.Wallets[0].ID

	domains := []struct{ app, collection, body string }{
		{"pay", "payments", `{"walletId":%q,"asset":"USDC","amount":"25","destination":{"address":"0x1111111111111111111111111111111111111111"}}`},
		{"trade", "trade-orders", `{"walletId":%q,"sellAsset":"ETH","buyAsset":"USDC","sellAmount":"0.01","maxSlippageBps":50}`},
		{"earn", "earn-orders", `{"walletId":%q,"protocol":"aave","action":"deposit","asset":"USDC","amount":"10"}`},
		{"borrow", "borrow-orders", `{"walletId":%q,"protocol":"aave","action":"draw","asset":"USDC","amount":"10"}`},
	}
	receivers := map[string]*hookReceiver{}
	for _, d := range domains {
		rc := newHookReceiver(t)
		r := send(t, "POST", b.APIURL+"/developer/webhooks", b.Credentials.Keys[d.app].SK,
			fmt.Sprintf(`{"url":%q,"events":["order.*","wallet.*"]}`, rc.URL+"/hooks"))
		if r.status != 201 {
			t.Fatalf("webhook of %s: %d %s", d.app, r.status, r.raw)
		}
		rc.secret = r.body["secret"].(string)
		receivers[d.app] = rc
	}
	// A disabled webhook of pay on every event: it must get nothing.
	disabled := newHookReceiver(t)
	disabled.setUp(true)
	r := send(t, "POST", b.APIURL+"/developer/webhooks", b.Credentials.Keys["pay"].SK, fmt.Sprintf(`{"url":%q,"events":["*"]}`, disabled.URL))
	disabled.secret = r.body["secret"].(string)
	if r := send(t, "PATCH", b.APIURL+"/developer/webhooks/"+r.body["id"].(string), b.Credentials.Keys["pay"].SK, `{"enabled":false}`); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.raw)
	}
	// The live channel on the same events of pay.
	r = send(t, "POST", b.APIURL+"/developer/websockets", b.Credentials.Keys["pay"].SK, `{"events":["order.*","wallet.*"]}`)
	live := dialLive(t, b.APIURL, r.body["id"].(string), b.Credentials.Keys["pay"].PK)

	orders := map[string][]string{}
	for i := range 100 {
		d := domains[i%len(domains)]
		keys := b.Credentials.Keys[d.app]
		r := send(t, "POST", api+"/"+d.collection, keys.SK, fmt.Sprintf(d.body, wallet))
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", d.collection, r.status, r.raw)
		}
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/"+d.collection+"/"+id+"/submit", keys.SK, ""); r.status != 202 {
			t.Fatalf("submit %s: %d %s", id, r.status, r.raw)
		}
		orders[d.app] = append(orders[d.app], id)
	}
	want := map[string][]string{}
	for _, d := range domains {
		for _, id := range orders[d.app] {
			waitStatus(t, api+"/"+d.collection+"/"+id, b.Credentials.Keys[d.app].Read, "confirmed")
			r := call(t, "GET", api+"/events?orderId="+id, b.Credentials.Keys[d.app].Read)
			for _, e := range r.body["data"].([]any) {
				want[d.app] = append(want[d.app], e.(map[string]any)["id"].(string))
			}
		}
	}
	for app, rc := range receivers {
		rc.mu.Lock()
		refused := rc.refused
		rc.mu.Unlock()
		if refused == 0 {
			t.Fatalf("%s's receiver was never tried while it was down", app)
		}
		rc.setUp(true)
	}
	for app, rc := range receivers {
		wait.For(t, 90*time.Second, fmt.Sprintf("%s's receiver to have all %d events", app, len(want[app])), func() bool {
			return rc.has(want[app])
		})
		rc.mu.Lock()
		for id, n := range rc.accepted {
			if n != 1 {
				t.Errorf("%s's receiver accepted message %s %d times", app, id, n)
			}
		}
		for id, ev := range rc.events {
			if domain := ev["domain"]; map[string]string{"payment": "pay", "trade": "trade", "earn": "earn", "borrow": "borrow"}[domain.(string)] != app {
				t.Errorf("%s's receiver got event %s of domain %v", app, id, domain)
			}
		}
		if len(rc.events) != len(want[app]) || rc.bad != 0 {
			t.Errorf("%s's receiver: %d events, want %d; %d unverified", app, len(rc.events), len(want[app]), rc.bad)
		}
		rc.mu.Unlock()
	}
	disabled.mu.Lock()
	if n := len(disabled.accepted) + disabled.refused + disabled.bad; n != 0 {
		t.Errorf("the disabled webhook got %d requests", n)
	}
	disabled.mu.Unlock()

	// The live channel got the same events of pay as its webhook.
	var overLive []string
	for len(overLive) < len(want["pay"]) {
		select {
		case f := <-live.frames:
			overLive = append(overLive, f["data"].(map[string]any)["id"].(string))
		case <-time.After(10 * time.Second):
			t.Fatalf("the live channel got %d of %d events", len(overLive), len(want["pay"]))
		}
	}
	sort.Strings(overLive)
	overHook := append([]string(nil), want["pay"]...)
	sort.Strings(overHook)
	if fmt.Sprint(overLive) != fmt.Sprint(overHook) {
		t.Fatal("the live channel and the webhook got different events")
	}
}
