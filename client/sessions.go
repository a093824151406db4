package client

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/opentreasury/treasury/apitypes"
)

// The session's cookie and the header that must carry its CSRF token on writes
// (docs/api.md, People: sign-in and sessions).
const (
	sessionCookie = "treasury_session"
	csrfHeader    = "X-CSRF-Token"
)

// WithSession acts as a person (the organisation's owner or a member), signed in with an
// e-mail address and a password as in the console. The client signs in at its first call,
// sends the session's cookie with every request and its CSRF token with every write, and
// signs in again when the API no longer takes the session. A person acts with their
// permissions as they stand at each request; name the app of the developer routes with
// WithApp. The live channel takes tokens only: give FollowEvents one.
func WithSession(email, password string) Option {
	return func(c *Client) { c.cred = &session{c: c, email: email, password: password} }
}

// Session is a person's signed-in session. The client sends its CSRFToken with every
// write.
type Session = apitypes.Session

// User is a person of the organisation.
type User = apitypes.User

// session signs in when it has no session, and keeps the cookie and the CSRF token.
type session struct {
	c               *Client
	email, password string

	mu     sync.Mutex // held across a sign-in, so that concurrent callers share one
	cookie string
	csrf   string
}

func (s *session) authorize(ctx context.Context, req *http.Request) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cookie == "" {
		if _, err := s.signIn(ctx); err != nil {
			return "", err
		}
	}
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: s.cookie})
	if isWrite(req.Method) {
		req.Header.Set(csrfHeader, s.csrf)
	}
	return s.cookie, nil
}

func (s *session) renew(used string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cookie == used {
		s.cookie, s.csrf = "", ""
	}
	return true
}

func (s *session) channelToken(context.Context) (string, error) {
	return "", errors.New("client: the live channel does not take a session; give FollowOptions.Token (a pk_ key of the app)")
}

// signIn opens a new session. s.mu is held.
func (s *session) signIn(ctx context.Context) (*Session, error) {
	var out Session
	var header http.Header
	err := s.c.send(ctx, call{method: http.MethodPost, path: "/sessions", anonymous: true, unkeyed: true, header: &header, out: &out,
		body: map[string]string{"email": s.email, "password": s.password}})
	if err != nil {
		return nil, err
	}
	return &out, s.adopt(&out, header)
}

// adopt keeps the session an answer opened. s.mu is held.
func (s *session) adopt(out *Session, header http.Header) error {
	for _, ck := range (&http.Response{Header: header}).Cookies() {
		if ck.Name == sessionCookie && ck.Value != "" {
			s.cookie, s.csrf = ck.Value, out.CSRFToken
			return nil
		}
	}
	return errors.New("client: the answer sets no " + sessionCookie + " cookie")
}

func (c *Client) session(what string) (*session, error) {
	s, ok := c.cred.(*session)
	if !ok {
		return nil, errors.New("client: " + what + " needs a client made WithSession")
	}
	return s, nil
}

// SignIn signs in now (POST /sessions), replacing the client's session, and returns the
// new one. Calls sign in by themselves; SignIn checks the password up front.
func (c *Client) SignIn(ctx context.Context) (*Session, error) {
	s, err := c.session("SignIn")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signIn(ctx)
}

// Session returns the client's session (GET /session), signing in first if needed.
func (c *Client) Session(ctx context.Context, opts ...CallOption) (*Session, error) {
	if _, err := c.session("Session"); err != nil {
		return nil, err
	}
	return get[Session](ctx, c, "/session", opts)
}

// SignOut ends the client's session on every replica (DELETE /session). A later call
// signs in again.
func (c *Client) SignOut(ctx context.Context, opts ...CallOption) error {
	s, err := c.session("SignOut")
	if err != nil {
		return err
	}
	if err := c.send(ctx, call{method: http.MethodDelete, path: "/session", opts: opts}); err != nil {
		return err
	}
	s.mu.Lock()
	s.cookie, s.csrf = "", ""
	s.mu.Unlock()
	return nil
}

// ChangePassword changes the person's password (POST /session/password; 12 to 72 bytes).
// Every session of the person ends; the client goes on with the new one the answer opens.
// It is sent once, never retried, and without an Idempotency-Key, which the server refuses
// on it (its answer is a new session, never stored to replay).
func (c *Client) ChangePassword(ctx context.Context, current, next string, opts ...CallOption) (*Session, error) {
	s, err := c.session("ChangePassword")
	if err != nil {
		return nil, err
	}
	var out Session
	var header http.Header
	err = c.send(ctx, call{method: http.MethodPost, path: "/session/password", opts: opts, once: true, unkeyed: true, header: &header,
		out: &out, body: map[string]string{"currentPassword": current, "newPassword": next}})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.password = next
	return &out, s.adopt(&out, header)
}
