package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// idemServer is a router with the idempotency middleware in front of test handlers that
// count how often they really run.
type idemServer struct {
	h       http.Handler
	runs    atomic.Int64
	release chan struct{}
	mu      sync.Mutex
	status  int
	code    string
}

func newIdemServer(t *testing.T) *idemServer {
	t.Helper()
	s := storetest.NewSQLite(t)
	srv := &idemServer{status: http.StatusCreated}
	m := &idempotency{store: s, log: slog.New(slog.NewTextHandler(io.Discard, nil)), retention: time.Hour, lease: time.Minute, now: time.Now}
	r := gin.New()
	r.Use(withCorrelationID(), func(c *gin.Context) {
		id := c.GetHeader("X-Test-Key")
		if id == "" {
			id = "key_test"
		}
		c.Set(principalContextKey, &auth.Principal{OrgID: c.GetHeader("X-Test-Org"), App: "pay", Kind: "sk", ID: id})
	}, m.handle)
	write := func(c *gin.Context) {
		n := srv.runs.Add(1)
		body, _ := io.ReadAll(c.Request.Body)
		if srv.release != nil {
			<-srv.release
		}
		srv.mu.Lock()
		status, code := srv.status, srv.code
		srv.mu.Unlock()
		if code != "" {
			fail(c, code, "test")
			return
		}
		c.Header("Location", "/api/v1/things/1")
		c.JSON(status, gin.H{"run": n, "echo": string(body), "correlationId": correlationID(c)})
	}
	r.POST("/things", write)
	r.GET("/things", write)
	srv.h = r
	return srv
}

func (s *idemServer) send(method, key, body string, org ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/things", strings.NewReader(body))
	if key != "" {
		req.Header.Set(idempotencyHeader, key)
	}
	req.Header.Set("X-Test-Org", "org_a")
	if len(org) > 0 {
		req.Header.Set("X-Test-Org", org[0])
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

func (s *idemServer) set(status int, code string) {
	s.mu.Lock()
	s.status, s.code = status, code
	s.mu.Unlock()
}

func TestIdempotencyReplaysTheFirstResponse(t *testing.T) {
	s := newIdemServer(t)
	first := s.send("POST", "k-1", `{"amount":"1"}`)
	second := s.send("POST", "k-1", `{"amount":"1"}`)
	if first.Code != 201 || second.Code != 201 || s.runs.Load() != 1 {
		t.Fatalf("codes %d %d, runs %d", first.Code, second.Code, s.runs.Load())
	}
	if second.Header().Get(replayedHeader) != "true" || first.Header().Get(replayedHeader) != "" {
		t.Fatal("Idempotent-Replayed must be set on the replay only")
	}
	if second.Body.String() != first.Body.String() || second.Header().Get("Location") != "/api/v1/things/1" ||
		!strings.HasPrefix(second.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("replay differs: %q %v", second.Body, second.Header())
	}
	if second.Header().Get(correlationHeader) == "" {
		t.Fatal("a replay still carries its own correlation id header")
	}
	if r := s.send("POST", "k-1", `{"amount":"1"}`, "org_b"); r.Code != 201 || s.runs.Load() != 2 {
		t.Fatal("the key is scoped to the organisation")
	}
	req := httptest.NewRequest("POST", "/things", strings.NewReader(`{"amount":"1"}`))
	req.Header.Set(idempotencyHeader, "k-1")
	req.Header.Set("X-Test-Org", "org_a")
	req.Header.Set("X-Test-Key", "key_other_credential")
	other := httptest.NewRecorder()
	s.h.ServeHTTP(other, req)
	if other.Code != 422 || !strings.Contains(other.Body.String(), apitypes.CodeIdempotencyKeyReused) {
		t.Fatalf("another credential of the organisation must not get the stored answer: %d %s", other.Code, other.Body)
	}
	if r := s.send("POST", "", `{"amount":"1"}`); r.Code != 201 || s.runs.Load() != 3 {
		t.Fatal("without a key every request runs")
	}
	if r := s.send("GET", "k-1", ""); r.Code != 201 || s.runs.Load() != 4 || r.Header().Get(replayedHeader) != "" {
		t.Fatal("reads ignore the key")
	}
}

func TestIdempotencyRejectsReuseAndBadKeys(t *testing.T) {
	s := newIdemServer(t)
	s.send("POST", "k-2", `{"amount":"1"}`)
	r := s.send("POST", "k-2", `{"amount":"2"}`)
	if r.Code != 422 || !strings.Contains(r.Body.String(), apitypes.CodeIdempotencyKeyReused) {
		t.Fatalf("reuse with another body: %d %s", r.Code, r.Body)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "tab\tkey", "ключ"} {
		r := s.send("POST", bad, `{}`)
		if r.Code != 422 || !strings.Contains(r.Body.String(), `"field":"Idempotency-Key"`) {
			t.Fatalf("key %q: %d %s", bad, r.Code, r.Body)
		}
	}
	if s.runs.Load() != 1 {
		t.Fatalf("rejected requests must not run, runs %d", s.runs.Load())
	}
}

func TestIdempotencyKeepsOnlyOutcomesARetryWouldMeetAgain(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		code     string
		keptRuns int64 // runs after two identical requests
	}{
		{"server error is released", 500, apitypes.CodeInternal, 2},
		{"unavailable is released", 503, apitypes.CodeUnavailable, 2},
		{"validation error is released", 422, apitypes.CodeValidationFailed, 2},
		{"not found is released", 404, apitypes.CodeNotFound, 2},
		{"conflict is kept", 409, apitypes.CodeConflict, 1},
		{"policy violation is kept", 422, apitypes.CodePolicyViolation, 1},
		{"success is kept", 202, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newIdemServer(t)
			s.set(tc.status, tc.code)
			a := s.send("POST", "k", `{}`)
			b := s.send("POST", "k", `{}`)
			if a.Code != tc.status || b.Code != tc.status || s.runs.Load() != tc.keptRuns {
				t.Fatalf("codes %d %d, runs %d (want %d)", a.Code, b.Code, s.runs.Load(), tc.keptRuns)
			}
		})
	}
	t.Run("a released key accepts a corrected request", func(t *testing.T) {
		s := newIdemServer(t)
		s.set(422, apitypes.CodeValidationFailed)
		s.send("POST", "k", `{"amount":"-1"}`)
		s.set(201, "")
		if r := s.send("POST", "k", `{"amount":"1"}`); r.Code != 201 {
			t.Fatalf("corrected request: %d %s", r.Code, r.Body)
		}
	})
}

func TestIdempotencyConcurrentRequestsRunOnce(t *testing.T) {
	s := newIdemServer(t)
	s.release = make(chan struct{})
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- s.send("POST", "k-c", `{"amount":"1"}`) }()
	wait.For(t, 10*time.Second, "the first request to reach its handler", func() bool { return s.runs.Load() > 0 })
	var wg sync.WaitGroup
	codes := make(chan int, 19)
	for range 19 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- s.send("POST", "k-c", `{"amount":"1"}`).Code
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusConflict {
			t.Fatalf("while the first runs, repeats get 409, got %d", code)
		}
	}
	close(s.release)
	if r := <-first; r.Code != 201 {
		t.Fatalf("first: %d", r.Code)
	}
	if r := s.send("POST", "k-c", `{"amount":"1"}`); r.Code != 201 || r.Header().Get(replayedHeader) != "true" {
		t.Fatalf("after the first finished: %d %v", r.Code, r.Header())
	}
	if s.runs.Load() != 1 {
		t.Fatalf("the handler ran %d times", s.runs.Load())
	}
}
