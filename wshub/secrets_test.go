package wshub_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/app"
	"github.com/opentreasury/treasury/store/storetest"
)

// Every secret the service issues is used the ways a client uses it, rightly and
// wrongly, with the logs at debug level; none of them may appear in the logs.
func TestSecretsNeverReachTheLogs(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := seedStore(t, s)
	r := startReplica(t, s, app.LiveOptions{}, api.Config{})
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

	cfg := r.createConfig(t, pay.SK, "*")
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		// REST: a route it may use, one it may not, a malformed header, a secret in the query.
		r.call(t, "GET", "/payments", secret, nil)
		r.call(t, "GET", "/treasury/portfolio", secret, nil)
		r.call(t, "GET", "/payments?token="+url.QueryEscape(secret)+"&limit=1", secret+"x", nil)
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
	r.call(t, "GET", "/payments", access, nil)

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
