package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store"
)

func (f *fixture) token(t *testing.T, form url.Values, basicID, basicSecret string) (int, map[string]any, *httptest.ResponseRecorder) {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/v1/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicID != "" {
		req.SetBasicAuth(url.QueryEscape(basicID), url.QueryEscape(basicSecret))
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, body, rec
}

func TestOAuthClientCredentials(t *testing.T) {
	f := newFixture(t)
	client := f.creds.OAuthClients["trade"]
	grant := url.Values{"grant_type": {"client_credentials"}}

	status, body, rec := f.token(t, grant, client.ClientID, client.ClientSecret)
	if status != 200 || body["token_type"] != "Bearer" || body["expires_in"] != float64(900) || body["scope"] != "trade:read trade:write" ||
		rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("basic auth: %d %v %v", status, body, rec.Header())
	}
	full := body["access_token"].(string)
	if r := f.do(t, "GET", "/api/v1/trade-orders", full, nil); r.status != 200 {
		t.Fatalf("the token reads: %d", r.status)
	}
	order := `{"walletId":"` + f.creds.Wallets[0].ID + `","sellAsset":"ETH","buyAsset":"USDC","sellAmount":"1","maxSlippageBps":10}`
	if r := f.post(t, "/api/v1/trade-orders", full, order); r.status != 201 {
		t.Fatalf("the token writes: %d %s", r.status, r.body)
	}
	f.do(t, "GET", "/api/v1/payments", full, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/api/v1/approvals", full, nil) // read on trade: allowed to list

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {client.ClientID}, "client_secret": {client.ClientSecret}, "scope": {"trade:read"}}
	status, body, _ = f.token(t, form, "", "")
	if status != 200 || body["scope"] != "trade:read" {
		t.Fatalf("form auth with a narrower scope: %d %v", status, body)
	}
	readOnly := body["access_token"].(string)
	f.post(t, "/api/v1/trade-orders", readOnly, order).wantProblem(t, 403, apitypes.CodePermissionDenied)

	cases := []struct {
		name        string
		form        url.Values
		id, secret  string
		status      int
		code        string
		wwwAuthBsic bool
	}{
		{"wrong secret", grant, client.ClientID, "nope", 401, "invalid_client", true},
		{"unknown client", grant, "oac_nope", "nope", 401, "invalid_client", true},
		{"no credentials", grant, "", "", 401, "invalid_client", false},
		{"scope beyond the client", url.Values{"grant_type": {"client_credentials"}, "scope": {"trade:approve"}}, client.ClientID, client.ClientSecret, 400, "invalid_scope", false},
		{"scope of another app", url.Values{"grant_type": {"client_credentials"}, "scope": {"pay:read"}}, client.ClientID, client.ClientSecret, 400, "invalid_scope", false},
		{"other grant", url.Values{"grant_type": {"password"}}, client.ClientID, client.ClientSecret, 400, "unsupported_grant_type", false},
		{"no grant", url.Values{}, client.ClientID, client.ClientSecret, 400, "invalid_request", false},
		{"two ways of authenticating", url.Values{"grant_type": {"client_credentials"}, "client_id": {client.ClientID}}, client.ClientID, client.ClientSecret, 400, "invalid_request", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body, rec := f.token(t, tc.form, tc.id, tc.secret)
			if status != tc.status || body["error"] != tc.code || body["error_description"] == "" {
				t.Fatalf("%d %v", status, body)
			}
			if tc.wwwAuthBsic && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic") {
				t.Fatalf("401 for Basic credentials without WWW-Authenticate: %v", rec.Header())
			}
		})
	}

	// An expired token, and the tokens of a revoked client, are refused.
	expired := "at_expiredexpiredexpiredexpiredexpiredexpired00"
	if err := f.store.CreateOAuthToken(context.Background(), &store.OAuthToken{TokenHash: hashOf(expired), ClientID: client.ClientID,
		OrgID: f.creds.OrgID, App: "trade", Actions: "read", Scope: "trade:read", CreatedAt: time.Now().Add(-time.Hour),
		ExpiresAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	f.do(t, "GET", "/api/v1/trade-orders", expired, nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if err := f.store.RevokeOAuthClient(context.Background(), f.creds.OrgID, client.ClientID, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.do(t, "GET", "/api/v1/trade-orders", full, nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	if status, body, _ := f.token(t, grant, client.ClientID, client.ClientSecret); status != 401 || body["error"] != "invalid_client" {
		t.Fatalf("a revoked client gets no token: %d %v", status, body)
	}
	for _, secret := range []string{client.ClientSecret, full, readOnly} {
		if strings.Contains(f.logs.String(), secret) {
			t.Fatal("a secret appeared in the logs")
		}
	}
}

// Every write takes an Idempotency-Key (the seed's words); the three whose answer is a new
// secret, never stored, take it and ignore it: each repeat simply runs and gets a secret of
// its own, never a replay and never a refusal.
func TestSecretIssuingWritesTakeAnIdempotencyKeyAndIgnoreIt(t *testing.T) {
	f, _ := newPeopleFixture(t)
	client := f.creds.OAuthClients["trade"]
	form := url.Values{"grant_type": {"client_credentials"}}
	var tokens []string
	for range 2 {
		req := httptest.NewRequest("POST", "/api/v1/oauth/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(idempotencyHeader, "token-once")
		req.SetBasicAuth(client.ClientID, client.ClientSecret)
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, req)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		token, _ := body["access_token"].(string)
		if rec.Code != 200 || token == "" || rec.Header().Get(replayedHeader) != "" {
			t.Fatalf("a token under an Idempotency-Key: %d %v %s", rec.Code, rec.Header(), rec.Body)
		}
		tokens = append(tokens, token)
	}
	if tokens[0] == tokens[1] {
		t.Fatal("the second token request was answered with the first's token")
	}

	var sessions []signedIn
	for range 2 {
		r := f.trySignIn(t, "192.0.2.7:1", f.creds.Owner.Email, f.creds.Owner.Password, idempotencyHeader, "sign-in-once")
		if r.status != 201 || r.header.Get(replayedHeader) != "" {
			t.Fatalf("a sign-in under an Idempotency-Key: %d %s", r.status, r.body)
		}
		cookies := (&http.Response{Header: r.header}).Cookies()
		var body apitypes.Session
		_ = json.Unmarshal(r.body, &body)
		sessions = append(sessions, signedIn{token: cookies[0].Value, csrf: body.CSRFToken, userID: body.User.ID})
	}
	if sessions[0].token == sessions[1].token {
		t.Fatal("the second sign-in was answered with the first's session")
	}

	r := f.do(t, "POST", "/api/v1/session/password", "", strings.NewReader(`{"currentPassword":"`+f.creds.Owner.Password+
		`","newPassword":"another long password"}`), "Cookie", auth.SessionCookie+"="+sessions[1].token, auth.CSRFHeader, sessions[1].csrf,
		idempotencyHeader, "password-once")
	if r.status != 200 || r.header.Get(replayedHeader) != "" {
		t.Fatalf("a password change under an Idempotency-Key: %d %s", r.status, r.body)
	}
	for _, key := range []string{"token-once", "sign-in-once", "password-once"} {
		if rec, err := f.store.IdempotencyRecordOf(context.Background(), f.creds.OrgID, key); err != nil || rec != nil {
			t.Fatalf("%s was stored: %+v %v", key, rec, err)
		}
	}
}
