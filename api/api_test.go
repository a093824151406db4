package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/dev/logtest"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/fakechain"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/webhook"
)

type fixture struct {
	store   *store.Store
	creds   *seed.Credentials
	handler http.Handler
	logs    *logtest.Buffer
	ready   *readyFlag
	// chain is where a registered wallet's first sync reads its balances.
	chain *fakechain.Chain
	// webhooks are the router's webhook options, for tests that build another router.
	webhooks service.WebhookOptions
}

type readyFlag struct {
	mu  sync.Mutex
	err error
}

func (r *readyFlag) set(err error) { r.mu.Lock(); r.err = err; r.mu.Unlock() }
func (r *readyFlag) check(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, storetest.NewSQLite(t))
}

// newFixtureOn is newFixture on a store of the test's choice.
func newFixtureOn(t *testing.T, s *store.Store) *fixture {
	t.Helper()
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	// A wallet registered through the API syncs from a chain where the seeded wallets hold
	// what the seed gave them.
	funded, err := fakechain.NewFunded(context.Background(), s.ChainHoldings)
	if err != nil {
		t.Fatal(err)
	}
	ready := &readyFlag{}
	hooks := testWebhooks(t)
	h := NewRouter(Config{Store: s, Log: log, Readiness: []ReadinessCheck{{Name: "database", Check: ready.check}}, Service: &service.Service{Store: s, Log: log, Webhooks: hooks, DryRuns: inlineDryRuns{&activities.Policies{Store: s, Log: log}},
		Recoveries: inlineRecoveries{&activities.WebhookRecoveries{Store: s}},
		// Small pages, so that a verification of a short chain takes several.
		AuditVerifications: inlineAuditVerifications{&activities.Audit{Store: s, PageSize: 7}}, Payouts: &fakePayouts{},
		// A registered wallet's first sync, at once, from the fake chain.
		WalletSync: inlineWalletSync{&activities.Portfolio{Store: s, Chain: funded, Log: log}}}})
	return &fixture{store: s, creds: creds, handler: h, logs: logs, ready: ready, webhooks: hooks, chain: funded}
}

// testWebhooks are the webhook options of a test router: a fresh sealing key, and the
// production guard (https only, no private addresses).
func testWebhooks(t *testing.T) service.WebhookOptions {
	t.Helper()
	k, _ := webhook.NewKey()
	key, _ := webhook.ParseKey(k)
	box, err := webhook.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	return service.WebhookOptions{Box: box}
}

type response struct {
	status  int
	header  http.Header
	body    []byte
	problem Problem
}

func (f *fixture) do(t *testing.T, method, target, token string, body io.Reader, headers ...string) response {
	t.Helper()
	var sent []byte
	if body != nil {
		sent, _ = io.ReadAll(body)
		body = bytes.NewReader(sent)
	}
	req := httptest.NewRequest(method, target, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	documented(t, req, sent, r)
	if strings.HasPrefix(rec.Header().Get("Content-Type"), problemContentType) {
		if err := json.Unmarshal(r.body, &r.problem); err != nil {
			t.Fatalf("problem body is not JSON: %s", r.body)
		}
	}
	return r
}

func (r response) wantProblem(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status || r.problem.Code != code || r.problem.Status != status {
		t.Fatalf("want %d %s, got %d %s", status, code, r.status, r.body)
	}
	if r.problem.CorrelationID == "" || r.problem.CorrelationID != r.header.Get(correlationHeader) {
		t.Fatalf("problem correlationId %q does not match header %q", r.problem.CorrelationID, r.header.Get(correlationHeader))
	}
	if !strings.HasSuffix(r.problem.Type, "/errors/"+code) || r.problem.Title == "" {
		t.Fatalf("problem type/title: %+v", r.problem)
	}
}

func TestAuthentication(t *testing.T) {
	f := newFixture(t)
	revoked, err := f.store.APIKeyBySecretHash(context.Background(), hashOf(f.creds.Keys["trade"].SK))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.RevokeAPIKey(context.Background(), f.creds.OrgID, revoked.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	const portfolio = "/api/v1/treasury/portfolio"
	cases := []struct {
		name   string
		header string // full Authorization header; "" sends none
		status int
		code   string
	}{
		{"missing", "", 401, apitypes.CodeUnauthenticated},
		{"wrong scheme", "Basic " + f.creds.Keys["treasury"].SK, 401, apitypes.CodeUnauthenticated},
		{"empty bearer", "Bearer ", 401, apitypes.CodeUnauthenticated},
		{"malformed", "Bearer not-a-key", 401, apitypes.CodeUnauthenticated},
		{"unknown", "Bearer sk_doesnotexistdoesnotexistdoesnotexist", 401, apitypes.CodeUnauthenticated},
		{"kind prefix swapped", "Bearer tk_" + strings.TrimPrefix(f.creds.Keys["treasury"].SK, "sk_"), 401, apitypes.CodeUnauthenticated},
		{"revoked", "Bearer " + f.creds.Keys["trade"].SK, 401, apitypes.CodeUnauthenticated},
		{"wrong app sk", "Bearer " + f.creds.Keys["pay"].SK, 403, apitypes.CodePermissionDenied},
		{"wrong app tk", "Bearer " + f.creds.Keys["pay"].Read, 403, apitypes.CodePermissionDenied},
		{"publishable key on REST", "Bearer " + f.creds.Keys["treasury"].PK, 403, apitypes.CodePermissionDenied},
		{"other org, other app", "Bearer " + f.creds.OtherOrg.Keys["pay"]["sk"], 403, apitypes.CodePermissionDenied},
		{"treasury sk", "Bearer " + f.creds.Keys["treasury"].SK, 200, ""},
		{"treasury read tk", "Bearer " + f.creds.Keys["treasury"].Read, 200, ""},
		{"lower-case scheme", "bearer " + f.creds.Keys["treasury"].SK, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.header == "" {
				r = f.do(t, "GET", portfolio, "", nil)
			} else {
				r = f.do(t, "GET", portfolio, "", nil, "Authorization", tc.header)
			}
			if tc.code == "" {
				if r.status != tc.status {
					t.Fatalf("want %d, got %d %s", tc.status, r.status, r.body)
				}
				return
			}
			r.wantProblem(t, tc.status, tc.code)
			if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without WWW-Authenticate: Bearer: %v", r.header)
			}
		})
	}
	for _, secret := range []string{f.creds.Keys["treasury"].SK, f.creds.Keys["trade"].SK, f.creds.Keys["pay"].Read} {
		if strings.Contains(f.logs.String(), secret) {
			t.Fatal("a secret appeared in the logs")
		}
	}
}

func TestOtherOrganisationSeesNothingOfOurs(t *testing.T) {
	f := newFixture(t)
	// The other org's only key is on pay; give it a treasury key to read its own portfolio.
	other := f.creds.OtherOrg.OrgID
	secret := "sk_otherorgtreasurykeyotherorgtreasurykey00"
	if err := f.store.CreateAPIKey(context.Background(), &store.APIKey{ID: "key_other", OrgID: other, App: "treasury", Kind: "sk",
		SecretHash: hashOf(secret), SecretHint: "sk_", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "GET", "/api/v1/treasury/wallets", secret, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var list struct{ Data []apitypes.Wallet }
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, w := range f.creds.Wallets {
		ours[w.ID] = true
	}
	if len(list.Data) != 1 {
		t.Fatalf("other org should see exactly its one wallet, got %d", len(list.Data))
	}
	for _, w := range list.Data {
		if ours[w.ID] {
			t.Fatalf("other org sees our wallet %s", w.ID)
		}
	}
	r = f.do(t, "GET", "/api/v1/treasury/portfolio", secret, nil)
	var p apitypes.Portfolio
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.WalletCount != 1 || p.TotalUSD != "150000.00" {
		t.Fatalf("other org portfolio: %+v", p)
	}
}

func TestPortfolioShape(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/v1/treasury/portfolio", f.creds.Keys["treasury"].SK, nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"totalUsd", "walletCount", "chainRollup", "syncedAt"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("missing %s in %s", k, r.body)
		}
	}
	var p apitypes.Portfolio
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	// ETH 2100×3000 + USDC 21M + WBTC 20×60000 on ethereum; 100k MATIC×0.5 + 1M USDC on
	// polygon; 2 × (10k SOL×150 + 1M USDC) on solana.
	want := apitypes.Portfolio{TotalUSD: "34550000.00", WalletCount: len(f.creds.Wallets), ChainRollup: []apitypes.ChainValue{
		{Chain: "ethereum", USDValue: "28500000.00"}, {Chain: "polygon", USDValue: "1050000.00"}, {Chain: "solana", USDValue: "5000000.00"},
	}}
	if p.TotalUSD != want.TotalUSD || p.WalletCount != 6 || len(p.ChainRollup) != 3 {
		t.Fatalf("portfolio %+v, want %+v", p, want)
	}
	for i := range want.ChainRollup {
		if p.ChainRollup[i] != want.ChainRollup[i] {
			t.Fatalf("rollup %+v, want %+v", p.ChainRollup, want.ChainRollup)
		}
	}
	var synced string
	if err := json.Unmarshal(raw["syncedAt"], &synced); err != nil {
		t.Fatalf("syncedAt %s: %v", raw["syncedAt"], err)
	}
	if _, err := time.Parse(events.TimeLayout, synced); err != nil || len(synced) != len("2026-11-22T01:24:34.123Z") {
		t.Fatalf("syncedAt %q is not ISO 8601 UTC with milliseconds", synced)
	}
}

func TestListsPageAndValidate(t *testing.T) {
	f := newFixture(t)
	key := f.creds.Keys["treasury"].Read
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		target := "/api/v1/treasury/positions?limit=4"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		r := f.do(t, "GET", target, key, nil)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var page apitypes.Page[apitypes.Position]
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Data {
			k := p.WalletID + p.Asset
			if seen[k] {
				t.Fatalf("position %s twice", k)
			}
			seen[k] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = string(page.NextCursor)
	}
	if len(seen) != 14 {
		t.Fatalf("want the 14 seeded positions, got %d", len(seen))
	}
	for _, target := range []string{
		"/api/v1/treasury/wallets?limit=0", "/api/v1/treasury/wallets?limit=201", "/api/v1/treasury/wallets?limit=x",
		"/api/v1/treasury/wallets?cursor=!!!", "/api/v1/treasury/wallets?colour=red", "/api/v1/treasury/positions?cursor=bm9zZXA",
	} {
		r := f.do(t, "GET", target, key, nil)
		r.wantProblem(t, 422, apitypes.CodeValidationFailed)
		if len(r.problem.Errors) == 0 || r.problem.Errors[0].Field == "" {
			t.Fatalf("%s: no field errors: %s", target, r.body)
		}
	}
}

func TestCorrelationID(t *testing.T) {
	f := newFixture(t)
	key := f.creds.Keys["treasury"].SK
	cases := []struct {
		name, sent string
		echoed     bool
	}{
		{"echoed", "order-run:42_a.b", true},
		{"max length", strings.Repeat("a", 128), true},
		{"too long", strings.Repeat("a", 129), false},
		{"bad characters", "hello world/<script>", false},
		{"none", "", false},
	}
	for _, tc := range cases {
		for _, target := range []string{"/api/v1/treasury/portfolio", "/nope", "/api/v1/treasury/nothing"} {
			t.Run(tc.name+target, func(t *testing.T) {
				var r response
				if tc.sent == "" {
					r = f.do(t, "GET", target, key, nil)
				} else {
					r = f.do(t, "GET", target, key, nil, correlationHeader, tc.sent)
				}
				got := r.header.Get(correlationHeader)
				if tc.echoed && got != tc.sent {
					t.Fatalf("want echo %q, got %q", tc.sent, got)
				}
				if !tc.echoed && (got == "" || got == tc.sent || !correlationIDPattern.MatchString(got)) {
					t.Fatalf("want a generated id, got %q", got)
				}
				if target != "/api/v1/treasury/portfolio" {
					r.wantProblem(t, 404, apitypes.CodeNotFound)
				}
			})
		}
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t)
	big := bytes.Repeat([]byte("a"), MaxBodyBytes+1)
	r := f.do(t, "POST", "/api/v1/treasury/portfolio", f.creds.Keys["treasury"].SK, bytes.NewReader(big), "Content-Type", "application/json")
	r.wantProblem(t, 413, apitypes.CodePayloadTooLarge)
}

func TestRecoveryAnswersProblemWithCorrelationID(t *testing.T) {
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	r := gin.New()
	r.Use(withCorrelationID(), withRecovery(log))
	r.GET("/boom", func(*gin.Context) { panic("database password is hunter2") })
	req := httptest.NewRequest("GET", "/boom", nil)
	req.Header.Set(correlationHeader, "trace-1")
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != 500 || rec.Header().Get(correlationHeader) != "trace-1" {
		t.Fatalf("status %d header %v", rec.Code, rec.Header())
	}
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != apitypes.CodeInternal || p.CorrelationID != "trace-1" {
		t.Fatalf("problem %s", rec.Body)
	}
	if strings.Contains(rec.Body.String(), "hunter2") {
		t.Fatal("panic value leaked to the client")
	}
	if !strings.Contains(logs.String(), "trace-1") {
		t.Fatal("panic not logged with the correlation id")
	}
}

func TestTimeoutAndStoreErrorsAnswer503(t *testing.T) {
	r := gin.New()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	r.Use(withCorrelationID(), withTimeout(10*time.Millisecond))
	r.GET("/slow", func(c *gin.Context) {
		<-c.Request.Context().Done()
		requestFailed(c, log, c.Request.Context().Err())
	})
	r.GET("/broken", func(c *gin.Context) { requestFailed(c, log, errors.New("relation does not exist")) })
	r.GET("/down", func(c *gin.Context) {
		requestFailed(c, log, fmt.Errorf("query: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}))
	})
	r.GET("/temporal-down", func(c *gin.Context) {
		requestFailed(c, log, fmt.Errorf("start order workflow: %w", serviceerror.NewUnavailable("connection refused")))
	})
	for target, want := range map[string]string{"/slow": apitypes.CodeUnavailable, "/broken": apitypes.CodeInternal, "/down": apitypes.CodeUnavailable, "/temporal-down": apitypes.CodeUnavailable} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		var p Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != want {
			t.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "does not exist") {
			t.Fatal("internal error leaked")
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	f := newFixture(t)
	if r := f.do(t, "GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz %d", r.status)
	}
	if r := f.do(t, "GET", "/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz %d %s", r.status, r.body)
	}
	f.ready.set(errors.New("connection refused"))
	r := f.do(t, "GET", "/readyz", "", nil)
	r.wantProblem(t, 503, apitypes.CodeUnavailable)
	if !strings.Contains(r.problem.Detail, "database") {
		t.Fatalf("readyz should name the failing dependency: %s", r.body)
	}
}

func TestAccessLogRedactsQueryTokens(t *testing.T) {
	f := newFixture(t)
	secret := f.creds.Keys["treasury"].PK
	f.do(t, "GET", "/api/v1/ws?id=wsc_1&token="+secret, "", nil)
	logs := f.logs.String()
	if strings.Contains(logs, secret) {
		t.Fatalf("token logged: %s", logs)
	}
	if !strings.Contains(logs, "token=REDACTED") {
		t.Fatalf("redacted query not logged: %s", logs)
	}
}

func hashOf(secret string) string { return auth.HashSecret(secret) }

func TestRedactQueryKeepsOnlyHarmlessValues(t *testing.T) {
	got := redactQuery("limit=5&Token=sk_live_1&apiKey=tk_2&cursor=abc&signature=xyz")
	for _, secret := range []string{"sk_live_1", "tk_2", "xyz"} {
		if strings.Contains(got, secret) {
			t.Fatalf("%q leaked in %q", secret, got)
		}
	}
	if !strings.Contains(got, "limit=5") || !strings.Contains(got, "cursor=abc") {
		t.Fatalf("harmless values should stay: %q", got)
	}
}

func TestLastPageIsNeverEmpty(t *testing.T) {
	f := newFixture(t)
	// Six wallets in pages of six: one page, no cursor.
	r := f.do(t, "GET", "/api/v1/treasury/wallets?limit=6", f.creds.Keys["treasury"].SK, nil)
	var page apitypes.Page[apitypes.Wallet]
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 6 || page.NextCursor != "" {
		t.Fatalf("want 6 wallets and no cursor, got %d and %q", len(page.Data), page.NextCursor)
	}
}
