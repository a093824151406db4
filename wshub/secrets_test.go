package wshub_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// Every secret the service issues is used the ways a client uses it, rightly and
// wrongly, with the logs at debug level; none of them may appear in the logs.
func TestSecretsNeverReachTheLogs(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, assemble.LiveOptions{}, api.Config{})
	pay := creds.Keys["pay"]

	secrets := []string{creds.Owner.Password, creds.OtherOrg.Keys["pay"]["sk"]}
	for _, k := range creds.Keys {
		secrets = append(secrets, k.SK, k.PK, k.Read, k.Approve, k.Sign)
	}
	for _, kind := range []string{"sk", "tk", "pk"} {
		body := map[string]any{"kind": kind}
		if kind == "tk" {
			body["actions"] = []string{"read"}
		}
		_, out := r.call(t, "POST", "/developer/api-keys", pay.SK, body)
		secrets = append(secrets, out["secret"].(string))
	}
	_, oc := r.call(t, "POST", "/developer/oauth-clients", pay.SK, map[string]any{"scopes": "pay:read"})
	clientID, clientSecret := oc["clientId"].(string), oc["clientSecret"].(string)
	access := r.accessToken(t, clientID, clientSecret)
	seeded := creds.OAuthClients["trade"]
	secrets = append(secrets, clientSecret, access, seeded.ClientSecret, r.accessToken(t, seeded.ClientID, seeded.ClientSecret))

	// People: sign-in (right and wrong), a member added with a one-time sign-in link that
	// they open, use, and try again, sessions and their CSRF tokens used rightly and
	// wrongly, a changed password.
	owner := signIn(t, r.srv.URL, creds.Owner.Email, creds.Owner.Password)
	signIn(t, r.srv.URL, creds.Owner.Email, creds.Owner.Password+"x")
	_, added := sessionCall(t, r.srv.URL, owner, "POST", "/developer/team?app=pay", `{"email":"m@example.com","actions":["read"]}`)
	link, _ := added["signInLink"].(string)
	u, err := url.Parse(link)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("sign-in link %q", link)
	}
	memberPassword := "the member's first password"
	for range 2 {
		if res, err := http.Get(r.srv.URL + u.RequestURI()); err == nil {
			_ = res.Body.Close()
		}
		res, err := http.PostForm(r.srv.URL+"/console/welcome", url.Values{"token": {u.Query().Get("token")},
			"password": {memberPassword}, "confirm": {memberPassword}})
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
	}
	member := signIn(t, r.srv.URL, "m@example.com", memberPassword)
	sessionCall(t, r.srv.URL, member, "GET", "/api/v1/payments", "")
	sessionCall(t, r.srv.URL, member, "POST", "/api/v1/payments", `{}`)
	forged := member
	forged.csrf = owner.csrf
	sessionCall(t, r.srv.URL, forged, "POST", "/api/v1/payments", `{}`)
	newPassword := "a changed password for m"
	sessionCall(t, r.srv.URL, member, "POST", "/api/v1/session/password", `{"currentPassword":"`+memberPassword+`","newPassword":"`+newPassword+`"}`)
	signIn(t, r.srv.URL, "m@example.com", memberPassword)
	secrets = append(secrets, owner.token, owner.csrf, u.Query().Get("token"), memberPassword, member.token, member.csrf, newPassword)
	if memberPassword == "" || member.token == "" {
		t.Fatal("the member was not added and signed in; the test proves nothing of people")
	}

	cfg := r.createConfig(t, pay.SK, "*")
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		// REST: a route it may use, one it may not, a malformed header, a secret in the query.
		r.call(t, "GET", "/api/v1/payments", secret, nil)
		r.call(t, "GET", "/api/v1/treasury/portfolio", secret, nil)
		r.call(t, "GET", "/api/v1/payments?token="+url.QueryEscape(secret)+"&limit=1", secret+"x", nil)
		req, _ := http.NewRequest("GET", r.srv.URL+"/api/v1/payments", nil)
		req.Header.Set("Authorization", "Token "+secret)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
		// The channel, accepted or refused, and the token endpoint with it as a client secret.
		if ws, _, err := websocket.DefaultDialer.Dial(r.wsURL(cfg, secret), nil); err == nil {
			ws.Close()
		}
		if res, err := http.PostForm(r.srv.URL+"/api/v1/oauth/token", url.Values{"grant_type": {"client_credentials"},
			"client_id": {clientID}, "client_secret": {secret}}); err == nil {
			res.Body.Close()
		}
	}
	// Revocation paths log too.
	r.call(t, "DELETE", "/developer/oauth-clients/"+clientID, pay.SK, nil)
	r.call(t, "GET", "/api/v1/payments", access, nil)

	logs := r.logs.String()
	if !strings.Contains(logs, "/api/v1/payments") || !strings.Contains(logs, "REDACTED") {
		t.Fatal("the logs do not show the requests; the test proves nothing")
	}
	for _, secret := range secrets {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("a secret starting %q is in the logs", secret[:4])
		}
	}
}

type session struct{ token, csrf string }

// signIn signs a person in over HTTP; a refused sign-in gives an empty session.
func signIn(t *testing.T, base, email, password string) session {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	res, err := http.Post(base+"/api/v1/sessions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	for _, c := range res.Cookies() {
		if c.Name == auth.SessionCookie {
			csrf, _ := out["csrfToken"].(string)
			return session{token: c.Value, csrf: csrf}
		}
	}
	return session{}
}

// sessionCall makes a request as a browser would with the session.
func sessionCall(t *testing.T, base string, s session, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: s.token})
	req.Header.Set(auth.CSRFHeader, s.csrf)
	return doJSON(t, req)
}
