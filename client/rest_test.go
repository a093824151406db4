package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	restKey      = "sk_restkeyrestkeyrestkeyrestkey0000"
	oauthID      = "oac_0001"
	oauthSecret  = "ocs_secret+with/odd=chars"
	accessToken1 = "oat_first_access_token"
	accessToken2 = "oat_second_access_token"
)

func newRESTClient(t *testing.T, h http.HandlerFunc, opts ...Option) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// The suffix is accepted, as the dev bundle prints the API address with it.
	c, err := New(srv.URL+"/api/v1/", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The developer surface sits at the root, every other route under /api/v1.
func TestDoRoutesTheDeveloperSurfaceToTheRoot(t *testing.T) {
	var paths []string
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}, WithToken(restKey))
	for _, p := range []string{"/developer/websockets?limit=1", "developer/api-keys", "/payments", "/developers"} {
		if err := c.Do(context.Background(), "GET", p, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"/developer/websockets?limit=1", "/developer/api-keys", "/api/v1/payments", "/api/v1/developers"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %v, want %v", paths, want)
	}
}

func TestDoSendsJSONWithTheKeyAndIdempotencyKey(t *testing.T) {
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != "POST" || r.URL.Path != "/api/v1/payments" || r.URL.Query().Get("x") != "1":
			t.Errorf("request %s %s", r.Method, r.URL)
		case r.Header.Get("Authorization") != "Bearer "+restKey:
			t.Error("the key was not sent as a bearer token")
		case r.Header.Get("Content-Type") != "application/json" || string(body) != `{"amount":"20000.50"}`:
			t.Errorf("body %q of type %q", body, r.Header.Get("Content-Type"))
		case r.Header.Get("Idempotency-Key") != "run-1:create":
			t.Errorf("Idempotency-Key %q", r.Header.Get("Idempotency-Key"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1","status":"draft"}`))
	}, WithToken(restKey))
	var out struct{ ID, Status string }
	err := c.Do(context.Background(), "POST", "/payments?x=1", map[string]string{"amount": "20000.50"}, &out,
		WithIdempotencyKey("run-1:create"))
	if err != nil || out.ID != "ord_1" || out.Status != "draft" {
		t.Fatalf("%v %+v", err, out)
	}
}

// WithAnswer tells a replayed answer from a first one.
func TestWithAnswerSaysWhetherTheAnswerWasReplayed(t *testing.T) {
	seen := map[string]bool{}
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		w.Header().Set("X-Correlation-Id", "corr-"+key)
		if seen[key] {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		seen[key] = true
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1"}`))
	}, WithToken(restKey))
	for i, want := range []bool{false, true} {
		var a Answer
		if err := c.Do(context.Background(), "POST", "/payments", map[string]string{}, nil, WithIdempotencyKey("k1"), WithAnswer(&a)); err != nil {
			t.Fatal(err)
		}
		if a.Replayed != want || a.CorrelationID != "corr-k1" {
			t.Fatalf("call %d: %+v, want replayed %v", i+1, a, want)
		}
	}
}

func TestDoWithoutBodySendsNoContentType(t *testing.T) {
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
			t.Errorf("length %d, type %q", r.ContentLength, r.Header.Get("Content-Type"))
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"ignored":true}`))
	}, WithToken(restKey))
	if err := c.Do(context.Background(), "POST", "payments/ord_1/submit", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// Writes carry a key of their own unless given one; reads carry none.
func TestEveryWriteCarriesAnIdempotencyKey(t *testing.T) {
	keys := map[string][]string{}
	var mu sync.Mutex
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Method] = append(keys[r.Method], r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}, WithToken(restKey))
	for _, m := range []string{"GET", "POST", "POST", "PUT", "PATCH", "DELETE"} {
		if err := c.Do(context.Background(), m, "/x", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if keys["GET"][0] != "" {
		t.Errorf("a read carried the key %q", keys["GET"][0])
	}
	seen := map[string]bool{}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		for _, k := range keys[m] {
			if len(k) < 16 || len(k) > 255 || seen[k] {
				t.Errorf("%s carried the key %q (seen before: %v)", m, k, seen[k])
			}
			seen[k] = true
		}
	}
}

func TestNonSuccessIsAProblem(t *testing.T) {
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/gateway" {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>proxy error</html>"))
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Correlation-Id", "corr-1")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"type":"…/errors/policy_violation","title":"Policy violation","status":422,
			"code":"policy_violation","detail":"The policy refused this order.",
			"errors":[{"field":"amount","message":"must be positive"}],
			"violations":[{"rule":"destinationWhitelist","message":"0x3 is not whitelisted"}]}`))
	}, WithToken(restKey), quick)

	err := c.Do(context.Background(), "POST", "/payments/ord_1/submit", nil, nil)
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("%T %v", err, err)
	}
	if p.Status != 422 || p.Code != "policy_violation" || p.CorrelationID != "corr-1" || len(p.Errors) != 1 ||
		len(p.Violations) != 1 || p.Violations[0].Rule != "destinationWhitelist" || p.Temporary() {
		t.Fatalf("%+v", p)
	}
	want := "HTTP 422 policy_violation: The policy refused this order.; amount must be positive; " +
		"destinationWhitelist: 0x3 is not whitelisted (correlation id corr-1)"
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}

	err = c.Do(context.Background(), "GET", "/gateway", nil, nil)
	if !errors.As(err, &p) || p.Status != 502 || p.Detail != "Bad Gateway" || !p.Temporary() {
		t.Fatalf("%v", err)
	}
	if strings.Contains(err.Error(), restKey) {
		t.Fatal("the error quotes the key")
	}
}

// tokenServer is an API whose token endpoint issues accessToken1, then accessToken2.
type tokenServer struct {
	t       *testing.T
	fetches atomic.Int32
	refuse  bool
}

func (s *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/oauth/token" {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer oat_") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
		return
	}
	id, secret, ok := r.BasicAuth()
	_ = r.ParseForm()
	if !ok || id != oauthID || secret != "ocs_secret%2Bwith%2Fodd%3Dchars" || r.PostForm.Get("grant_type") != "client_credentials" ||
		r.PostForm.Get("scope") != "pay:read pay:write" || r.PostForm.Has("client_secret") {
		s.t.Errorf("token request: basic %v %q, form %v", ok, id, r.PostForm)
	}
	if s.refuse {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"unknown client or wrong secret"}`))
		return
	}
	token := accessToken1
	if s.fetches.Add(1) > 1 {
		token = accessToken2
	}
	// A slow token endpoint, so that concurrent callers overlap with the fetch: the
	// delay is the point, no state is awaited.
	time.Sleep(20 * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"access_token":"` + token + `","token_type":"Bearer","expires_in":900,"scope":"pay:read pay:write"}`))
}

func TestClientCredentialsCacheTheTokenAndRenewItBeforeItExpires(t *testing.T) {
	ts := &tokenServer{t: t}
	c := newRESTClient(t, ts.serve, WithClientCredentials(oauthID, oauthSecret, "pay:read pay:write"))
	var elapsed atomic.Int64
	start := time.Now()
	c.cred.(*clientCredentials).now = func() time.Time { return start.Add(time.Duration(elapsed.Load())) }

	used := func() string {
		var out struct{ Token string }
		if err := c.Do(context.Background(), "GET", "/whoami", nil, &out); err != nil {
			t.Fatal(err)
		}
		return out.Token
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := used(); got != accessToken1 {
				t.Errorf("token %q", got)
			}
		})
	}
	wg.Wait()
	if n := ts.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches for concurrent first calls, want 1", n)
	}
	// Valid 900 s: reused until one minute before the end, then renewed.
	elapsed.Store(int64(839 * time.Second))
	if got := used(); got != accessToken1 || ts.fetches.Load() != 1 {
		t.Fatalf("token %q after %d fetches", got, ts.fetches.Load())
	}
	elapsed.Store(int64(840 * time.Second))
	if got := used(); got != accessToken2 || ts.fetches.Load() != 2 {
		t.Fatalf("token %q after %d fetches", got, ts.fetches.Load())
	}
}

func TestTokenRefusalIsAProblemWithoutTheSecret(t *testing.T) {
	ts := &tokenServer{t: t, refuse: true}
	c := newRESTClient(t, ts.serve, WithClientCredentials(oauthID, oauthSecret, "pay:read pay:write"))
	err := c.Do(context.Background(), "GET", "/whoami", nil, nil)
	var p *Problem
	if !errors.As(err, &p) || p.Status != 401 || p.Code != "invalid_client" || p.Detail != "unknown client or wrong secret" {
		t.Fatalf("%T %v", err, err)
	}
	if strings.Contains(err.Error(), "ocs_") {
		t.Fatal("the error quotes the secret")
	}
}

func TestNetworkErrorsQuoteNoCredential(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	for _, opt := range []Option{WithToken(restKey), WithClientCredentials(oauthID, oauthSecret, "")} {
		c, err := New(base, opt, WithHTTPClient(&http.Client{Timeout: time.Second}), quick)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Do(context.Background(), "GET", "/treasury/portfolio", nil, nil)
		var n *NetworkError
		if !errors.As(err, &n) || strings.Contains(err.Error(), restKey) || strings.Contains(err.Error(), "ocs_") {
			t.Fatalf("%v", err)
		}
	}
}

func TestNewRefusesABadURLOrNoCredential(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:8080", "ftp://host", "http://"} {
		if _, err := New(base, WithToken(restKey)); err == nil {
			t.Errorf("%q accepted", base)
		}
	}
	if _, err := New("http://127.0.0.1:8080"); err == nil {
		t.Error("no credential accepted")
	}
}
