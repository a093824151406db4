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
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
)

// maxBody bounds a successful answer: the largest is a page of 200 orders.
const maxBody = 8 << 20

// Client calls the REST API at {base}/api/v1 with an API key, OAuth client credentials
// or a person's session. It is safe for concurrent use. Every call is retried by the
// client's RetryPolicy, and every write carries an Idempotency-Key, so that a retry never
// acts twice.
type Client struct {
	base  string
	http  *http.Client
	cred  credential
	retry RetryPolicy
	// app is the ?app= of the developer routes, which a person must name.
	app string
}

// Option configures New.
type Option func(*Client)

// WithToken authenticates with an API key (sk_, tk_).
func WithToken(token string) Option { return func(c *Client) { c.cred = apiKey(token) } }

// WithClientCredentials authenticates as an OAuth client (RFC 6749 §4.4). scope may be
// empty (all of the client's scopes); asking for less than the client holds keeps the
// token to what the program needs. The client fetches the access token itself, renews it
// before it expires, and fetches another when the API refuses one (a revoked token).
func WithClientCredentials(clientID, clientSecret, scope string) Option {
	return func(c *Client) {
		c.cred = &clientCredentials{c: c, id: clientID, secret: clientSecret, scope: scope, now: time.Now}
	}
}

// WithHTTPClient replaces the default client (30 s timeout). Keep a timeout on it.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithApp names the app of the developer routes (/developer/…) as their ?app=. A person
// signed in with WithSession must name one; a key may name only its own, and needs none.
func WithApp(app string) Option { return func(c *Client) { c.app = app } }

// New returns a client of the API at baseURL, given with or without its /api/v1 suffix.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), "/api/v1")
	c := &Client{base: base, http: &http.Client{Timeout: 30 * time.Second}, retry: defaultRetryPolicy}
	for _, o := range opts {
		o(c)
	}
	if c.cred == nil {
		return nil, errors.New("client: no credential (WithToken, WithClientCredentials or WithSession)")
	}
	return c, nil
}

// CallOption sets something on one call: a header of every attempt, or where to report
// how it was answered.
type CallOption struct {
	header, value string
	answer        *Answer
}

// WithIdempotencyKey makes a retried write safe: the server answers a repeat with the
// first answer instead of acting twice. Every write already carries a random key, the same
// on each of its retries; give your own to make a write safe across runs of your program
// (a job that may be restarted), a different one for each distinct write.
func WithIdempotencyKey(key string) CallOption {
	return CallOption{header: "Idempotency-Key", value: key}
}

// WithCorrelationID sends the request's X-Correlation-Id (1–128 characters of
// A-Z a-z 0-9 . _ : -), so that the service's logs, audit records and events of the
// request can be found by an id of your own.
func WithCorrelationID(id string) CallOption {
	return CallOption{header: correlationHeader, value: id}
}

const correlationHeader = "X-Correlation-Id"

// Answer is what a successful call's answer said besides its body.
type Answer struct {
	// Replayed: the service answered with its stored first answer to this Idempotency-Key
	// (the Idempotent-Replayed header); the write was not made again.
	Replayed bool
	// CorrelationID is the answer's X-Correlation-Id, to find the request in the logs.
	CorrelationID string
}

// WithAnswer fills a with how the call was answered once it succeeds.
func WithAnswer(a *Answer) CallOption { return CallOption{answer: a} }

// Do sends body (if not nil) as JSON to path, with its query string, and decodes a 2xx
// answer into out (if not nil). Any other answer is a *Problem, and a request that could
// not be sent or answered a *NetworkError. path is relative to /api/v1, except the
// developer surface's (/developer/…) and /healthz and /readyz, which sit at the root.
// Do retries as the client's RetryPolicy says, and gives a write an Idempotency-Key
// unless opts does.
func (c *Client) Do(ctx context.Context, method, path string, body, out any, opts ...CallOption) error {
	return c.send(ctx, call{method: method, path: path, body: body, out: out, opts: opts})
}

// call is one request of the API, sent as often as the retry policy allows.
type call struct {
	method, path string
	body, out    any
	opts         []CallOption
	// anonymous calls carry no credential: signing in, health, the OpenAPI document.
	anonymous bool
	// once marks a call whose effect no Idempotency-Key protects (a password change).
	once bool
	// unkeyed marks a write whose answer carries a new secret (a session): the service
	// refuses an Idempotency-Key on it, since such an answer is never stored to replay.
	unkeyed bool
	// header, if set, receives the headers of the successful answer.
	header *http.Header
}

func (c *Client) send(ctx context.Context, r call) error {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("client: encode %s %s: %w", r.method, r.path, err)
		}
	}
	idempotencyKey := ""
	if isWrite(r.method) && !r.unkeyed {
		idempotencyKey = newIdempotencyKey()
	}
	attempts := c.retry.Attempts
	if r.once {
		attempts = 1
	}
	renewed := false
	for attempt := 1; ; attempt++ {
		used, err := c.attempt(ctx, r, payload, idempotencyKey)
		if err == nil {
			return nil
		}
		var p *Problem
		isProblem := errors.As(err, &p)
		// A token or session the API no longer takes (revoked, expired early) is renewed
		// once; the refused request never ran, so this costs no attempt.
		if isProblem && p.Status == http.StatusUnauthorized && used != "" && !renewed && c.cred.renew(used) {
			renewed = true
			attempt--
			continue
		}
		if attempt >= attempts || !temporary(err) {
			return err
		}
		var retryAfter time.Duration
		if isProblem {
			retryAfter = p.RetryAfter
		}
		if !sleep(ctx, c.retry.wait(attempt, retryAfter)) {
			return err
		}
	}
}

// attempt sends the call once. used is the credential it carried, "" when it carried none.
func (c *Client) attempt(ctx context.Context, r call, payload []byte, idempotencyKey string) (used string, err error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.url(r.path), body)
	if err != nil {
		return "", fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if q := req.URL.Query(); c.app != "" && isDeveloperRoute(req.URL.Path) && !q.Has("app") {
		q.Set("app", c.app)
		req.URL.RawQuery = q.Encode()
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	if !r.anonymous {
		if used, err = c.cred.authorize(ctx, req); err != nil {
			return "", err
		}
	}
	for _, o := range r.opts {
		if o.header != "" {
			req.Header.Set(o.header, o.value)
		}
	}
	var answered http.Header
	header := cmp.Or(r.header, &answered)
	if err := c.roundTrip(req, r.method+" "+r.path, r.out, header); err != nil {
		return used, err
	}
	for _, o := range r.opts {
		if o.answer != nil {
			*o.answer = Answer{Replayed: header.Get("Idempotent-Replayed") == "true", CorrelationID: header.Get(correlationHeader)}
		}
	}
	return used, nil
}

// url is where path is served.
func (c *Client) url(path string) string {
	path = "/" + strings.TrimPrefix(path, "/")
	route, _, _ := strings.Cut(path, "?")
	if isDeveloperRoute(route) || route == "/healthz" || route == "/readyz" {
		return c.base + path
	}
	return c.base + "/api/v1" + path
}

// isDeveloperRoute: the developer surface sits at the root (SPEC 6).
func isDeveloperRoute(route string) bool { return strings.HasPrefix(route, "/developer/") }

// roundTrip sends req and decodes a 2xx JSON answer into out, or returns the problem.
// what names the request in errors: net/http's errors quote the URL but never the
// headers, so no token or secret reaches an error.
func (c *Client) roundTrip(req *http.Request, what string, out any, header *http.Header) error {
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return transportError(req.Context(), what, err)
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return readProblem(res)
	}
	// Read whole before decoding: a connection lost mid-answer is a network failure,
	// worth a retry, where a malformed answer is not.
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return transportError(req.Context(), what, err)
	}
	if len(raw) > maxBody {
		return fmt.Errorf("client: %s: the answer is larger than %d bytes", what, maxBody)
	}
	if header != nil {
		*header = res.Header
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b = raw // an answer that is not one JSON value (an export)
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("client: %s: decode the answer: %w", what, err)
	}
	return nil
}

// transportError is a request that got no answer: a *NetworkError, which is retried,
// unless the caller's context ended it.
func transportError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	return &NetworkError{Op: "client: " + what, Err: err}
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Problem is a non-2xx answer: an RFC 9457 problem, or for the token endpoint an
// RFC 6749 error (Code is its "error"). Find it with errors.As and branch on Code.
type Problem struct {
	Status        int          `json:"status"`
	Code          string       `json:"code"`
	Detail        string       `json:"detail"`
	CorrelationID string       `json:"correlationId"`
	Errors        []FieldError `json:"errors,omitempty"`
	Violations    []Violation  `json:"violations,omitempty"`
	// RetryAfter is how long the server asked the client to wait (429, some 503s).
	RetryAfter time.Duration `json:"-"`
}

// Problem codes (docs/errors.md): branch on these, never on Detail.
const (
	CodeUnauthenticated      = apitypes.CodeUnauthenticated
	CodePermissionDenied     = apitypes.CodePermissionDenied
	CodeMakerChecker         = apitypes.CodeMakerChecker
	CodeNotFound             = apitypes.CodeNotFound
	CodeConflict             = apitypes.CodeConflict
	CodeAlreadyDecided       = apitypes.CodeAlreadyDecided
	CodeIdempotencyKeyInUse  = apitypes.CodeIdempotencyKeyInUse
	CodeValidationFailed     = apitypes.CodeValidationFailed
	CodeIdempotencyKeyReused = apitypes.CodeIdempotencyKeyReused
	CodePolicyViolation      = apitypes.CodePolicyViolation
	CodeInvalidSignature     = apitypes.CodeInvalidSignature
	CodePayloadTooLarge      = apitypes.CodePayloadTooLarge
	CodeUnsupportedMedia     = apitypes.CodeUnsupportedMediaType
	CodeRateLimited          = apitypes.CodeRateLimited
	CodeInternal             = apitypes.CodeInternal
	CodeUnavailable          = apitypes.CodeUnavailable
)

// FieldError names one invalid field of a request (validation_failed).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Violation is one policy rule an order broke (policy_violation).
type Violation = events.Violation

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
// that carries an idempotency key (the client's calls retry these by themselves).
func (p *Problem) Temporary() bool {
	return p.Status == http.StatusTooManyRequests || p.Status >= 500 || p.Code == CodeIdempotencyKeyInUse
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
	p.CorrelationID = cmp.Or(p.CorrelationID, res.Header.Get(correlationHeader))
	p.RetryAfter = retryAfter(res.Header, time.Now())
	return &p
}
