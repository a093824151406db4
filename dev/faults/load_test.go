package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/cluster"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/store"
)

// domain is one kind of order, created by its app.
type domain struct{ app, collection, body string }

var domains = []domain{
	{"pay", "payments", `{"walletId":%q,"asset":"USDC","amount":"25","destination":{"address":"0x1111111111111111111111111111111111111111"}}`},
	{"trade", "trade-orders", `{"walletId":%q,"sellAsset":"ETH","buyAsset":"USDC","sellAmount":"0.01","maxSlippageBps":50}`},
	{"earn", "earn-orders", `{"walletId":%q,"protocol":"aave","action":"deposit","asset":"USDC","amount":"10"}`},
	{"borrow", "borrow-orders", `{"walletId":%q,"protocol":"aave","action":"draw","asset":"USDC","amount":"10"}`},
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// answer is an HTTP response, its JSON body decoded when it has one.
type answer struct {
	status int
	body   map[string]any
	raw    string
	err    error
}

func send(method, url, token, body string, header ...string) answer {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// placed is an order created and submitted through one of the APIs.
type placed struct {
	id string
	d  domain
}

// placeOrders creates and submits n orders of every domain in turn, spread over the
// cluster's APIs, from a few goroutines. A create or submit that fails for a reason a
// client retries (a transport error, 5xx) is retried with the same Idempotency-Key.
func placeOrders(t *testing.T, c *cluster.Cluster, n int) []placed {
	t.Helper()
	wallet := c.Credentials.Wallets[0].ID
	out := make([]placed, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d := domains[i%len(domains)]
				base := c.APIURLs[i%len(c.APIURLs)] + "/api/v1/" + d.collection
				key := c.Credentials.Keys[d.app].SK
				r, err := retried("POST", base, key, fmt.Sprintf(d.body, wallet), fmt.Sprintf("faults-create-%d", i), 201)
				if err != nil {
					errs <- err
					continue
				}
				id := r.body["id"].(string)
				if _, err := retried("POST", base+"/"+id+"/submit", key, "", "faults-submit-"+id, 202); err != nil {
					errs <- err
					continue
				}
				out[i] = placed{id: id, d: d}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// retried sends a write until it gets want, retrying transport errors and 5xx answers
// (what a client does) with one Idempotency-Key, for up to two minutes.
func retried(method, url, token, body, key string, want int) (answer, error) {
	return retriedSeeing(nil, method, url, token, body, key, want)
}

// retriedSeeing is retried, showing every answer to seen (when not nil).
func retriedSeeing(seen func(answer), method, url, token, body, key string, want int) (answer, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := send(method, url, token, body, "Idempotency-Key", key)
		if seen != nil {
			seen(r)
		}
		if r.err == nil && r.status == want {
			return r, nil
		}
		// 429 and idempotency_key_in_use ask for a retry, as a server error does.
		inUse := r.status == 409 && r.body["code"] == "idempotency_key_in_use"
		if (r.err == nil && r.status < 500 && r.status != 429 && !inUse) || time.Now().After(deadline) {
			return r, fmt.Errorf("%s %s: %d %s %v", method, url, r.status, r.raw, r.err)
		}
		// A client's pause before it retries; not wait.For: this returns the error to
		// callers, some of them writer goroutines, which cannot fail the test.
		time.Sleep(200 * time.Millisecond)
	}
}

// waitTerminal waits until every order is confirmed, failed or rejected, reading the
// store, and returns how many are.
func waitTerminal(ctx context.Context, s *store.Store, orders []placed, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		done := 0
		for _, o := range orders {
			got, _, err := s.Order(ctx, o.id)
			if err == nil && slices.Contains([]string{"confirmed", "failed", "rejected"}, string(got.Status)) {
				done++
			}
		}
		if done == len(orders) || time.Now().After(deadline) {
			return done
		}
		// Not wait.For: at the deadline this returns how many ended, for the caller to judge.
		time.Sleep(time.Second)
	}
}

// eventsOf reads an order's events from the API, every page.
func eventsOf(base, token, orderID string) ([]map[string]any, error) {
	var out []map[string]any
	after := ""
	for {
		url := base + "/api/v1/events?limit=100&orderId=" + orderID
		if after != "" {
			url += "&after=" + after
		}
		r := send("GET", url, token, "")
		if r.err != nil || r.status != 200 {
			return nil, fmt.Errorf("events of %s: %d %s %v", orderID, r.status, r.raw, r.err)
		}
		for _, e := range r.body["data"].([]any) {
			out = append(out, e.(map[string]any))
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// sequenceFaults counts the sequence numbers missing from 1..max and those seen twice.
func sequenceFaults(evs []map[string]any) (lost, repeated int) {
	seen := map[int]int{}
	top := 0
	for _, e := range evs {
		n := int(e["sequence"].(float64))
		seen[n]++
		top = max(top, n)
	}
	for i := 1; i <= top; i++ {
		switch c := seen[i]; {
		case c == 0:
			lost++
		case c > 1:
			repeated += c - 1
		}
	}
	return lost, repeated
}

// receiver is an integrator's webhook endpoint: it verifies every message and keeps the
// event ids it accepted.
type receiver struct {
	*httptest.Server
	secret   string
	mu       sync.Mutex
	accepted map[string]int
	bad      int
	// down makes it answer 503 to everything, as an endpoint that is down does.
	down bool
	// webhookID is the webhook that sends to it.
	webhookID string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{accepted: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if err := client.VerifyWebhook(r.secret, req.Header, body); err != nil {
			r.bad++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev struct{ ID string }
		_ = json.NewDecoder(bytes.NewReader(body)).Decode(&ev)
		r.accepted[ev.ID]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// setDown takes the receiver down or brings it back.
func (r *receiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// repeats counts the messages the receiver accepted more than once.
func (r *receiver) repeats() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.accepted {
		n += max(c-1, 0)
	}
	return n
}

// missing counts the ids the receiver has not accepted.
func (r *receiver) missing(ids []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r.accepted[id] == 0 {
			n++
		}
	}
	return n
}

// hookEveryApp gives every order app a webhook on its order and wallet events.
func hookEveryApp(t *testing.T, c *cluster.Cluster, down ...bool) map[string]*receiver {
	t.Helper()
	out := map[string]*receiver{}
	for _, d := range domains {
		rc := newReceiver(t)
		rc.down = len(down) > 0 && down[0]
		r := send("POST", c.APIURLs[0]+"/developer/webhooks", c.Credentials.Keys[d.app].SK,
			fmt.Sprintf(`{"url":%q,"events":["order.*","wallet.*"]}`, rc.URL+"/hooks"))
		if r.status != 201 {
			t.Fatalf("webhook of %s: %d %s %v", d.app, r.status, r.raw, r.err)
		}
		rc.secret = r.body["secret"].(string)
		rc.webhookID = r.body["id"].(string)
		out[d.app] = rc
	}
	return out
}

// account checks every order's events and broadcasts and every webhook message once the
// orders are terminal, fills in the row, and returns the ids of the orders' events by
// app: the messages each app's webhook is owed.
func account(t *testing.T, c *cluster.Cluster, orders []placed, hooks map[string]*receiver, r *row) map[string][]string {
	t.Helper()
	ctx := context.Background()
	r.orders = len(orders)
	r.terminal = waitTerminal(ctx, c.Store(), orders, 4*time.Minute)
	if r.terminal != len(orders) {
		t.Errorf("%d of %d orders terminal", r.terminal, len(orders))
	}
	wantHooks := map[string][]string{}
	signed, err := signedRequests(ctx, c, orders)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		evs, err := eventsOf(c.APIURLs[1], c.Credentials.Keys[o.d.app].Read, o.id)
		if err != nil {
			t.Fatal(err)
		}
		lost, repeated := sequenceFaults(evs)
		r.eventsLost += lost
		r.eventsRepeated += repeated
		for _, e := range evs {
			wantHooks[o.d.app] = append(wantHooks[o.d.app], e["id"].(string))
		}
	}
	// A leg is one transaction on the chain: every request signed for it (a replacement
	// too) spends the same nonce, and the transaction the order names is on the chain.
	nonces := map[string]map[uint64]bool{}
	for _, q := range signed {
		leg := fmt.Sprintf("%s/%d", q.OrderID, q.Position)
		if nonces[leg] == nil {
			nonces[leg] = map[uint64]bool{}
		}
		if q.Nonce != nil {
			nonces[leg][*q.Nonce] = true
		}
	}
	lo, hi := len(signed), 0
	for _, n := range nonces {
		lo, hi = min(lo, len(n)), max(hi, len(n))
	}
	r.transactionsPerLeg = fmt.Sprintf("%d", hi)
	if lo != hi {
		r.transactionsPerLeg = fmt.Sprintf("%d to %d", lo, hi)
	}
	if lo != 1 || hi != 1 {
		t.Errorf("transactions per leg %s over %d legs, want exactly 1", r.transactionsPerLeg, len(nonces))
	}
	if c.Chains() == nil {
		t.Fatal("the cluster runs no dev chains to read the legs' transactions from")
	}
	for _, o := range orders {
		placedOrder, legs, err := c.Store().Order(ctx, o.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range legs {
			if l.Status != "confirmed" || l.TxHash == nil {
				continue
			}
			if st, err := c.Chains().Router().Status(ctx, placedOrder.Chain, *l.TxHash); err != nil || st.State != chain.TxConfirmed {
				r.notOnChain++
				t.Errorf("order %s leg %d confirmed, but its transaction %s on %s is %+v (%v)", o.id, l.Position, *l.TxHash, placedOrder.Chain, st, err)
			}
		}
	}
	if r.eventsLost != 0 || r.eventsRepeated != 0 {
		t.Errorf("events: %d lost, %d repeated", r.eventsLost, r.eventsRepeated)
	}
	if hooks != nil {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			r.webhookLost = 0
			for app, rc := range hooks {
				r.webhookLost += rc.missing(wantHooks[app])
			}
			if r.webhookLost == 0 || time.Now().After(deadline) {
				break
			}
			// Not wait.For: what is still missing at the deadline is counted in the report.
			time.Sleep(500 * time.Millisecond)
		}
		if r.webhookLost != 0 {
			t.Errorf("%d webhook messages never delivered", r.webhookLost)
		}
	}
	return wantHooks
}

// signedRequests returns every signed request of the orders' legs.
func signedRequests(ctx context.Context, c *cluster.Cluster, orders []placed) ([]store.SigningRequest, error) {
	ours := map[string]bool{}
	for _, o := range orders {
		ours[o.id] = true
	}
	var out []store.SigningRequest
	after := ""
	for {
		page, err := c.Store().ListSigningRequests(ctx, store.SigningFilter{OrgID: c.Credentials.OrgID,
			Apps: []string{"pay", "trade", "earn", "borrow"}, Status: "signed", AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, q := range page {
			if ours[q.OrderID] {
				out = append(out, q)
			}
		}
		if len(page) < 500 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// steadyWriter places payments one after another through both APIs while a fault is
// on, retrying each write with its Idempotency-Key as a client would, and tallies every
// answer it got.
type steadyWriter struct {
	mu      sync.Mutex
	answers map[int]int // by status; 0 is a transport error
	codes   map[string]int
	// pending counts the submits accepted before their policy decided.
	pending int
	orders  []placed
	errs    []error
	stop    chan struct{}
	done    chan struct{}
}

func startWriter(c *cluster.Cluster, prefix string) *steadyWriter {
	w := &steadyWriter{answers: map[int]int{}, codes: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	pay := c.Credentials.Keys["pay"]
	wallet := c.Credentials.Wallets[0].ID
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			base := c.APIURLs[i%len(c.APIURLs)] + "/api/v1/payments"
			r, err := w.write("POST", base, pay.SK, fmt.Sprintf(domains[0].body, wallet), fmt.Sprintf("%s-%d", prefix, i), 201)
			if err != nil {
				w.fail(err)
				return
			}
			id := r.body["id"].(string)
			if _, err := w.write("POST", base+"/"+id+"/submit", pay.SK, "", prefix+"-submit-"+id, 202); err != nil {
				w.fail(err)
				return
			}
			w.mu.Lock()
			w.orders = append(w.orders, placed{id: id, d: domains[0]})
			w.mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the pace of the steady load: the time is the point
		}
	}()
	return w
}

// write is retried, tallying each answer.
func (w *steadyWriter) write(method, url, token, body, key string, want int) (answer, error) {
	return retriedSeeing(w.tallyAnswer, method, url, token, body, key, want)
}

func (w *steadyWriter) tallyAnswer(r answer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answers[r.status]++
	if r.body["policyDecision"] == "pending" {
		w.pending++
	}
	if code, _ := r.body["code"].(string); r.status >= 500 {
		w.codes[fmt.Sprintf("%d %s", r.status, code)]++
	}
}

func (w *steadyWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// finish stops the writer and returns the orders it placed.
func (w *steadyWriter) finish(t *testing.T) []placed {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		t.Error(err)
	}
	return w.orders
}

// tally describes the answers, e.g. "201: 40, 202: 40, 503: 6".
func (w *steadyWriter) tally() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []int
	for k := range w.answers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		name := fmt.Sprint(k)
		if k == 0 {
			name = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, w.answers[k]))
	}
	return strings.Join(parts, ", ")
}

// countOrders counts the app's orders in the store: a write answered twice, or lost,
// shows as a count that differs from the orders the writers placed.
func countPayments(t *testing.T, c *cluster.Cluster) int {
	t.Helper()
	n := 0
	after := ""
	for {
		url := c.APIURLs[0] + "/api/v1/payments?limit=100"
		if after != "" {
			url += "&cursor=" + after
		}
		r := send("GET", url, c.Credentials.Keys["pay"].Read, "")
		if r.status != 200 {
			t.Fatalf("list payments: %d %s %v", r.status, r.raw, r.err)
		}
		n += len(r.body["data"].([]any))
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			return n
		}
		after = next
	}
}
