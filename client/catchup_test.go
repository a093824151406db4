package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/wshub/closecode"
)

// storedEvent is an event as the outbox keeps it, with an id made at its time.
type storedEvent struct {
	id, name string
	domain   Domain
	at       time.Time
}

func newStoredEvent(n int, name string, domain Domain, at time.Time) storedEvent {
	return storedEvent{id: fmt.Sprintf("evt_%012x7%019d", at.UnixMilli(), n), name: name, domain: domain, at: at}
}

func (e storedEvent) data() string {
	return fmt.Sprintf(`{"id":%q,"event":%q,"domain":%q,"orderId":"ord_1","orderStatus":"submitted","sequence":1,`+
		`"correlationId":"corr","occurredAt":%q}`, e.id, e.name, e.domain, events.FormatTime(e.at))
}

func (e storedEvent) frame() string {
	return fmt.Sprintf(`{"type":"event","event":%q,"at":%q,"data":%s}`, e.name, events.FormatTime(e.at), e.data())
}

func sendFrames(evs ...storedEvent) func(f *fakeServer, ws *websocket.Conn) {
	return func(f *fakeServer, ws *websocket.Conn) {
		for _, e := range evs {
			_ = ws.WriteMessage(websocket.TextMessage, []byte(e.frame()))
		}
	}
}

// eventStore answers GET /api/v1/events from its pages, each keyed by the cursor= that
// asks for it, and records the cursor= of each request.
type eventStore struct {
	t      *testing.T
	pages  map[string][]storedEvent
	next   map[string]string
	failed int // how many requests to refuse with 503 first

	mu     sync.Mutex
	afters []string
	auth   []string
}

func (s *eventStore) serve(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("cursor")
	s.mu.Lock()
	s.afters = append(s.afters, after)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	refuse := s.failed > 0
	s.failed--
	s.mu.Unlock()
	if refuse {
		problem(503, CodeUnavailable)(w, r)
		return
	}
	page, ok := s.pages[after]
	if !ok {
		s.t.Errorf("GET /events?cursor=%s is not in the script", after)
	}
	var data []json.RawMessage
	for _, e := range page {
		data = append(data, json.RawMessage(e.data()))
	}
	next := any(nil)
	if n := s.next[after]; n != "" {
		next = n
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "nextCursor": next})
}

// newChannelServer serves the live channel from the steps, and /events from the store.
func newChannelServer(t *testing.T, store *eventStore, extra http.HandlerFunc, steps ...step) *fakeServer {
	f := &fakeServer{t: t, steps: steps}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/ws", f.serve)
	mux.HandleFunc("/api/v1/events", store.serve)
	if extra != nil {
		mux.HandleFunc("/", extra)
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func followEvents(t *testing.T, c *Client, o *FollowOptions, stopAt string) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	err := c.FollowEvents(ctx, "wsc_1", func(ev Event) error {
		if ev.ID == "" || ev.OccurredAt.IsZero() || !strings.Contains(string(ev.Data), ev.ID) {
			t.Errorf("event %+v", ev)
		}
		got = append(got, ev.Event+"/"+ev.ID[len(ev.ID)-1:])
		if ev.ID == stopAt {
			return ErrStop
		}
		return nil
	}, o)
	if ctx.Err() != nil {
		t.Fatal("FollowEvents did not end within 20 s")
	}
	return got, err
}

var base = time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)

var (
	evA = newStoredEvent(1, "Order.Created", DomainPayment, base)
	evB = newStoredEvent(2, "Order.Submitted", DomainPayment, base.Add(time.Second))
	evC = newStoredEvent(3, "Order.Approved", DomainPayment, base.Add(2*time.Second))
	// Another app's event and an event the config does not subscribe to, which a treasury
	// key reading /events would see.
	evD = newStoredEvent(4, "Order.Created", DomainTrade, base.Add(3*time.Second))
	evE = newStoredEvent(5, "Wallet.SigningRequested", DomainPayment, base.Add(4*time.Second))
	evF = newStoredEvent(6, "Order.Broadcast", DomainPayment, base.Add(5*time.Second))
)

// After a reconnection, what the config missed is read from /events, from the lookback
// before the newest event seen, page by page; each event is delivered once, in order.
func TestFollowEventsCatchesUpAfterAReconnection(t *testing.T) {
	from := eventIDAt(evB.at.Add(-defaultLookback))
	store := &eventStore{t: t,
		pages: map[string][]storedEvent{from: {evA, evB, evC}, evC.id: {evD, evE}},
		next:  map[string]string{from: evC.id}}
	f := newChannelServer(t, store, nil,
		step{run: func(f *fakeServer, ws *websocket.Conn) {
			sendFrames(evA, evB)(f, ws)
			closeWith(closecode.GoingAway, "server restarting")(f, ws)
		}},
		step{run: func(f *fakeServer, ws *websocket.Conn) {
			sendFrames(evC, evF)(f, ws)
			readAll(f, ws)
		}},
	)
	c, err := New(f.srv.URL, WithToken(restKey))
	if err != nil {
		t.Fatal(err)
	}
	got, err := followEvents(t, c, &FollowOptions{Options: fast}, evF.id)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[Order.Created/1 Order.Submitted/2 Order.Approved/3 Order.Broadcast/6]"; fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
	if fmt.Sprint(store.afters) != fmt.Sprint([]string{from, evC.id}) || store.auth[0] != "Bearer "+restKey {
		t.Fatalf("GET /events after=%v with %v", store.afters, store.auth)
	}
	queries, _, _ := f.snapshot()
	if len(queries) != 2 || !strings.Contains(queries[1], "token="+restKey) {
		t.Fatalf("connections %v", queries)
	}
}

// A caller resuming from an event id it kept catches up from there at once, and never
// gets back anything up to it.
func TestFollowEventsResumesAfterAKeptEvent(t *testing.T) {
	store := &eventStore{t: t, pages: map[string][]storedEvent{evB.id: {evC}}}
	f := newChannelServer(t, store, nil,
		step{run: func(f *fakeServer, ws *websocket.Conn) {
			sendFrames(evF)(f, ws)
			readAll(f, ws)
		}},
	)
	c, err := New(f.srv.URL, WithToken(restKey))
	if err != nil {
		t.Fatal(err)
	}
	got, err := followEvents(t, c, &FollowOptions{Options: fast, After: evB.id, Token: secret}, evF.id)
	if err != nil || fmt.Sprint(got) != "[Order.Approved/3 Order.Broadcast/6]" {
		t.Fatalf("%v: delivered %v", err, got)
	}
	if queries, _, _ := f.snapshot(); !strings.Contains(queries[0], "token="+secret) {
		t.Fatalf("connected with %v, not the given token", queries)
	}

	// The lookback never reaches back past After.
	e := &eventFollower{after: evB.id, newest: evC.at, lookback: time.Minute}
	if e.cursor() != evB.id {
		t.Fatalf("cursor %s, want %s", e.cursor(), evB.id)
	}
}

// A catch-up that fails for a while is a lost connection: reconnect, and catch up again
// from the same place. With client credentials, each connection asks for the token.
func TestFollowEventsReconnectsWhenACatchUpFails(t *testing.T) {
	from := eventIDAt(evA.at.Add(-defaultLookback))
	store := &eventStore{t: t, failed: 1, pages: map[string][]storedEvent{from: {evA, evC}}}
	ts := &tokenServer{t: t}
	f := newChannelServer(t, store, ts.serve,
		step{run: func(f *fakeServer, ws *websocket.Conn) {
			sendFrames(evA)(f, ws)
			closeWith(closecode.TooSlow, "too slow")(f, ws)
		}},
		step{run: readAll},
		step{run: func(f *fakeServer, ws *websocket.Conn) {
			sendFrames(evF)(f, ws)
			readAll(f, ws)
		}},
	)
	c, err := New(f.srv.URL, WithClientCredentials(oauthID, oauthSecret, "pay:read pay:write"),
		WithRetryPolicy(RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	var retries []string
	o := &FollowOptions{Options: fast}
	o.OnRetry = func(err error, _ time.Duration) { retries = append(retries, err.Error()) }
	got, err := followEvents(t, c, o, evF.id)
	if err != nil || fmt.Sprint(got) != "[Order.Created/1 Order.Approved/3 Order.Broadcast/6]" {
		t.Fatalf("%v: delivered %v", err, got)
	}
	if len(retries) != 2 || !strings.Contains(retries[1], "catch up from GET /events") || !strings.Contains(retries[1], "503") {
		t.Fatalf("retries %q", retries)
	}
	if fmt.Sprint(store.afters) != fmt.Sprint([]string{from, from}) || store.auth[1] != "Bearer "+accessToken1 {
		t.Fatalf("GET /events after=%v with %v", store.afters, store.auth)
	}
	queries, _, _ := f.snapshot()
	for _, q := range queries {
		if !strings.Contains(q, "token="+url.QueryEscape(accessToken1)) {
			t.Fatalf("connected with %v", queries)
		}
	}
}

// The catch-up cursor relies on event ids sorting by the time they were made.
func TestEventIDAtSortsWithTheServiceIDs(t *testing.T) {
	before := time.Now()
	id := ids.New(ids.Event)
	after := time.Now().Add(time.Millisecond)
	if !(eventIDAt(before) <= id && id < eventIDAt(after)) {
		t.Fatalf("%s is not between %s and %s", id, eventIDAt(before), eventIDAt(after))
	}
}
