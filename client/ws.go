package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/wshub/closecode"
)

// Frame types the server sends.
const (
	FrameReady = "connection.ready"
	FrameEvent = "event"
	FramePong  = "pong"
)

var closeMeaning = map[int]string{
	closecode.GoingAway:      "server restarting",
	closecode.ConfigDisabled: "config disabled",
	closecode.Credential:     "credential revoked",
	closecode.ConfigDeleted:  "config deleted",
	closecode.TooSlow:        "too slow",
}

const (
	defaultHandshakeTimeout = 10 * time.Second
	// The server pings every 25 s; pinging a little more often keeps idle proxies from
	// dropping the connection and lets a dead one be noticed from this side too.
	defaultPingInterval = 20 * time.Second
	defaultPongWait     = 10 * time.Second
	defaultWriteTimeout = 5 * time.Second
	defaultMinBackoff   = time.Second
	defaultMaxBackoff   = 30 * time.Second
	// closeGrace is how long a closing client waits for the server's answer to its close
	// frame, so that the server sees a clean close rather than a dropped connection.
	closeGrace = time.Second
	// maxFrame bounds one server frame; events are a few hundred bytes.
	maxFrame = 1 << 20
	// maxProblem bounds how much of a refusal's body is read.
	maxProblem = 16 << 10
)

var pingFrame = []byte(`{"type":"ping"}`)

// Frame is one message of the server. Fields not used by its type are empty.
type Frame struct {
	Type string `json:"type"`
	// connection.ready
	ConfigID string   `json:"configId,omitempty"`
	Events   []string `json:"events,omitempty"`
	Scope    string   `json:"scope,omitempty"`
	// event
	Event string          `json:"event,omitempty"`
	At    string          `json:"at,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
	// Raw is the frame as the server sent it.
	Raw []byte `json:"-"`
}

// ErrStop, returned by a frame handler, ends Subscribe or Follow without an error.
var ErrStop = errors.New("client: stop")

// RefusedError is a refusal before the upgrade: the server answered with an HTTP
// problem instead of switching protocols.
type RefusedError struct {
	Status        int
	Code          string // the problem's code, e.g. unauthenticated; empty if the body was not a problem
	Detail        string
	CorrelationID string
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("refused: HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	s += ": " + e.Detail
	if e.CorrelationID != "" {
		s += " (correlation id " + e.CorrelationID + ")"
	}
	return s
}

// Temporary reports whether trying again later may succeed: rate limited or a server
// failure. A 401, 403 or 404 will be answered the same way every time.
func (e *RefusedError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ClosedError is the server's close frame.
type ClosedError struct {
	Code   int
	Reason string
}

func (e *ClosedError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = closeMeaning[e.Code]
	}
	if reason == "" {
		return fmt.Sprintf("closed by the server with code %d", e.Code)
	}
	return fmt.Sprintf("closed by the server with code %d (%s)", e.Code, reason)
}

// Reconnect reports whether the code asks the client to come back: 1001 (restarting)
// and 4000–4499.
func (e *ClosedError) Reconnect() bool {
	return e.Code == closecode.GoingAway || (e.Code >= 4000 && e.Code <= 4499)
}

// NetworkError is a connection that could not be made, or that was lost without a
// close frame (including a server that fell silent); for a REST call, a request that got
// no answer, which the client retries.
type NetworkError struct {
	Op  string
	Err error
}

func (e *NetworkError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *NetworkError) Unwrap() error { return e.Err }

// Options tune the connection; the zero value is fine.
type Options struct {
	// HandshakeTimeout bounds the dial and the upgrade (10 s).
	HandshakeTimeout time.Duration
	// PingInterval is how often the client sends {"type":"ping"} (20 s).
	PingInterval time.Duration
	// PongWait is how long past PingInterval the connection may stay silent before it
	// counts as lost (10 s). The server's protocol pings and pongs count as traffic.
	PongWait time.Duration
	// WriteTimeout bounds each write (5 s).
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound Follow's wait between attempts (1 s doubling to 30 s).
	MinBackoff, MaxBackoff time.Duration
	// OnRetry, if set, hears of each failure Follow recovers from, before it waits.
	OnRetry func(err error, wait time.Duration)
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&v.HandshakeTimeout, defaultHandshakeTimeout)
	set(&v.PingInterval, defaultPingInterval)
	set(&v.PongWait, defaultPongWait)
	set(&v.WriteTimeout, defaultWriteTimeout)
	set(&v.MinBackoff, defaultMinBackoff)
	set(&v.MaxBackoff, defaultMaxBackoff)
	if v.MaxBackoff < v.MinBackoff {
		v.MaxBackoff = v.MinBackoff
	}
	return v
}

// ChannelURL is the address of a config's live channel. base is where the API answers:
// http(s) becomes ws(s), ws(s) is kept; a path ending in /api/v1 (as the dev bundle
// prints it) or /api/v1/ws is accepted too.
func ChannelURL(base, configID, token string) (string, error) {
	// The base URL never holds the token, so errors may quote it.
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", fmt.Errorf("base URL: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("base URL %q: want http, https, ws or wss", base)
	}
	if u.Host == "" {
		return "", fmt.Errorf("base URL %q has no host", base)
	}
	path := strings.TrimSuffix(u.Path, "/")
	if p, ok := strings.CutSuffix(path, "/api/v1/ws"); ok {
		path = p
	} else {
		path = strings.TrimSuffix(path, "/api/v1")
	}
	u.Path, u.RawPath = path+"/api/v1/ws", ""
	u.RawQuery = url.Values{"id": {configID}, "token": {token}}.Encode()
	u.Fragment = ""
	return u.String(), nil
}

// Subscribe opens one connection to a config's live channel and calls handle with each
// frame, in order: connection.ready first, then events and pongs. It keeps the
// connection alive with pings and returns
//   - nil when ctx is done or handle returns ErrStop (the connection is closed with 1000);
//   - handle's error, if any other;
//   - *RefusedError when the server refused the upgrade;
//   - *ClosedError when the server closed the connection;
//   - *NetworkError when the connection failed or fell silent.
func Subscribe(ctx context.Context, baseURL, configID, token string, handle func(Frame) error, opts *Options) error {
	o := opts.withDefaults()
	u, err := ChannelURL(baseURL, configID, token)
	if err != nil {
		return err
	}
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: o.HandshakeTimeout}
	ws, res, err := dialer.DialContext(ctx, u, nil)
	if err != nil {
		if res != nil {
			defer res.Body.Close()
			return refusal(res)
		}
		if ctx.Err() != nil {
			return nil
		}
		return &NetworkError{Op: "connect", Err: redact(err, token)}
	}
	defer ws.Close()
	ws.SetReadLimit(maxFrame)

	// Any traffic from the server proves the connection alive; the client's own pings
	// make sure there is some at least every PingInterval.
	silence := o.PingInterval + o.PongWait
	_ = ws.SetReadDeadline(time.Now().Add(silence))
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(silence))
		// A failed pong shows up as a failed read soon enough.
		_ = ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(o.WriteTimeout))
		return nil
	})

	done := make(chan struct{})
	defer close(done)
	go keepAlive(ctx, ws, o, done)

	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ce *websocket.CloseError
			// 1006 is gorilla's name for a connection that ended without a close frame.
			if errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure {
				return &ClosedError{Code: ce.Code, Reason: ce.Text}
			}
			return &NetworkError{Op: "read", Err: redact(err, token)}
		}
		_ = ws.SetReadDeadline(time.Now().Add(silence))
		var f Frame
		if err := json.Unmarshal(data, &f); err != nil {
			closeGracefully(ws, o, websocket.CloseUnsupportedData)
			return fmt.Errorf("the server sent a frame that is not JSON: %w", err)
		}
		f.Raw = data
		if err := handle(f); err != nil {
			closeGracefully(ws, o, websocket.CloseNormalClosure)
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
}

// keepAlive is the connection's only writer of data frames: the pings. When ctx ends it
// closes the connection with 1000, giving the server a moment to answer.
func keepAlive(ctx context.Context, ws *websocket.Conn, o Options, done <-chan struct{}) {
	ticker := time.NewTicker(o.PingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
				time.Now().Add(o.WriteTimeout))
			select {
			case <-done:
			case <-time.After(closeGrace):
				_ = ws.Close()
			}
			return
		case <-ticker.C:
			_ = ws.SetWriteDeadline(time.Now().Add(o.WriteTimeout))
			if err := ws.WriteMessage(websocket.TextMessage, pingFrame); err != nil {
				// The reader notices the broken connection; nothing more to write.
				return
			}
		}
	}
}

// closeGracefully sends a close frame and reads until the server answers it or
// closeGrace passes. Only the reading goroutine calls it.
func closeGracefully(ws *websocket.Conn, o Options, code int) {
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(o.WriteTimeout))
	_ = ws.SetReadDeadline(time.Now().Add(closeGrace))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
	}
}

// refusal reads the problem document of a refused upgrade.
func refusal(res *http.Response) *RefusedError {
	e := &RefusedError{Status: res.StatusCode, CorrelationID: res.Header.Get("X-Correlation-Id")}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxProblem))
	var p struct {
		Code   string `json:"code"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil {
		e.Code, e.Detail = p.Code, p.Detail
		if e.Detail == "" {
			e.Detail = p.Title
		}
	}
	if e.Detail == "" {
		e.Detail = http.StatusText(res.StatusCode)
		if res.StatusCode == http.StatusOK {
			e.Detail = "not a WebSocket endpoint"
		}
	}
	return e
}

// redact keeps the token out of an error's text: some errors quote the URL, which
// carries it.
func redact(err error, token string) error {
	if err == nil || token == "" {
		return err
	}
	msg := err.Error()
	clean := strings.ReplaceAll(msg, token, "[token]")
	clean = strings.ReplaceAll(clean, url.QueryEscape(token), "[token]")
	if clean == msg {
		return err
	}
	return errors.New(clean)
}

// Follow keeps a config's live channel open, calling handle with every frame of every
// connection (each begins with connection.ready). After a close with 1001 or 4000–4499,
// a 429 or 5xx refusal, or a lost connection once one has worked, it waits (MinBackoff,
// doubling to MaxBackoff) and connects again. It returns nil when ctx is done or handle
// returns ErrStop, and the first error it does not recover from otherwise: a 401, 403
// or 404 (a deleted config, a revoked key) ends it even on a reconnection.
func Follow(ctx context.Context, baseURL, configID, token string, handle func(Frame) error, opts *Options) error {
	return followWithTokens(ctx, baseURL, configID, func(context.Context) (string, error) { return token, nil }, handle, opts)
}

// followWithTokens is Follow with a token asked for at each connection, so that an expired OAuth
// access token (closed with 4003) is replaced on the reconnection.
func followWithTokens(ctx context.Context, baseURL, configID string, token func(context.Context) (string, error),
	handle func(Frame) error, opts *Options) error {
	o := opts.withDefaults()
	backoff := o.MinBackoff
	connected := false
	for {
		var readyAt time.Time
		tok, err := token(ctx)
		if err == nil {
			err = Subscribe(ctx, baseURL, configID, tok, func(f Frame) error {
				if f.Type == FrameReady {
					readyAt, connected = time.Now(), true
				}
				return handle(f)
			}, &o)
			if err == nil {
				return nil
			}
		} else if ctx.Err() != nil {
			return nil
		}
		// A connection that lasted resets the backoff; one closed at once (a disabled
		// config is closed 4001 right after it opens) keeps doubling it.
		if !readyAt.IsZero() && time.Since(readyAt) >= o.MaxBackoff {
			backoff = o.MinBackoff
		}
		if !retryable(err, connected) {
			return err
		}
		if o.OnRetry != nil {
			o.OnRetry(err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

// retryable says whether Follow should try again after err. A network failure before
// any connection worked is more likely a wrong address than an outage, so it is final.
func retryable(err error, connectedBefore bool) bool {
	var ce *ClosedError
	if errors.As(err, &ce) {
		return ce.Reconnect()
	}
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Temporary()
	}
	// The token endpoint's answer, when an OAuth token could not be had.
	var p *Problem
	if errors.As(err, &p) {
		return p.Temporary()
	}
	var ne *NetworkError
	if errors.As(err, &ne) {
		return connectedBefore
	}
	return false
}
