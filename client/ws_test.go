package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/wshub/closecode"
)

const secret = "pk_secretsecretsecretsecretsecretsecret00"

// step is what the fake server does with one connection attempt: refuse it with an
// HTTP problem, or accept it, send connection.ready and run.
type step struct {
	status int
	code   string
	run    func(f *fakeServer, ws *websocket.Conn)
}

// fakeServer plays a script of steps, one per connection attempt, and records what
// clients send and how they close.
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	steps    []step
	attempts int
	queries  []string
	texts    []string
	closes   []int
}

func newFakeServer(t *testing.T, steps ...step) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, steps: steps}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	i := f.attempts
	f.attempts++
	f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	if i >= len(f.steps) {
		f.t.Errorf("connection attempt %d is past the script", i+1)
		http.Error(w, "no more steps", http.StatusGone)
		return
	}
	s := f.steps[i]
	if s.status != 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Correlation-Id", "corr-1")
		w.WriteHeader(s.status)
		fmt.Fprintf(w, `{"type":"x","title":"t","status":%d,"code":%q,"detail":"detail of %s"}`, s.status, s.code, s.code)
		return
	}
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	ws.SetCloseHandler(func(code int, text string) error {
		f.mu.Lock()
		f.closes = append(f.closes, code)
		f.mu.Unlock()
		return ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
	})
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection.ready","configId":"wsc_1","events":["order.*"],"scope":"pay"}`))
	if s.run != nil {
		s.run(f, ws)
	}
}

// readAll reads what the client sends until the connection ends, answering pings.
func readAll(f *fakeServer, ws *websocket.Conn) {
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.texts = append(f.texts, string(data))
		f.mu.Unlock()
		if string(data) == `{"type":"ping"}` {
			_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"pong"}`))
		}
	}
}

func (f *fakeServer) snapshot() (queries, texts []string, closes []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...), append([]string(nil), f.texts...), append([]int(nil), f.closes...)
}

// closeWith sends a close frame and waits for the client's answer.
func closeWith(code int, reason string) func(f *fakeServer, ws *websocket.Conn) {
	return func(_ *fakeServer, ws *websocket.Conn) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}
}

func sendEvent(name string) string {
	return `{"type":"event","event":"` + name + `","at":"2026-11-22T01:24:34.123Z","data":{"id":"evt_1","event":"` + name +
		`","orderId":"ord_1","orderStatus":"draft"}}`
}

// fast keeps the reconnection waits short.
var fast = Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, HandshakeTimeout: 5 * time.Second}

type retry struct {
	err  error
	wait time.Duration
}

func follow(t *testing.T, f *fakeServer, handle func(Frame) error) (error, []Frame, []retry) {
	t.Helper()
	var frames []Frame
	var retries []retry
	o := fast
	o.OnRetry = func(err error, wait time.Duration) { retries = append(retries, retry{err, wait}) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Follow(ctx, f.srv.URL, "wsc_1", secret, func(fr Frame) error {
		frames = append(frames, fr)
		if handle != nil {
			return handle(fr)
		}
		return nil
	}, &o)
	if ctx.Err() != nil {
		t.Fatal("Follow did not end within 20 s")
	}
	return err, frames, retries
}

func stopAtEvent(fr Frame) error {
	if fr.Type == FrameEvent {
		return ErrStop
	}
	return nil
}

func TestChannelURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://127.0.0.1:8080":         "ws://127.0.0.1:8080/api/v1/ws?id=wsc_1&token=pk_%2Fx",
		"https://api.example.com/":      "wss://api.example.com/api/v1/ws?id=wsc_1&token=pk_%2Fx",
		"http://127.0.0.1:8080/api/v1":  "ws://127.0.0.1:8080/api/v1/ws?id=wsc_1&token=pk_%2Fx",
		"ws://h:1/api/v1/ws?id=old":     "ws://h:1/api/v1/ws?id=wsc_1&token=pk_%2Fx",
		"WSS://h/prefix":                "wss://h/prefix/api/v1/ws?id=wsc_1&token=pk_%2Fx",
		" http://h:1/treasury/api/v1/ ": "ws://h:1/treasury/api/v1/ws?id=wsc_1&token=pk_%2Fx",
	} {
		got, err := ChannelURL(base, "wsc_1", "pk_/x")
		if err != nil || got != want {
			t.Errorf("ChannelURL(%q) = %q, %v; want %q", base, got, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://h", "http://", "http://h:port"} {
		if _, err := ChannelURL(bad, "wsc_1", secret); err == nil {
			t.Errorf("ChannelURL(%q) accepted", bad)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("the error quotes the token: %v", err)
		}
	}
}

func TestRefusalIsFinalAndReadable(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{401, "unauthenticated"}, {403, "permission_denied"}, {404, "not_found"}} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFakeServer(t, step{status: tc.status, code: tc.code})
			err, frames, retries := follow(t, f, nil)
			var re *RefusedError
			if !errors.As(err, &re) || re.Status != tc.status || re.Code != tc.code || re.Detail != "detail of "+tc.code ||
				re.CorrelationID != "corr-1" {
				t.Fatalf("err %#v", err)
			}
			if len(frames) != 0 || len(retries) != 0 {
				t.Fatalf("frames %v, retries %v", frames, retries)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.code) || strings.Contains(msg, secret) {
				t.Fatalf("message %q", msg)
			}
			if queries, _, _ := f.snapshot(); queries[0] != "/api/v1/ws?id=wsc_1&token="+secret {
				t.Fatalf("request %q", queries[0])
			}
		})
	}
}

func TestFollowReconnectsWhenTheServerSaysSo(t *testing.T) {
	f := newFakeServer(t,
		step{run: closeWith(closecode.TooSlow, "too slow")},
		step{status: 503, code: "unavailable"},
		step{run: closeWith(closecode.GoingAway, "server restarting")},
		step{status: 429, code: "rate_limited"},
		step{run: closeWith(closecode.ConfigDisabled, "")},
		step{run: func(f *fakeServer, ws *websocket.Conn) {
			_ = ws.WriteMessage(websocket.TextMessage, []byte(sendEvent("Order.Created")))
			readAll(f, ws)
		}},
	)
	err, frames, retries := follow(t, f, stopAtEvent)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, fr := range frames {
		types = append(types, fr.Type)
	}
	if strings.Join(types, " ") != "connection.ready connection.ready connection.ready connection.ready event" {
		t.Fatalf("frames %v", types)
	}
	if frames[4].Event != "Order.Created" || frames[4].At != "2026-11-22T01:24:34.123Z" || !strings.Contains(string(frames[4].Data), `"ord_1"`) {
		t.Fatalf("event frame %+v", frames[4])
	}
	// 1 s doubling to 30 s, here 10 ms doubling to 40 ms.
	wantWaits := []time.Duration{10, 20, 40, 40, 40}
	if len(retries) != len(wantWaits) {
		t.Fatalf("retries %v", retries)
	}
	wantErrs := []string{"4008 (too slow)", "HTTP 503 unavailable", "1001 (server restarting)", "HTTP 429", "4001 (config disabled)"}
	for i, r := range retries {
		if r.wait != wantWaits[i]*time.Millisecond || !strings.Contains(r.err.Error(), wantErrs[i]) {
			t.Errorf("retry %d: %v after %v; want %s after %v", i, r.wait, r.err, wantErrs[i], wantWaits[i]*time.Millisecond)
		}
	}
	// The client answered each close frame with its code, and ended the last connection
	// cleanly.
	wait.For(t, 5*time.Second, "the condition", func() bool { _, _, closes := f.snapshot(); return len(closes) == 4 })
	if _, _, closes := f.snapshot(); fmt.Sprint(closes) != "[4008 1001 4001 1000]" {
		t.Fatalf("the client closed with %v", closes)
	}
}

func TestFollowStopsOnFinalCloseCodes(t *testing.T) {
	for _, code := range []int{4500, 4999, 3000, websocket.CloseNormalClosure, websocket.CloseInternalServerErr} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f := newFakeServer(t, step{run: closeWith(code, "bye")})
			err, _, retries := follow(t, f, nil)
			var ce *ClosedError
			if !errors.As(err, &ce) || ce.Code != code || ce.Reason != "bye" || len(retries) != 0 {
				t.Fatalf("err %v, retries %v", err, retries)
			}
		})
	}
}

// A deleted config: closed 4004, which asks for a reconnection, which is refused 404.
func TestFollowEndsWhenTheReconnectionIsRefused(t *testing.T) {
	for _, status := range []int{401, 403, 404} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := newFakeServer(t, step{run: closeWith(closecode.ConfigDeleted, "config deleted")}, step{status: status, code: "c"})
			err, _, retries := follow(t, f, nil)
			var re *RefusedError
			if !errors.As(err, &re) || re.Status != status || len(retries) != 1 {
				t.Fatalf("err %v, retries %v", err, retries)
			}
			var ce *ClosedError
			if !errors.As(retries[0].err, &ce) || ce.Code != closecode.ConfigDeleted {
				t.Fatalf("first failure %v", retries[0].err)
			}
		})
	}
}

func TestFollowNetworkFailures(t *testing.T) {
	t.Run("never connected: final", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		o := fast
		calls := 0
		o.OnRetry = func(error, time.Duration) { calls++ }
		err = Follow(context.Background(), "http://"+addr, "wsc_1", secret, func(Frame) error { return nil }, &o)
		var ne *NetworkError
		if !errors.As(err, &ne) || ne.Op != "connect" || calls != 0 || strings.Contains(err.Error(), secret) {
			t.Fatalf("err %v after %d retries", err, calls)
		}
	})
	t.Run("dropped after connecting: retried", func(t *testing.T) {
		f := newFakeServer(t,
			step{run: func(_ *fakeServer, ws *websocket.Conn) { ws.NetConn().Close() }},
			step{run: func(f *fakeServer, ws *websocket.Conn) {
				_ = ws.WriteMessage(websocket.TextMessage, []byte(sendEvent("Order.Submitted")))
				readAll(f, ws)
			}},
		)
		err, frames, retries := follow(t, f, stopAtEvent)
		var ne *NetworkError
		if err != nil || len(retries) != 1 || !errors.As(retries[0].err, &ne) || frames[len(frames)-1].Event != "Order.Submitted" {
			t.Fatalf("err %v, retries %v, frames %d", err, retries, len(frames))
		}
	})
}

func TestSubscribeKeepsAliveAndNoticesSilence(t *testing.T) {
	f := newFakeServer(t,
		step{run: readAll}, // answers the pings
		step{run: func(_ *fakeServer, ws *websocket.Conn) {
			// Silent: takes the client's frames but never answers.
			_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}},
	)
	o := Options{PingInterval: 50 * time.Millisecond, PongWait: 200 * time.Millisecond}
	pongs := 0
	err := Subscribe(context.Background(), f.srv.URL, "wsc_1", secret, func(fr Frame) error {
		if fr.Type == FramePong {
			if pongs++; pongs == 3 {
				return ErrStop
			}
		}
		return nil
	}, &o)
	if err != nil {
		t.Fatal(err)
	}
	if _, texts, _ := f.snapshot(); len(texts) < 3 || texts[0] != `{"type":"ping"}` {
		t.Fatalf("the server received %q", texts)
	}

	start := time.Now()
	err = Subscribe(context.Background(), f.srv.URL, "wsc_1", secret, func(Frame) error { return nil }, &o)
	var ne *NetworkError
	if !errors.As(err, &ne) || ne.Op != "read" {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("a silent server was noticed after %v, want about 250 ms", d)
	}
}

func TestSubscribeClosesWith1000WhenCancelled(t *testing.T) {
	f := newFakeServer(t, step{run: readAll})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Subscribe(ctx, f.srv.URL, "wsc_1", secret, func(fr Frame) error {
			if fr.Type == FrameReady {
				cancel()
			}
			return nil
		}, nil)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Subscribe did not return after the context ended")
	}
	wait.For(t, 5*time.Second, "the condition", func() bool { _, _, closes := f.snapshot(); return len(closes) == 1 })
	if _, _, closes := f.snapshot(); closes[0] != websocket.CloseNormalClosure {
		t.Fatalf("closed with %v", closes)
	}
}

func TestRedact(t *testing.T) {
	err := redact(errors.New(`parse "ws://h/api/v1/ws?id=x&token=pk_a%2Fb": bad`), "pk_a/b")
	if strings.Contains(err.Error(), "pk_a") || !strings.Contains(err.Error(), "token=[token]") {
		t.Fatal(err)
	}
	plain := errors.New("dial tcp: refused")
	if redact(plain, "pk_a/b") != plain {
		t.Fatal("an error without the token was rewritten")
	}
}

func TestFormatEvent(t *testing.T) {
	for _, tc := range []struct{ frame, want string }{
		{`{"type":"event","event":"Order.Confirmed","at":"2026-11-22T01:24:34.123Z","data":{"orderId":"ord_1","orderStatus":"confirmed","leg":"SWAP"}}`,
			"2026-11-22T01:24:34.123Z  Order.Confirmed           ord_1  confirmed  leg=SWAP"},
		{`{"type":"event","event":"websocket.test","at":"2026-11-22T01:24:34.123Z","data":{"id":"evt_1", "configId":"wsc_1"}}`,
			`2026-11-22T01:24:34.123Z  websocket.test            {"id":"evt_1","configId":"wsc_1"}`},
		{`{"type":"event","event":"Order.Created\u001b[2J","data":{"orderId":"ord_1","orderStatus":"draft"}}`,
			"-                         Order.Created?[2J         ord_1  draft"},
	} {
		var f Frame
		if err := json.Unmarshal([]byte(tc.frame), &f); err != nil {
			t.Fatal(err)
		}
		if got := FormatEvent(f); got != tc.want {
			t.Errorf("FormatEvent\n got %q\nwant %q", got, tc.want)
		}
	}
}
