package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// peopleServer signs people in and accepts a request with the current session's cookie,
// and a write only with its CSRF token.
type peopleServer struct {
	t        *testing.T
	mu       sync.Mutex
	sessions int
	cookie   string
	password string
	requests []string
}

func (s *peopleServer) open(w http.ResponseWriter, status int) {
	s.sessions++
	s.cookie = fmt.Sprintf("session-%d", s.sessions)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.cookie, Path: "/", Secure: true, HttpOnly: true})
	s.describe(w, status)
}

func (s *peopleServer) describe(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"user": map[string]string{"id": "usr_1", "email": "owner@example.com",
		"role": "owner", "orgId": "org_1"}, "permissions": map[string][]string{"pay": {"read"}},
		"csrfToken": "csrf-" + s.cookie, "expiresAt": "2026-11-22T13:00:00.000Z"})
}

func (s *peopleServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	// As the service: these two answer with a new session and take no Idempotency-Key.
	if (r.URL.Path == "/api/v1/sessions" || r.URL.Path == "/api/v1/session/password") && r.Header.Get("Idempotency-Key") != "" {
		problem(422, CodeValidationFailed)(w, r)
		return
	}
	if r.URL.Path == "/api/v1/sessions" {
		var body struct{ Email, Password string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.Header.Get("Authorization") != "" || body.Email != "owner@example.com" || body.Password != s.password {
			problem(401, CodeUnauthenticated)(w, r)
			return
		}
		s.open(w, http.StatusCreated)
		return
	}
	ck, err := r.Cookie(sessionCookie)
	switch {
	case err != nil || ck.Value != s.cookie:
		problem(401, CodeUnauthenticated)(w, r)
	case isWrite(r.Method) && r.Header.Get(csrfHeader) != "csrf-"+s.cookie:
		problem(403, CodePermissionDenied)(w, r)
	case r.URL.Path == "/api/v1/session/password":
		var body struct{ CurrentPassword, NewPassword string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.CurrentPassword != s.password {
			problem(422, CodeValidationFailed)(w, r)
			return
		}
		s.password = body.NewPassword
		s.open(w, http.StatusOK)
	case r.URL.Path == "/api/v1/session" && r.Method == "DELETE":
		s.cookie = ""
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/api/v1/session":
		s.describe(w, http.StatusOK)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[],"nextCursor":null}`))
	}
}

// expire ends the current session, as its TTL or a password change elsewhere would.
func (s *peopleServer) expire() {
	s.mu.Lock()
	s.cookie = "ended"
	s.mu.Unlock()
}

func TestASessionSignsInSendsItsCSRFTokenAndSignsInAgain(t *testing.T) {
	s := &peopleServer{t: t, password: "correct horse battery"}
	c := newRESTClient(t, s.serve, WithSession("owner@example.com", "correct horse battery"), WithApp("pay"), quick)
	ctx := context.Background()
	if _, err := c.ListWebSocketConfigs(ctx, ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateWebSocketConfig(ctx, []string{"order.*"}); err != nil {
		t.Fatal(err)
	}
	s.expire()
	sess, err := c.Session(ctx)
	if err != nil || sess.User.Email != "owner@example.com" || sess.Permissions["pay"][0] != "read" || sess.ExpiresAt.IsZero() {
		t.Fatalf("%v %+v", err, sess)
	}
	if _, err := c.ChangePassword(ctx, "correct horse battery", "a new and longer one"); err != nil {
		t.Fatal(err)
	}
	s.expire()
	// The next sign-in uses the new password.
	if _, err := c.DecideApproval(ctx, DomainPayment, "apr_1", Decision{Decision: Approve}); err != nil {
		t.Fatal(err)
	}
	if err := c.SignOut(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POST /api/v1/sessions", "GET /developer/websockets?app=pay", "POST /developer/websockets?app=pay",
		"GET /api/v1/session", "POST /api/v1/sessions", "GET /api/v1/session",
		"POST /api/v1/session/password",
		"POST /api/v1/approvals/payment/apr_1/decide", "POST /api/v1/sessions", "POST /api/v1/approvals/payment/apr_1/decide",
		"DELETE /api/v1/session",
	}
	if fmt.Sprint(s.requests) != fmt.Sprint(want) {
		t.Fatalf("requests\n%q\nwant\n%q", s.requests, want)
	}
	if s.sessions != 4 {
		t.Fatalf("%d sessions opened", s.sessions)
	}
}

func TestAWrongPasswordIsAProblem(t *testing.T) {
	s := &peopleServer{t: t, password: "correct horse battery"}
	c := newRESTClient(t, s.serve, WithSession("owner@example.com", "wrong"), quick)
	_, err := c.Portfolio(context.Background())
	var p *Problem
	if !errors.As(err, &p) || p.Code != CodeUnauthenticated || len(s.requests) != 1 {
		t.Fatalf("%v after %q", err, s.requests)
	}
	if _, err := c.SignIn(context.Background()); !errors.As(err, &p) {
		t.Fatal(err)
	}
}

func TestSessionMethodsNeedASession(t *testing.T) {
	c := newRESTClient(t, http.NotFound, WithToken(restKey))
	if _, err := c.SignIn(context.Background()); err == nil {
		t.Fatal("SignIn with a key")
	}
	if err := c.FollowEvents(context.Background(), "wsc_1", nil, nil); err == nil {
		t.Fatal("FollowEvents against a server without a channel")
	}
	c = newRESTClient(t, http.NotFound, WithSession("a", "b"))
	if err := c.FollowEvents(context.Background(), "wsc_1", nil, nil); err == nil {
		t.Fatal("FollowEvents with a session and no token")
	}
}
