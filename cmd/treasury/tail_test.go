package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/logtest"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// liveAPI is the API with its WebSocket hub in this process, over a seeded SQLite store.
type liveAPI struct {
	url   string
	creds *seed.Credentials
}

func startLiveAPI(t *testing.T) *liveAPI {
	t.Helper()
	s := storetest.NewSQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	live := assemble.StartLive(s, assemble.LiveOptions{}, log)
	srv := httptest.NewServer(api.NewRouter(api.Config{
		Store:     s,
		Log:       log,
		Live:      live.Hub,
		RateLimit: 1e6,
		RateBurst: 1e6,
		Service:   &service.Service{Store: s, Log: log, Bus: live.Bus, Live: live.Hub},
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		live.Shutdown(ctx)
		srv.Close()
	})
	return &liveAPI{url: srv.URL, creds: creds}
}

func (a *liveAPI) call(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func (a *liveAPI) createConfig(t *testing.T, entries ...string) string {
	t.Helper()
	status, out := a.call(t, "POST", "/developer/websockets", a.creds.Keys["pay"].SK, map[string]any{"events": entries})
	if status != 201 {
		t.Fatalf("create config: %d %v", status, out)
	}
	return out["id"].(string)
}

func (a *liveAPI) sendTest(t *testing.T, configID string) {
	t.Helper()
	if status, out := a.call(t, "POST", "/developer/websockets/"+configID+"/test", a.creds.Keys["pay"].SK, nil); status != 202 {
		t.Fatalf("test event: %d %v", status, out)
	}
}

// tailRun is treasury events tail running in the background, as from a shell.
type tailRun struct {
	stdout, stderr *logtest.Buffer
	done           chan int
}

func startTail(t *testing.T, env map[string]string, args ...string) *tailRun {
	t.Helper()
	r := &tailRun{stdout: &logtest.Buffer{}, stderr: &logtest.Buffer{}, done: make(chan int, 1)}
	getenv := func(k string) string { return env[k] }
	go func() { r.done <- run(append([]string{"events", "tail"}, args...), getenv, r.stdout, r.stderr) }()
	return r
}

// waitFor waits until the tail has printed want on stderr (which) or stdout.
func (r *tailRun) waitFor(t *testing.T, buf *logtest.Buffer, want string) {
	t.Helper()
	exited, code, waited := false, 0, false
	defer func() { // wait.For fails without the tail's output; give it here
		if !waited {
			t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	}()
	wait.For(t, 10*time.Second, fmt.Sprintf("%q from the tail", want), func() bool {
		if strings.Contains(buf.String(), want) {
			return true
		}
		select {
		case code = <-r.done:
			exited = true
		default:
		}
		return exited
	})
	waited = true
	if !exited {
		return
	}
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("the tail exited (%d) before printing %q\nstdout:\n%s\nstderr:\n%s", code, want, r.stdout, r.stderr)
	}
	r.done <- code // it printed want as it exited; leave the exit to exit
}

func (r *tailRun) connected(t *testing.T) {
	t.Helper()
	r.waitFor(t, r.stderr, "connected to wsc_")
}

func (r *tailRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		return code
	case <-time.After(15 * time.Second):
		t.Fatalf("the tail did not exit within 15 s\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	return -1
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestTailCountStopsAfterNEvents(t *testing.T) {
	a := startLiveAPI(t)
	pay := a.creds.Keys["pay"]
	cfg := a.createConfig(t, "order.confirmed")
	// The token from the environment, as a script keeps it out of the process list.
	r := startTail(t, map[string]string{"TREASURY_TOKEN": pay.PK}, "--url", a.url, "--config", cfg, "--count", "1", "--json")
	r.connected(t)
	a.sendTest(t, cfg)
	a.sendTest(t, cfg)
	if code := r.exit(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr)
	}
	out := lines(r.stdout.String())
	if len(out) != 1 {
		t.Fatalf("printed %d lines, want 1:\n%s", len(out), r.stdout)
	}
	var f struct {
		Type, Event, At string
		Data            map[string]any
	}
	if err := json.Unmarshal([]byte(out[0]), &f); err != nil || f.Type != "event" || f.Event != "websocket.test" ||
		f.Data["configId"] != cfg || f.At == "" {
		t.Fatalf("line %q (%v)", out[0], err)
	}
	if want := "connected to " + cfg + ": scope pay, events order.confirmed"; !strings.Contains(r.stderr.String(), want) {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
}

func TestTailUntilStopsAtThatEvent(t *testing.T) {
	a := startLiveAPI(t)
	pay := a.creds.Keys["pay"]
	cfg := a.createConfig(t, "order.*")
	r := startTail(t, nil, "--url", a.url, "--config", cfg, "--token", pay.PK, "--until", "order.created")
	r.connected(t)
	a.sendTest(t, cfg)
	r.waitFor(t, r.stdout, "websocket.test")
	status, order := a.call(t, "POST", "/api/v1/payments", pay.SK, map[string]any{"walletId": a.creds.Wallets[0].ID, "asset": "USDC",
		"amount": "1.50", "destination": map[string]any{"address": "0x1111111111111111111111111111111111111111"}})
	if status != 201 {
		t.Fatalf("create payment: %d %v", status, order)
	}
	if code := r.exit(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr)
	}
	out := lines(r.stdout.String())
	if len(out) != 2 || !strings.Contains(out[0], "  websocket.test  ") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\dT[\d:.]+Z  Order\.Created +` + order["id"].(string) + `  draft$`)
	if !want.MatchString(out[1]) {
		t.Fatalf("line %q, want it to match %s", out[1], want)
	}
	if strings.Contains(r.stderr.String(), "warning") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestTailRefusedBeforeTheUpgrade(t *testing.T) {
	a := startLiveAPI(t)
	cfg := a.createConfig(t, "order.*")
	bogus := "pk_" + strings.Repeat("b", 40)
	for _, tc := range []struct {
		name, config, token, want string
	}{
		{"bad token", cfg, bogus, "HTTP 401 unauthenticated"},
		{"key of another app", cfg, a.creds.Keys["trade"].PK, "HTTP 403 permission_denied"},
		{"unknown config", "wsc_" + strings.Repeat("0", 32), a.creds.Keys["pay"].PK, "HTTP 404 not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startTail(t, nil, "--url", a.url, "--config", tc.config, "--token", tc.token)
			if code := r.exit(t); code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, r.stderr)
			}
			if !strings.Contains(r.stderr.String(), tc.want) {
				t.Fatalf("stderr %q, want %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr.String()+r.stdout.String(), tc.token) {
				t.Fatal("the token was printed")
			}
		})
	}
}

func TestTailEndsWhenTheConfigIsDeleted(t *testing.T) {
	a := startLiveAPI(t)
	pay := a.creds.Keys["pay"]
	cfg := a.createConfig(t, "*")
	r := startTail(t, nil, "--url", a.url, "--config", cfg, "--token", pay.PK)
	r.connected(t)
	if status, out := a.call(t, "DELETE", "/developer/websockets/"+cfg, pay.SK, nil); status != 200 {
		t.Fatalf("delete: %d %v", status, out)
	}
	if code := r.exit(t); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, r.stderr)
	}
	// 4004 asks for a reconnection, which the API refuses: the config is gone.
	stderr := r.stderr.String()
	for _, want := range []string{"closed by the server with code 4004 (config deleted); reconnecting in 1s", "HTTP 404 not_found"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, pay.PK) {
		t.Fatal("the token was printed")
	}
}

func TestTailExitsCleanlyOnSIGINT(t *testing.T) {
	a := startLiveAPI(t)
	pay := a.creds.Keys["pay"]
	cfg := a.createConfig(t, "*")
	r := startTail(t, nil, "--url", a.url, "--config", cfg, "--token", pay.PK)
	r.connected(t)
	// run is waiting inside signal.NotifyContext, so the signal reaches the tail, not the
	// test binary's default handler.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := r.exit(t); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, r.stderr)
	}
	// The connection was closed, not left to time out.
	wait.For(t, 5*time.Second, "the tail's connection to close", func() bool {
		_, page := a.call(t, "GET", "/developer/websockets/"+cfg, pay.SK, nil)
		return page["liveConnections"] == float64(0)
	})
}

func TestTailRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "pk_x"}, "--config is required"},
		{[]string{"--config", "wsc_1"}, "--token is required (or set TREASURY_TOKEN)"},
		{[]string{"--config", "wsc_1", "--token", "pk_x", "--until", "Order.Confirm"}, `"Order.Confirm" is not an event name`},
		{[]string{"--config", "wsc_1", "--token", "pk_x", "--url", "ftp://h"}, "want http, https, ws or wss"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"events", "tail"}, tc.args...), func(string) string { return "" }, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
