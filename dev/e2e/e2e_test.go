// Package e2e drives the dev bundle from outside, over HTTP, the way an integrator would.
// It is the one test package that links the embedded Temporal server.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/opentreasury/treasury/dev/devchains"
	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

var httpClient = &http.Client{Timeout: 10 * time.Second}

func startBundle(t *testing.T, dataDir, databaseURL string, tweaks ...func(*devstack.Options)) *devstack.Bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := devstack.Options{
		DataDir:      dataDir,
		HTTPAddr:     "127.0.0.1:0",
		TemporalPort: 0,
		UIPort:       0,
		DatabaseURL:  databaseURL,
		// Long enough that only the test's own trigger runs the sync while it watches.
		BalanceSyncInterval: time.Hour,
		DevSigner:           true,
		BlockTime:           50 * time.Millisecond,
		Log:                 slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	b, err := devstack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start dev bundle: %v", err)
	}
	return b
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func call(t *testing.T, method, url, token string, headers ...string) reply {
	t.Helper()
	return send(t, method, url, token, "", headers...)
}

func send(t *testing.T, method, url, token, body string, headers ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %s", method, url, raw)
		}
	}
	return r
}

func TestDevBundle(t *testing.T) {
	dataDir := t.TempDir()
	b := startBundle(t, dataDir, "")
	stopped := false
	defer func() {
		if !stopped {
			_ = b.Shutdown()
		}
	}()
	creds := b.Credentials
	api := b.APIURL + "/api/v1"

	t.Run("credentials file", func(t *testing.T) {
		info, err := os.Stat(b.CredentialsPath)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Fatalf("credentials.json mode %v, want 0600", info.Mode().Perm())
		}
		var onDisk seed.Credentials
		raw, _ := os.ReadFile(b.CredentialsPath)
		if err := json.Unmarshal(raw, &onDisk); err != nil {
			t.Fatal(err)
		}
		if onDisk.BaseURL != b.APIURL || onDisk.TemporalUIURL != b.TemporalUIURL || !strings.HasPrefix(onDisk.WSURL, "ws://") {
			t.Fatalf("urls in credentials.json: %s %s %s", onDisk.BaseURL, onDisk.WSURL, onDisk.TemporalUIURL)
		}
		if len(onDisk.Wallets) != 6 || onDisk.SolanaFailAddress == "" || onDisk.OtherOrg.Keys["pay"]["sk"] == "" || onDisk.OAuthClients["trade"].Scopes != "trade:read trade:write" {
			t.Fatalf("credentials.json content: %s", raw)
		}
		manual := 0
		for _, w := range onDisk.Wallets {
			if !w.AutoSign {
				manual++
				if w.PrivateKey == "" {
					t.Fatal("the manual wallet must carry its private key")
				}
			} else if w.PrivateKey != "" {
				t.Fatal("an autoSign wallet must not carry a private key")
			}
		}
		if manual != 2 {
			t.Fatalf("want two manual wallets (ethereum and solana), got %d", manual)
		}
		for _, app := range []string{"pay", "trade", "earn", "borrow"} {
			k := onDisk.Keys[app]
			if k.SK == "" || k.PK == "" || k.Approve == "" || k.Sign == "" || k.Read == "" || onDisk.SecondApprover[app] == "" {
				t.Fatalf("keys of %s incomplete: %+v", app, k)
			}
		}
	})

	t.Run("portfolio", func(t *testing.T) {
		r := call(t, "GET", api+"/treasury/portfolio", creds.Keys["treasury"].SK, "X-Correlation-Id", "e2e-portfolio-1")
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if r.header.Get("X-Correlation-Id") != "e2e-portfolio-1" {
			t.Fatalf("correlation id not echoed: %v", r.header)
		}
		if r.body["totalUsd"] != "34550000.00" || r.body["walletCount"] != float64(6) {
			t.Fatalf("portfolio %s", r.raw)
		}
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(r.body["syncedAt"].(string)) {
			t.Fatalf("syncedAt %v", r.body["syncedAt"])
		}
	})

	t.Run("problems", func(t *testing.T) {
		cases := []struct {
			name, url, token string
			status           int
			code             string
		}{
			{"missing token", api + "/treasury/portfolio", "", 401, "unauthenticated"},
			{"pay key on portfolio", api + "/treasury/portfolio", creds.Keys["pay"].SK, 403, "permission_denied"},
			{"other org key on portfolio", api + "/treasury/portfolio", creds.OtherOrg.Keys["pay"]["sk"], 403, "permission_denied"},
			{"unknown path", api + "/no/such/thing", creds.Keys["treasury"].SK, 404, "not_found"},
			{"unknown path without token", b.APIURL + "/nope", "", 404, "not_found"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				for _, sent := range []string{"", "e2e-" + strings.ReplaceAll(tc.name, " ", "-")} {
					var r reply
					if sent == "" {
						r = call(t, "GET", tc.url, tc.token)
					} else {
						r = call(t, "GET", tc.url, tc.token, "X-Correlation-Id", sent)
					}
					if r.status != tc.status || r.body["code"] != tc.code {
						t.Fatalf("want %d %s, got %d %s", tc.status, tc.code, r.status, r.raw)
					}
					if !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
						t.Fatalf("content type %q", r.header.Get("Content-Type"))
					}
					got := r.header.Get("X-Correlation-Id")
					if got == "" || (sent != "" && got != sent) || r.body["correlationId"] != got {
						t.Fatalf("correlation id: sent %q, header %q, body %v", sent, got, r.body["correlationId"])
					}
					if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
						t.Fatal("401 without WWW-Authenticate: Bearer")
					}
				}
			})
		}
	})

	t.Run("temporal UI serves HTML", func(t *testing.T) {
		r := call(t, "GET", b.TemporalUIURL+"/", "")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(strings.ToLower(string(r.raw)), "<!doctype html") {
			t.Fatalf("UI answered %d %q", r.status, r.header.Get("Content-Type"))
		}
	})

	t.Run("readiness", func(t *testing.T) {
		if r := call(t, "GET", b.APIURL+"/readyz", ""); r.status != 200 {
			t.Fatalf("readyz %d %s", r.status, r.raw)
		}
	})

	t.Run("search attributes registered", func(t *testing.T) {
		c, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
			&operatorservice.ListSearchAttributesRequest{Namespace: b.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		for name, typ := range assemble.SearchAttributeTypes() {
			if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
				t.Fatalf("search attribute %s: %v (present %v)", name, got, ok)
			}
		}
	})

	t.Run("balance sync schedule refreshes the portfolio from the chain", func(t *testing.T) {
		// A second handle on the same SQLite file stands in for activity on the chain.
		s, err := store.Open(context.Background(), store.Config{SQLitePath: filepath.Join(dataDir, "treasury.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w, err := s.Wallet(context.Background(), creds.OrgID, creds.Wallets[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The schedule syncs once at start-up; on a loaded machine that run may still be
		// coming when the chain moves. Pause it and let the start-up run finish first, so
		// the only sync that can see the credit is the one this test triggers.
		h := c.ScheduleClient().GetHandle(context.Background(), workflows.PortfolioSyncScheduleID)
		if err := h.Pause(context.Background(), client.SchedulePauseOptions{Note: "e2e: chain moves"}); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 30*time.Second, "the start-up sync to finish (an action taken, none running)", func() bool {
			d, err := h.Describe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return d.Info.NumActions >= 1 && len(d.Info.RunningWorkflows) == 0
		})
		// 1 ETH at 3000 USD arrives on the chain (mined once the call returns).
		if err := b.Fund(context.Background(), w.Chain, w.Address, "ETH", decimal.NewFromInt(1)); err != nil {
			t.Fatal(err)
		}
		if r := call(t, "GET", api+"/treasury/portfolio", creds.Keys["treasury"].SK); r.body["totalUsd"] != "34550000.00" {
			t.Fatalf("the API must show synced balances, not the chain's live ones: %s", r.raw)
		}
		if err := h.Unpause(context.Background(), client.ScheduleUnpauseOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := h.Trigger(context.Background(), client.ScheduleTriggerOptions{}); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 30*time.Second, "the scheduled sync to pick up the new balance (totalUsd 34553000.00)", func() bool {
			return call(t, "GET", api+"/treasury/portfolio", creds.Keys["treasury"].SK).body["totalUsd"] == "34553000.00"
		})
	})

	if err := b.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	stopped = true

	t.Run("restart keeps data and credentials", func(t *testing.T) {
		b2 := startBundle(t, dataDir, "")
		defer func() { _ = b2.Shutdown() }()
		if b2.Credentials.OrgID != creds.OrgID || b2.Credentials.Keys["treasury"].SK != creds.Keys["treasury"].SK {
			t.Fatal("credentials changed across a restart")
		}
		r := call(t, "GET", b2.APIURL+"/api/v1/treasury/portfolio", creds.Keys["treasury"].SK)
		if r.status != 200 || r.body["totalUsd"] != "34553000.00" {
			t.Fatalf("after restart: %d %s", r.status, r.raw)
		}
	})
}

func TestDevBundleOnPostgres(t *testing.T) {
	b := startBundle(t, t.TempDir(), storetest.PostgresSchemaURL(t))
	defer func() { _ = b.Shutdown() }()
	r := call(t, "GET", b.APIURL+"/api/v1/treasury/portfolio", b.Credentials.Keys["treasury"].SK)
	if r.status != 200 || r.body["totalUsd"] != "34550000.00" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if r := call(t, "GET", b.APIURL+"/readyz", ""); r.status != 200 {
		t.Fatalf("readyz %d %s", r.status, r.raw)
	}
}

// devBinary is the treasury-dev binary: the one make test passes, or one built here.
func devBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TREASURY_DEV_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "treasury-dev")
	build := exec.Command("go", "build", "-o", bin, "github.com/opentreasury/treasury/cmd/treasury-dev")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// runningBinary is a treasury-dev process started by a test.
type runningBinary struct {
	cmd                      *exec.Cmd
	apiURL, uiURL, credsPath string
	creds                    seed.Credentials
}

// startBinary runs treasury-dev on free ports and waits for its banner.
func startBinary(t *testing.T, bin, dataDir string, args ...string) *runningBinary {
	t.Helper()
	args = append([]string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--temporal-port", "0", "--ui-port", "0"}, args...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "treasury-dev.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		// Killed outright, the bundle leaves its Solana node to notice and save its state
		// into dataDir, which the test is about to remove.
		if err := devsvm.AwaitExit(devchains.SolanaDir(dataDir), 30*time.Second); err != nil {
			t.Error(err)
		}
	})
	rb := &runningBinary{cmd: cmd}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		switch {
		case len(fields) == 2 && fields[0] == "API":
			rb.apiURL = fields[1]
		case len(fields) == 3 && fields[0] == "Temporal" && fields[1] == "UI":
			rb.uiURL = fields[2]
		case len(fields) == 2 && fields[0] == "Credentials":
			rb.credsPath = fields[1]
		}
		if strings.HasPrefix(lines.Text(), "Press Ctrl-C") {
			break
		}
	}
	if rb.apiURL == "" || rb.uiURL == "" || rb.credsPath != filepath.Join(dataDir, "credentials.json") {
		t.Fatalf("banner lacks addresses: api %q ui %q credentials %q; the log ends:\n%s", rb.apiURL, rb.uiURL, rb.credsPath, logTail(logPath))
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	raw, err := os.ReadFile(rb.credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rb.creds); err != nil {
		t.Fatal(err)
	}
	return rb
}

// logTail is the end of a log file, enough to say why a process stopped.
func logTail(path string) string {
	raw, _ := os.ReadFile(path)
	if len(raw) > 4000 {
		raw = raw[len(raw)-4000:]
	}
	return string(raw)
}

// TestTreasuryDevBinaryStopsCleanlyOnInterrupt runs the real binary, as make run does,
// and interrupts it as Ctrl-C would.
func TestTreasuryDevBinaryStopsCleanlyOnInterrupt(t *testing.T) {
	rb := startBinary(t, devBinary(t), t.TempDir())
	if r := call(t, "GET", rb.apiURL+"/treasury/portfolio", rb.creds.Keys["treasury"].SK); r.status != 200 {
		t.Fatalf("portfolio %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", rb.uiURL, ""); r.status != 200 {
		t.Fatalf("UI %d", r.status)
	}
	sent := time.Now()
	if err := rb.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rb.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("treasury-dev exited with %v, want exit code 0", err)
		}
		t.Logf("treasury-dev stopped %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("treasury-dev did not stop within 10 s of SIGINT")
	}
}
