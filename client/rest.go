package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxBody bounds a successful answer: the largest is a page of 200 orders.
const maxBody = 8 << 20

// Client calls the REST API at {base}/api/v1 with a bearer token. It is safe for
// concurrent use.
type Client struct {
	base  string
	http  *http.Client
	key   string             // an API key, or
	oauth *clientCredentials // an OAuth client
}

// Option configures New.
type Option func(*Client)

// WithToken authenticates with an API key (sk_, tk_).
func WithToken(token string) Option { return func(c *Client) { c.key, c.oauth = token, nil } }

// WithClientCredentials authenticates as an OAuth client (RFC 6749 §4.4). scope may be
// empty (all of the client's scopes); asking for less than the client holds keeps the
// token to what the program needs.
func WithClientCredentials(clientID, clientSecret, scope string) Option {
	return func(c *Client) {
		c.key, c.oauth = "", &clientCredentials{c: c, id: clientID, secret: clientSecret, scope: scope, now: time.Now}
	}
}

// WithHTTPClient replaces the default client (30 s timeout). Keep a timeout on it.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the API at baseURL, given with or without its /api/v1 suffix.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), "/api/v1")
	c := &Client{base: base, http: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	if c.key == "" && c.oauth == nil {
		return nil, errors.New("client: no credential (WithToken or WithClientCredentials)")
	}
	return c, nil
}

// CallOption sets something on one request.
type CallOption func(*http.Request)

// WithIdempotencyKey makes a retried write safe: the server answers a repeat with the
// first answer instead of acting twice. Use a different key for each distinct write.
func WithIdempotencyKey(key string) CallOption {
	return func(r *http.Request) { r.Header.Set("Idempotency-Key", key) }
}

// Do sends body (if not nil) as JSON to path, with its query string, and decodes a 2xx
// answer into out (if not nil). Any other answer is a *Problem. path is relative to
// /api/v1, except the developer surface's (/developer/…), which sits at the root.
func (c *Client) Do(ctx context.Context, method, path string, body, out any, opts ...CallOption) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
	}
	token := c.key
	if c.oauth != nil {
		var err error
		if token, err = c.oauth.Token(ctx); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for _, o := range opts {
		o(req)
	}
	return c.roundTrip(req, method+" "+path, out)
}

// url is where path is served.
func (c *Client) url(path string) string {
	path = "/" + strings.TrimPrefix(path, "/")
	if strings.HasPrefix(path, "/developer/") {
		return c.base + path
	}
	return c.base + "/api/v1" + path
}

// roundTrip sends req and decodes a 2xx JSON answer into out, or returns the problem.
// what names the request in errors: net/http's errors quote the URL but never the
// headers, so no token or secret reaches an error.
func (c *Client) roundTrip(req *http.Request, what string, out any) error {
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return readProblem(res)
	}
	body := io.LimitReader(res.Body, maxBody)
	if out == nil || res.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, body)
		return nil
	}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("client: %s: decode the answer: %w", what, err)
	}
	return nil
}

// Problem is a non-2xx answer: an RFC 9457 problem, or for the token endpoint an
// RFC 6749 error (Code is its "error").
type Problem struct {
	Status        int          `json:"status"`
	Code          string       `json:"code"`
	Detail        string       `json:"detail"`
	CorrelationID string       `json:"correlationId"`
	Errors        []FieldError `json:"errors,omitempty"`
	Violations    []Violation  `json:"violations,omitempty"`
}

// FieldError names one invalid field of a request (validation_failed).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Violation is one policy rule an order broke (policy_violation).
type Violation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

func (p *Problem) Error() string {
	s := strings.TrimSpace(fmt.Sprintf("HTTP %d %s", p.Status, p.Code)) + ": " + p.Detail
	for _, f := range p.Errors {
		s += "; " + f.Field + " " + f.Message
	}
	for _, v := range p.Violations {
		s += "; " + v.Rule + ": " + v.Message
	}
	if p.CorrelationID != "" {
		s += " (correlation id " + p.CorrelationID + ")"
	}
	return printable(s)
}

// Temporary reports whether the same request may succeed later. Only resend a write
// that carries an idempotency key.
func (p *Problem) Temporary() bool {
	return p.Status == http.StatusTooManyRequests || p.Status >= 500 || p.Code == "idempotency_key_in_use"
}

func readProblem(res *http.Response) *Problem {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxProblem))
	var doc struct {
		Problem
		Title string `json:"title"`
		// The token endpoint answers per RFC 6749 §5.2 instead.
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	_ = json.Unmarshal(raw, &doc)
	p := doc.Problem
	p.Status = res.StatusCode
	p.Code = cmp.Or(p.Code, doc.Error)
	p.Detail = cmp.Or(p.Detail, doc.ErrorDescription, doc.Title, http.StatusText(res.StatusCode))
	p.CorrelationID = cmp.Or(p.CorrelationID, res.Header.Get("X-Correlation-Id"))
	return &p
}

// clientCredentials fetches access tokens and reuses each until shortly before it
// expires, so that no request leaves with a token about to lapse.
type clientCredentials struct {
	c                 *Client
	id, secret, scope string
	now               func() time.Time

	mu      sync.Mutex // held across a fetch, so that concurrent callers share one
	token   string
	refresh time.Time
}

func (cc *clientCredentials) Token(ctx context.Context) (string, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.token != "" && cc.now().Before(cc.refresh) {
		return cc.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if cc.scope != "" {
		form.Set("scope", cc.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cc.c.base+"/api/v1/oauth/token",
		strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("client: token: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// RFC 6749 §2.3.1: the Basic credentials are form-encoded first.
	req.SetBasicAuth(url.QueryEscape(cc.id), url.QueryEscape(cc.secret))
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	start := cc.now()
	if err := cc.c.roundTrip(req, "POST /oauth/token", &t); err != nil {
		return "", err
	}
	if t.AccessToken == "" {
		return "", errors.New("client: POST /oauth/token: the answer holds no access_token")
	}
	// Renew a minute early, or halfway through a lifetime shorter than two minutes. The
	// lifetime counts from before the request was sent, so a slow answer cannot stretch it.
	life := time.Duration(t.ExpiresIn) * time.Second
	cc.token, cc.refresh = t.AccessToken, start.Add(life-min(time.Minute, life/2))
	return cc.token, nil
}
