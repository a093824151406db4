package wshub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/logtest"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/console"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// replica is one API process: a router with its own bus and hub, over a store.
type replica struct {
	srv   *httptest.Server
	live  *assemble.Live
	store *store.Store
	logs  *logtest.Buffer
}

func startReplica(t testing.TB, s *store.Store, opts assemble.LiveOptions, cfg api.Config) *replica {
	t.Helper()
	logs := &logtest.Buffer{}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.NoSendRing = opts.NoSendRing || os.Getenv(plainSendsEnv) != ""
	live := assemble.StartLive(s, opts, log)
	cfg.Store, cfg.Log, cfg.Live = s, log, live.Hub
	cfg.Service = &service.Service{Store: s, Log: log, Bus: live.Bus, Live: live.Hub}
	if cfg.RateLimit == 0 {
		cfg.RateLimit, cfg.RateBurst = 1e6, 1e6
	}
	// The console beside the API, as the process serves it by default.
	if cfg.Authn == nil {
		cfg.Authn = auth.NewAuthenticator(s)
	}
	cfg.Sessions = api.NewSessions(cfg)
	pages, err := console.New(console.Config{Service: cfg.Service, Sessions: cfg.Sessions, Authn: cfg.Authn, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pages = pages
	r := &replica{srv: httptest.NewServer(api.NewRouter(cfg)), live: live, store: s, logs: logs}
	t.Cleanup(r.stop)
	return r
}

var stopOnce sync.Map

func (r *replica) stop() {
	if _, done := stopOnce.LoadOrStore(r, true); done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.live.Shutdown(ctx)
	r.srv.Close()
}

func seedStore(t testing.TB, s *store.Store) *seed.Credentials {
	t.Helper()
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// call makes an API request and decodes the JSON answer.
func (r *replica) call(t testing.TB, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	return doJSON(t, req)
}

// doJSON sends a JSON request and decodes the JSON answer.
func doJSON(t testing.TB, req *http.Request) (int, map[string]any) {
	t.Helper()
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func (r *replica) createConfig(t testing.TB, token string, entries ...string) string {
	t.Helper()
	status, out := r.call(t, "POST", "/developer/websockets", token, map[string]any{"events": entries})
	if status != 201 {
		t.Fatalf("create config: %d %v", status, out)
	}
	return out["id"].(string)
}

func (r *replica) createPayment(t *testing.T, creds *seed.Credentials, token string) string {
	t.Helper()
	status, out := r.call(t, "POST", "/api/v1/payments", token, map[string]any{"walletId": creds.Wallets[0].ID, "asset": "USDC",
		"amount": "1.50", "destination": map[string]any{"address": "0x1111111111111111111111111111111111111111"}})
	if status != 201 {
		t.Fatalf("create payment: %d %v", status, out)
	}
	return out["id"].(string)
}

// sendTestEvent sends websocket.test to a config's connections.
func (r *replica) sendTestEvent(t testing.TB, configID, token string) {
	t.Helper()
	if status, out := r.call(t, "POST", "/developer/websockets/"+configID+"/test", token, nil); status != 202 {
		t.Fatalf("test event: %d %v", status, out)
	}
}

func (r *replica) wsURL(configID, token string) string {
	q := url.Values{}
	if configID != "" {
		q.Set("id", configID)
	}
	if token != "" {
		q.Set("token", token)
	}
	return "ws" + strings.TrimPrefix(r.srv.URL, "http") + "/api/v1/ws?" + q.Encode()
}

// client is a test WebSocket client that reads every frame into a channel.
type client struct {
	ws     *websocket.Conn
	frames chan map[string]any
	// closeCode is set once the connection ends: the server's close code, or -1.
	closed      chan struct{}
	closeCode   int
	closeReason string
}

func (r *replica) connect(t *testing.T, configID, token string) *client {
	t.Helper()
	return r.connectWith(t, configID, token, nil)
}

// connectWith lets the test set up the connection (handlers) before reading starts.
func (r *replica) connectWith(t *testing.T, configID, token string, setup func(ws *websocket.Conn)) *client {
	t.Helper()
	ws, res, err := websocket.DefaultDialer.Dial(r.wsURL(configID, token), nil)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial: %v (HTTP %d)", err, status)
	}
	if res.Header.Get("X-Correlation-Id") == "" {
		t.Error("the upgrade response carries no X-Correlation-Id")
	}
	c := &client{ws: ws, frames: make(chan map[string]any, 10000), closed: make(chan struct{}), closeCode: -1}
	if setup != nil {
		setup(ws)
	}
	go c.read()
	t.Cleanup(func() { _ = ws.Close() })
	ready := c.next(t)
	if ready["type"] != "connection.ready" || ready["configId"] != configID {
		t.Fatalf("first frame %v, want connection.ready for %s", ready, configID)
	}
	return c
}

func (c *client) read() {
	defer close(c.closed)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.closeCode, c.closeReason = ce.Code, ce.Text
			}
			return
		}
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			c.frames <- m
		}
	}
}

func (c *client) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-c.frames:
		return m
	case <-c.closed:
		// The reader queues every frame before it sees the close, but select picks at
		// random among ready cases: a frame that came before the close is still the next.
		select {
		case m := <-c.frames:
			return m
		default:
		}
		t.Fatalf("connection closed (code %d) while a frame was expected", c.closeCode)
	case <-time.After(5 * time.Second):
		t.Fatal("no frame within 5 s")
	}
	return nil
}

// quiet asserts that no frame arrives for a while.
func (c *client) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-c.frames:
		t.Fatalf("unexpected frame %v", m)
	case <-time.After(d):
	}
}

func (c *client) waitClosed(t *testing.T, want int) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(15 * time.Second):
		t.Fatalf("not closed within 15 s (want %d)", want)
	}
	if c.closeCode != want {
		t.Fatalf("close code %d, want %d", c.closeCode, want)
	}
}

func TestChannelDeliversMatchingEventsWithinAppAndOrg(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	pay, trade := creds.Keys["pay"], creds.Keys["trade"]

	orders := r.createConfig(t, pay.SK, "Order.*")
	submittedOnly := r.createConfig(t, pay.SK, "order.submitted")
	tradeAll := r.createConfig(t, trade.SK, "*")
	otherOrgSK := creds.OtherOrg.Keys["pay"]["sk"]
	otherOrg := r.createConfig(t, otherOrgSK, "*")

	byPK := r.connect(t, orders, pay.PK)
	bySK := r.connect(t, orders, pay.SK)
	narrow := r.connect(t, submittedOnly, pay.PK)
	tradeClient := r.connect(t, tradeAll, trade.PK)
	otherClient := r.connect(t, otherOrg, otherOrgSK)

	orderID := r.createPayment(t, creds, pay.SK)
	for _, c := range []*client{byPK, bySK} {
		f := c.next(t)
		data, _ := f["data"].(map[string]any)
		if f["type"] != "event" || f["event"] != "Order.Created" || data["orderId"] != orderID || f["at"] != data["occurredAt"] {
			t.Fatalf("frame %v", f)
		}
		if data["sequence"] != float64(1) || data["domain"] != "payment" || data["correlationId"] == "" {
			t.Fatalf("event data %v", data)
		}
	}
	// Not subscribed to Order.Created, another app, another organisation: nothing.
	narrow.quiet(t, 300*time.Millisecond)
	tradeClient.quiet(t, 0)
	otherClient.quiet(t, 0)

	// The client-level ping gets a pong.
	if err := byPK.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	if f := byPK.next(t); f["type"] != "pong" {
		t.Fatalf("answer to ping: %v", f)
	}

	// A client frame over the 4 KiB read limit ends that connection (1009), no other.
	big := r.connect(t, orders, pay.PK)
	if err := big.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping","pad":"`+strings.Repeat("x", 5000)+`"}`)); err != nil {
		t.Fatal(err)
	}
	big.waitClosed(t, websocket.CloseMessageTooBig)
	// So does a malformed one (1002): here a frame without the mask every client frame has.
	malformed := r.connect(t, orders, pay.PK)
	if _, err := malformed.ws.NetConn().Write([]byte{0x81, 0x02, 'h', 'i'}); err != nil {
		t.Fatal(err)
	}
	malformed.waitClosed(t, websocket.CloseProtocolError)

	// The page data: live connections and the delivery log (written in the background).
	var page map[string]any
	// The closed connection's end and the log's write both land in the background.
	wait.For(t, 5*time.Second, "the config page to show 2 live connections and 1 delivery", func() bool {
		_, page = r.call(t, "GET", "/developer/websockets/"+orders, pay.SK, nil)
		log, _ := page["deliveryLog"].([]any)
		return len(log) == 1 && page["liveConnections"] == float64(2)
	})
	log, _ := page["deliveryLog"].([]any)
	if page["liveConnections"] != float64(2) || len(log) != 1 {
		t.Fatalf("config page %v", page)
	}
	row := log[0].(map[string]any)
	if row["event"] != "Order.Created" || !strings.HasPrefix(row["eventId"].(string), "evt_") || row["at"] == "" || len(row) != 3 {
		t.Fatalf("delivery log row %v", row)
	}
	// No connection of submittedOnly received anything: no row.
	_, narrowPage := r.call(t, "GET", "/developer/websockets/"+submittedOnly, pay.SK, nil)
	if l, _ := narrowPage["deliveryLog"].([]any); len(l) != 0 {
		t.Fatalf("delivery log of a config that received nothing: %v", l)
	}
	// The token in the URL never reaches the log.
	if strings.Contains(r.logs.String(), pay.PK) {
		t.Fatal("a token appears in the logs")
	}
}

func TestChannelTestEventReachesEveryConnectionOfItsConfig(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	pay := creds.Keys["pay"]
	narrow := r.createConfig(t, pay.SK, "order.confirmed")
	other := r.createConfig(t, pay.SK, "order.confirmed")
	a, b := r.connect(t, narrow, pay.PK), r.connect(t, narrow, pay.SK)
	bystander := r.connect(t, other, pay.PK)

	status, out := r.call(t, "POST", "/developer/websockets/"+narrow+"/test", pay.SK, nil)
	if status != 202 {
		t.Fatalf("test: %d %v", status, out)
	}
	for _, c := range []*client{a, b} {
		f := c.next(t)
		data, _ := f["data"].(map[string]any)
		if f["event"] != "websocket.test" || data["id"] != out["eventId"] || data["configId"] != narrow {
			t.Fatalf("test frame %v", f)
		}
	}
	bystander.quiet(t, 300*time.Millisecond)
}

// A write that had to wait for the socket (connection.ready always does) runs under the
// write timeout; the frames written straight into the socket afterwards must not inherit
// that deadline once it has passed.
func TestChannelKeepsWritingLongAfterTheWriteTimeout(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{WriteTimeout: 100 * time.Millisecond}, api.Config{})
	pay := creds.Keys["pay"]
	cfg := r.createConfig(t, pay.SK, "order.confirmed")
	c := r.connect(t, cfg, pay.PK)
	for i := range 3 {
		time.Sleep(300 * time.Millisecond) // the time is the point: past the 100 ms write timeout
		r.sendTestEvent(t, cfg, pay.SK)
		if f := c.next(t); f["event"] != "websocket.test" {
			t.Fatalf("frame %d: %v", i, f)
		}
	}
}

func TestChannelRefusesBeforeTheUpgrade(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	pay, trade := creds.Keys["pay"], creds.Keys["trade"]
	cfg := r.createConfig(t, pay.SK, "*")
	revoked := createKey(t, r, pay.SK, "pk")
	if status, _ := r.call(t, "DELETE", "/developer/api-keys/"+revoked.id, pay.SK, nil); status != 200 {
		t.Fatal("revoke failed")
	}
	tradeClient := creds.OAuthClients["trade"]
	tradeToken := r.accessToken(t, tradeClient.ClientID, tradeClient.ClientSecret)
	cases := []struct {
		name, config, token string
		want                int
	}{
		{"OAuth token of another app", cfg, tradeToken, 403},
		{"no token", cfg, "", 401},
		{"malformed token", cfg, "nonsense", 401},
		{"unknown key", cfg, "pk_" + strings.Repeat("a", 40), 401},
		{"revoked key", cfg, revoked.secret, 401},
		{"tk key of another app", cfg, trade.Read, 403},
		{"pk of another app", cfg, trade.PK, 403},
		{"sk of another organisation", cfg, creds.OtherOrg.Keys["pay"]["sk"], 403},
		// Listening needs read: a tk_ that only approves or signs hears nothing.
		{"tk key that only approves", cfg, pay.Approve, 403},
		{"tk key that only signs", cfg, pay.Sign, 403},
		{"unknown config", "wsc_" + strings.Repeat("0", 32), pay.PK, 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, res, err := websocket.DefaultDialer.Dial(r.wsURL(tc.config, tc.token), nil)
			if err == nil {
				t.Fatal("the upgrade succeeded")
			}
			if res == nil || res.StatusCode != tc.want {
				t.Fatalf("got %v, want HTTP %d", res, tc.want)
			}
			if res.Header.Get("X-Correlation-Id") == "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
				t.Fatalf("refusal headers %v", res.Header)
			}
		})
	}
	// A deleted config is unknown.
	r.call(t, "DELETE", "/developer/websockets/"+cfg, pay.SK, nil)
	if _, res, _ := websocket.DefaultDialer.Dial(r.wsURL(cfg, pay.PK), nil); res == nil || res.StatusCode != 404 {
		t.Fatalf("deleted config: %v", res)
	}
}

// accessToken gets an OAuth access token for a client.
func (r *replica) accessToken(t testing.TB, clientID, secret string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
	res, err := http.PostForm(r.srv.URL+"/api/v1/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	token, _ := out["access_token"].(string)
	if res.StatusCode != 200 || token == "" {
		t.Fatalf("token: %d %v", res.StatusCode, out)
	}
	return token
}

type issuedKey struct{ id, secret string }

func createKey(t *testing.T, r *replica, sk, kind string) issuedKey {
	t.Helper()
	status, out := r.call(t, "POST", "/developer/api-keys", sk, map[string]any{"kind": kind})
	if status != 201 {
		t.Fatalf("create key: %d %v", status, out)
	}
	return issuedKey{id: out["id"].(string), secret: out["secret"].(string)}
}

func TestChannelCloseCodes(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{OAuthTokenTTL: 2 * time.Second})
	pay := creds.Keys["pay"]

	t.Run("disabled 4001", func(t *testing.T) {
		cfg := r.createConfig(t, pay.SK, "*")
		c := r.connect(t, cfg, pay.PK)
		if status, out := r.call(t, "PATCH", "/developer/websockets/"+cfg, pay.SK, map[string]any{"enabled": false}); status != 200 || out["enabled"] != false {
			t.Fatalf("disable: %d %v", status, out)
		}
		c.waitClosed(t, 4001)
		// A connection to a disabled config is told the same way.
		again := r.connect(t, cfg, pay.PK)
		again.waitClosed(t, 4001)
	})
	t.Run("deleted 4004", func(t *testing.T) {
		cfg := r.createConfig(t, pay.SK, "*")
		c := r.connect(t, cfg, pay.PK)
		if status, _ := r.call(t, "DELETE", "/developer/websockets/"+cfg, pay.SK, nil); status != 200 {
			t.Fatal("delete failed")
		}
		c.waitClosed(t, 4004)
	})
	t.Run("key revoked 4003", func(t *testing.T) {
		cfg := r.createConfig(t, pay.SK, "*")
		k := createKey(t, r, pay.SK, "pk")
		c := r.connect(t, cfg, k.secret)
		bystander := r.connect(t, cfg, pay.PK)
		r.call(t, "DELETE", "/developer/api-keys/"+k.id, pay.SK, nil)
		c.waitClosed(t, 4003)
		bystander.quiet(t, 200*time.Millisecond)
	})
	t.Run("OAuth client revoked 4003", func(t *testing.T) {
		status, out := r.call(t, "POST", "/developer/oauth-clients", pay.SK, map[string]any{"scopes": "pay:read"})
		if status != 201 {
			t.Fatalf("oauth client: %d %v", status, out)
		}
		id, secret := out["clientId"].(string), out["clientSecret"].(string)
		cfg := r.createConfig(t, pay.SK, "*")
		c := r.connect(t, cfg, r.accessToken(t, id, secret))
		r.call(t, "DELETE", "/developer/oauth-clients/"+id, pay.SK, nil)
		c.waitClosed(t, 4003)
		if c.closeReason != "credential revoked" {
			t.Fatalf("closed for %q, not by the revocation", c.closeReason)
		}
	})
	t.Run("an OAuth token that expires keeps its connection", func(t *testing.T) {
		status, out := r.call(t, "POST", "/developer/oauth-clients", pay.SK, map[string]any{"scopes": "pay:read"})
		if status != 201 {
			t.Fatalf("oauth client: %d %v", status, out)
		}
		cfg := r.createConfig(t, pay.SK, "*")
		c := r.connect(t, cfg, r.accessToken(t, out["clientId"].(string), out["clientSecret"].(string)))
		// The token lives 2 s; it is checked at the upgrade only.
		time.Sleep(3 * time.Second)
		r.sendTestEvent(t, cfg, pay.SK)
		if f := c.next(t); f["event"] != events.WebSocketTest {
			t.Fatalf("after the token expired: %v", f)
		}
	})
	t.Run("shutdown 1001", func(t *testing.T) {
		cfg := r.createConfig(t, pay.SK, "*")
		c := r.connect(t, cfg, pay.PK)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.live.Shutdown(ctx)
		c.waitClosed(t, 1001)
	})
}

func TestChannelKeepalive(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	// A pong wait well above the ping interval: a loaded CI machine may be slow to answer,
	// and only the client that never answers must be dropped.
	r := startReplica(t, s, assemble.LiveOptions{PingInterval: 100 * time.Millisecond, PongWait: time.Second}, api.Config{})
	pay := creds.Keys["pay"]
	cfg := r.createConfig(t, pay.SK, "*")

	pings := make(chan struct{}, 100)
	alive := r.connectWith(t, cfg, pay.PK, func(ws *websocket.Conn) {
		ws.SetPingHandler(func(data string) error {
			pings <- struct{}{}
			return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		})
	})
	silent := r.connectWith(t, cfg, pay.PK, func(ws *websocket.Conn) {
		ws.SetPingHandler(func(string) error { return nil })
	})
	// A client that cannot answer protocol pings (a browser's WebSocket API has no access
	// to them) sends the seed's text ping instead; that counts as answering.
	textPinger := r.connectWith(t, cfg, pay.PK, func(ws *websocket.Conn) {
		ws.SetPingHandler(func(string) error { return nil })
	})
	stopPinging := make(chan struct{})
	pingerDone := make(chan struct{})
	go func() {
		defer close(pingerDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopPinging:
				return
			case <-tick.C:
			}
			if textPinger.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)) != nil {
				return
			}
		}
	}()
	defer func() { close(stopPinging); <-pingerDone }()
	// Dropped once the pong is overdue: no close frame (gorilla reports 1006).
	silent.waitClosed(t, websocket.CloseAbnormalClosure)
	// Well past the 1.1 s a silent client lasts, the text pinger is still served: pong
	// after pong, then an event.
	deadline := time.Now().Add(3 * time.Second)
	pongs := 0
	for time.Now().Before(deadline) {
		if f := textPinger.next(t); f["type"] == "pong" {
			pongs++
		}
	}
	if pongs < 3 {
		t.Fatalf("%d pongs to the text pinger in 3 s", pongs)
	}
	r.createPayment(t, creds, pay.SK)
	for f := textPinger.next(t); f["type"] != "event"; f = textPinger.next(t) {
	}
	select {
	case <-alive.closed:
		t.Fatalf("the client answering pings was closed (%d)", alive.closeCode)
	case <-time.After(500 * time.Millisecond):
	}
	// By now a second and a half has passed at a 100 ms interval.
	if len(pings) < 5 {
		t.Fatalf("%d pings in 1.5 s at a 100 ms interval", len(pings))
	}
}

func TestChannelSpreadsKeepalivePingsOverTheInterval(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	const interval = time.Second
	r := startReplica(t, s, assemble.LiveOptions{PingInterval: interval, PongWait: 5 * time.Second}, api.Config{})
	pay := creds.Keys["pay"]
	cfg := r.createConfig(t, pay.SK, "*")

	type ping struct {
		client int
		at     time.Time
	}
	// As many connections as the hub has ping slots, so that together they hold every one.
	const clients = 50
	pings := make(chan ping, 1000)
	for i := range clients {
		r.connectWith(t, cfg, pay.PK, func(ws *websocket.Conn) {
			ws.SetPingHandler(func(data string) error {
				pings <- ping{i, time.Now()}
				return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
			})
		})
	}
	start := time.Now()
	time.Sleep(3*interval + interval/2) // the time is the point: the pings of 3.5 intervals are counted

	first := map[int]time.Time{}
	count := map[int]int{}
	for len(pings) > 0 {
		p := <-pings
		count[p.client]++
		if _, ok := first[p.client]; !ok {
			first[p.client] = p.at
		}
	}
	// Every connection is pinged every interval: three or four times in three and a half.
	for i := range clients {
		if count[i] < 3 {
			t.Errorf("client %d got %d pings in %v at a %v interval", i, count[i], time.Since(start).Round(time.Millisecond), interval)
		}
	}
	// And not all at once: the first pings cover most of an interval. (Ticks can only be
	// late or dropped, never closer together, so a slow machine spreads them further.)
	var earliest, latest time.Time
	for _, at := range first {
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
		if at.After(latest) {
			latest = at
		}
	}
	if spread := latest.Sub(earliest); spread < interval/2 {
		t.Errorf("the first pings of %d connections came within %v of each other; want them spread over the %v interval", clients, spread, interval)
	}
}

func TestChannelEvictsASlowClientWhileAFastOneKeepsUp(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	// A long write timeout: the slow client below stops reading for a while and must
	// then find the close frame behind its backlog.
	r := startReplica(t, s, assemble.LiveOptions{WriteTimeout: 30 * time.Second}, api.Config{})
	pay := creds.Keys["pay"]
	cfg := r.createConfig(t, pay.SK, "*")
	fast := r.connect(t, cfg, pay.PK)

	// The slow client's socket receives little and its reader does not read until told.
	dialer := *websocket.DefaultDialer
	dialer.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		}
		return conn, err
	}
	slowWS, _, err := dialer.Dial(r.wsURL(cfg, pay.PK), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slowWS.Close()

	const n = 800
	done := make(chan int)
	go func() {
		got := 0
		for got < n {
			select {
			case f := <-fast.frames:
				if f["event"] == "websocket.test" {
					got++
				}
			case <-time.After(10 * time.Second):
				done <- got
				return
			}
		}
		done <- got
	}()
	for i := 0; i < n; i++ {
		r.sendTestEvent(t, cfg, pay.SK)
	}
	if got := <-done; got != n {
		t.Fatalf("the fast client received %d of %d events", got, n)
	}
	// Now the slow client reads what reached it: the backlog, then close 4008.
	code := -1
	for {
		_ = slowWS.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, _, err := slowWS.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				code = ce.Code
			}
			break
		}
	}
	if code != 4008 {
		t.Fatalf("the slow client ended with %d, want 4008", code)
	}
}

// The send ring is a switch: off, the hub says so and writes every frame with a system
// call of its own (the whole suite runs that way too, see TestMain); on, it says nothing
// of the kind unless the kernel refuses the ring.
func TestChannelSendRingIsASwitch(t *testing.T) {
	s := storetest.NewSQLite(t)
	off := startReplica(t, s, assemble.LiveOptions{NoSendRing: true}, api.Config{})
	if !strings.Contains(off.logs.String(), "the send ring is switched off") {
		t.Fatalf("the hub with the ring switched off did not say so:\n%s", off.logs)
	}
	if os.Getenv(plainSendsEnv) != "" {
		return
	}
	on := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	if strings.Contains(on.logs.String(), "the send ring is switched off") {
		t.Fatalf("the hub with the ring on says it is off:\n%s", on.logs)
	}
}

// Disabling an organisation closes its live connections (4003) at once, and no other's.
func TestADisabledOrganisationsConnectionsClose(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	otherSK := creds.OtherOrg.Keys["pay"]["sk"]
	closing := r.connect(t, r.createConfig(t, otherSK, "*"), otherSK)
	bystander := r.connect(t, r.createConfig(t, creds.Keys["pay"].SK, "*"), creds.Keys["pay"].PK)

	operator := &service.Service{Store: s, Log: slog.New(slog.DiscardHandler), Bus: r.live.Bus}
	if _, err := operator.DisableOrganization(context.Background(), creds.OtherOrg.OrgID); err != nil {
		t.Fatal(err)
	}
	closing.waitClosed(t, 4003)
	bystander.quiet(t, 200*time.Millisecond)
	if status, _ := r.call(t, "GET", "/api/v1/payments", otherSK, nil); status != 401 {
		t.Fatalf("the disabled organisation's key after its connection closed: %d", status)
	}
}
