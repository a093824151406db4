package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// credential authenticates the client's requests.
type credential interface {
	// authorize puts the credential on req, first fetching a token or signing in when
	// there is none yet; used names what it put, for renew.
	authorize(ctx context.Context, req *http.Request) (used string, err error)
	// renew forgets used, which the API refused, so that the next authorize gets another;
	// false when there is nothing to renew (a key is what it is).
	renew(used string) bool
	// channelToken is the token that opens the live channel.
	channelToken(ctx context.Context) (string, error)
}

// apiKey is an sk_, tk_ or pk_ key.
type apiKey string

func (k apiKey) authorize(_ context.Context, req *http.Request) (string, error) {
	req.Header.Set("Authorization", "Bearer "+string(k))
	return string(k), nil
}

func (apiKey) renew(string) bool { return false }

func (k apiKey) channelToken(context.Context) (string, error) { return string(k), nil }

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

func (cc *clientCredentials) authorize(ctx context.Context, req *http.Request) (string, error) {
	token, err := cc.Token(ctx)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return token, nil
}

func (cc *clientCredentials) renew(used string) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	// Another caller may have renewed it already.
	if cc.token == used {
		cc.token = ""
	}
	return true
}

// channelToken is a token of its own for each connection: the server closes a connection
// (4003) when its token expires, and the reconnection needs a token that has not.
func (cc *clientCredentials) channelToken(ctx context.Context) (string, error) { return cc.Token(ctx) }

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
	if err := cc.c.roundTrip(req, "POST /oauth/token", &t, nil); err != nil {
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
