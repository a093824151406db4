package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/events"
)

// order is one payment of the load. Every field after id is written under tracker.mu:
// the sending goroutine, the approver and the event follower all touch it.
type order struct {
	approval bool
	due      time.Time // when the schedule wanted it sent
	lag      time.Duration

	id                   string
	createLat, submitLat time.Duration
	submitSent           time.Time
	submitted            bool
	deciding             bool
	awaiting             bool // counted in tracker.awaiting
	decideSent           time.Time
	decideLat            time.Duration
	signReqAt            time.Time // occurredAt of its first Wallet.SigningRequested
	// occurredAt of Order.Submitted and Order.Approved: where in the submit call and after
	// the decision the time goes.
	submittedAt, approvedAt time.Time
	endAt                   time.Time // occurredAt of Order.Confirmed, Failed or Rejected
	endEvent                string
	err                     string
}

func (o *order) finished() bool { return o.err != "" || !o.endAt.IsZero() }

// tracker holds every order of the run by id, for the follower and the approver.
type tracker struct {
	mu     sync.Mutex
	orders map[string]*order
	// awaiting counts approval orders created and not yet decided: the approver polls
	// only while there are some, so that its lists add no load while nothing waits
	// (between steps, and between two approval orders at low rates).
	awaiting int
	// lag is, for each event of a known order, how long after its occurredAt the follower
	// had it: evidence that the follower kept up.
	lag []time.Duration
}

// release takes o out of awaiting, once, when it no longer waits for the approver.
// Called with mu held.
func (t *tracker) release(o *order) {
	if o.awaiting {
		o.awaiting = false
		t.awaiting--
	}
}

func (t *tracker) fail(o *order, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.err == "" {
		o.err = fmt.Sprintf(format, args...)
	}
	t.release(o)
}

// onEvent takes an event from the live channel.
func (t *tracker) onEvent(ev client.Event) error {
	t.record(ev, true)
	return nil
}

func (t *tracker) record(ev client.Event, live bool) {
	received := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.orders[ev.OrderID]
	if o == nil {
		return
	}
	if live {
		t.lag = append(t.lag, received.Sub(ev.OccurredAt.Time))
	}
	switch ev.Event {
	case events.OrderSubmitted:
		o.submittedAt = ev.OccurredAt.Time
	case events.OrderApproved:
		o.approvedAt = ev.OccurredAt.Time
	case events.WalletSigningRequested:
		if o.signReqAt.IsZero() {
			o.signReqAt = ev.OccurredAt.Time
		}
	case events.OrderConfirmed, events.OrderFailed, events.OrderRejected:
		if o.endAt.IsZero() {
			o.endAt, o.endEvent = ev.OccurredAt.Time, ev.Event
		}
		t.release(o)
	}
}

// followedEvents are all the follower needs: fewer frames for the hub to write and this
// process to read than order.* and wallet.*.
var followedEvents = []string{"order.submitted", "order.approved", "order.confirmed", "order.failed", "order.rejected", "wallet.signingrequested"}

// runner drives one bundle: the payments, the approver, the event follower.
type runner struct {
	api     string
	keys    seed.AppKeys
	wallets []string
	http    *http.Client
	t       *tracker
	poll    time.Duration
	// reconnects counts the follower's lost connections (each followed by a catch-up).
	reconnects int
}

func newRunner(creds *seed.Credentials, poll time.Duration) (*runner, error) {
	r := &runner{
		api:  creds.BaseURL + "/api/v1",
		keys: creds.Keys["pay"],
		// Every order has a goroutine and, while it waits, a connection of its own: keep
		// them all for reuse instead of dialling anew at every step.
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096}},
		t:    &tracker{orders: map[string]*order{}},
		poll: poll,
	}
	for _, w := range creds.Wallets {
		if w.AutoSign && w.Chain == "ethereum" {
			r.wallets = append(r.wallets, w.ID)
		}
	}
	if len(r.wallets) == 0 {
		return nil, fmt.Errorf("no ethereum autoSign wallet in the credentials")
	}
	return r, nil
}

func (r *runner) do(ctx context.Context, method, path, token, body, correlation string, out any) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.api+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if correlation != "" {
		req.Header.Set("X-Correlation-Id", correlation)
	}
	res, err := r.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return res.StatusCode, err
		}
	}
	return res.StatusCode, nil
}

// send creates one payment and submits it. It runs in a goroutine of its own, so that a
// slow answer never holds back the next order of the schedule.
func (r *runner) send(ctx context.Context, o *order, seq int, label string) {
	amount, dest := "500", "0x"+strings.Repeat("1", 40)
	if o.approval {
		// 20,000 USD reaches the seeded tier of one approval (10,000 USD and up).
		amount, dest = "20000", "0x"+strings.Repeat("2", 40)
	}
	body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q}}`, r.wallets[seq%len(r.wallets)], amount, dest)
	correlation := fmt.Sprintf("openloop-%s-%d", label, seq)
	var created struct {
		ID string `json:"id"`
	}
	start := time.Now()
	status, err := r.do(ctx, "POST", "/payments", r.keys.SK, body, correlation, &created)
	createLat := time.Since(start)
	if err != nil || status != http.StatusCreated || created.ID == "" {
		r.t.fail(o, "create: %d %v", status, err)
		return
	}
	r.t.mu.Lock()
	o.id, o.createLat = created.ID, createLat
	r.t.orders[created.ID] = o
	if o.approval {
		o.awaiting = true
		r.t.awaiting++
	}
	o.submitSent = time.Now()
	sent := o.submitSent
	r.t.mu.Unlock()

	status, err = r.do(ctx, "POST", "/payments/"+created.ID+"/submit", r.keys.SK, "{}", correlation, nil)
	lat := time.Since(sent)
	if err != nil || status != http.StatusAccepted {
		r.t.fail(o, "submit: %d %v", status, err)
		return
	}
	r.t.mu.Lock()
	o.submitLat, o.submitted = lat, true
	r.t.mu.Unlock()
}

// approver plays the pay app's approver: it lists the pending items while approval orders
// wait for one, and decides each as soon as it sees it. No event announces a new approval
// item (the order's next event is Order.Approved), so a poll it is.
func (r *runner) approver(ctx context.Context) {
	tick := time.NewTicker(r.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.t.mu.Lock()
		waiting := r.t.awaiting
		r.t.mu.Unlock()
		if waiting <= 0 {
			continue
		}
		var page struct {
			Data []struct {
				ID      string `json:"id"`
				OrderID string `json:"orderId"`
			} `json:"data"`
		}
		status, err := r.do(ctx, "GET", "/approvals?status=pending&domain=payment&limit=200", r.keys.Approve, "", "", &page)
		if err != nil || status != http.StatusOK {
			continue // the orders waiting show it, as unfinished
		}
		for _, it := range page.Data {
			r.t.mu.Lock()
			o := r.t.orders[it.OrderID]
			mine := o != nil && o.approval && !o.deciding && o.err == ""
			if mine {
				o.deciding = true
				r.t.release(o)
			}
			r.t.mu.Unlock()
			if mine {
				go r.decide(ctx, o, it.ID)
			}
		}
	}
}

func (r *runner) decide(ctx context.Context, o *order, item string) {
	sent := time.Now()
	r.t.mu.Lock()
	o.decideSent = sent
	r.t.mu.Unlock()
	status, err := r.do(ctx, "POST", "/approvals/payment/"+item+"/decide", r.keys.Approve, `{"decision":"APPROVE"}`, "", nil)
	lat := time.Since(sent)
	if err != nil || status != http.StatusAccepted {
		r.t.fail(o, "decide: %d %v", status, err)
		return
	}
	r.t.mu.Lock()
	o.decideLat = lat
	r.t.mu.Unlock()
}

// follow opens the live channel of a config of the pay app and hands its events to the
// tracker; it returns once the connection is counted by the server, so that no order of
// the run is sent before it listens. The WebSocket rather than polling GET /events: the
// server pushes each event once as it commits, where polling would add requests to the
// load being measured, and FollowEvents catches up after a lost connection.
func (r *runner) follow(ctx context.Context, baseURL string) error {
	dev, err := client.New(baseURL, client.WithToken(r.keys.SK), client.WithHTTPClient(r.http))
	if err != nil {
		return err
	}
	cfg, err := dev.CreateWebSocketConfig(ctx, followedEvents)
	if err != nil {
		return fmt.Errorf("websocket config: %w", err)
	}
	reader, err := client.New(baseURL, client.WithToken(r.keys.Read), client.WithHTTPClient(r.http))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		done <- reader.FollowEvents(ctx, cfg.ID, r.t.onEvent, &client.FollowOptions{
			Token: r.keys.PK,
			Options: client.Options{OnRetry: func(err error, _ time.Duration) {
				r.t.mu.Lock()
				r.reconnects++
				r.t.mu.Unlock()
			}},
		})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("event follower ended: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		c, err := dev.GetWebSocketConfig(ctx, cfg.ID)
		if err == nil && c.LiveConnections > 0 {
			return nil
		}
	}
	return fmt.Errorf("the event follower did not connect within 10 s")
}

// sweep asks GET /events for the orders the follower has not seen end, so that a lost
// event is told apart from an order that did not end (and counted as the follower's).
func (r *runner) sweep(ctx context.Context, orders []*order) (missed int) {
	reader, err := client.New(strings.TrimSuffix(r.api, "/api/v1"), client.WithToken(r.keys.Read), client.WithHTTPClient(r.http))
	if err != nil {
		return 0
	}
	for _, o := range orders {
		r.t.mu.Lock()
		id, open := o.id, !o.finished()
		r.t.mu.Unlock()
		if !open {
			continue
		}
		for ev, err := range reader.Events(ctx, client.EventFilter{OrderID: id, Limit: 200}) {
			if err != nil {
				break
			}
			r.t.mu.Lock()
			ended := o.endAt.IsZero() && (ev.Event == events.OrderConfirmed || ev.Event == events.OrderFailed || ev.Event == events.OrderRejected)
			r.t.mu.Unlock()
			if ended {
				missed++
			}
			r.t.record(ev, false)
		}
	}
	return missed
}
