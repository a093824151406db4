package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
)

// userAgent is a person's user agent: a cookie jar (which, like a browser, keeps the Secure
// session cookie for 127.0.0.1) and the CSRF token the sign-in answered.
type userAgent struct {
	client *http.Client
	csrf   string
	userID string
}

func signInAs(t *testing.T, api, email, password string) *userAgent {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &userAgent{client: &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: openAPI.Transport(nil)}}
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	r := b.do(t, "POST", api+"/sessions", string(body))
	b.csrf, _ = r.body["csrfToken"].(string)
	user, _ := r.body["user"].(map[string]any)
	b.userID, _ = user["id"].(string)
	if r.status != http.StatusCreated || b.csrf == "" || b.userID == "" {
		t.Fatalf("sign in %s: HTTP %d", email, r.status)
	}
	return b
}

func (b *userAgent) do(t *testing.T, method, url, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if b.csrf != "" {
		req.Header.Set("X-CSRF-Token", b.csrf)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// setPassword uses a one-time sign-in link as its page's form does.
func setPassword(t *testing.T, link, password string) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.PostForm(u.Scheme+"://"+u.Host+"/console/welcome",
		url.Values{"token": {u.Query().Get("token")}, "password": {password}, "confirm": {password}})
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("set a password with the link: HTTP %d", res.StatusCode)
	}
}

// People on the running bundle: the owner signs in with credentials.json, adds an
// approver on the pay app's team, and creates a payment that needs approval. The owner may
// not approve it (maker-checker binds the person); the approver, signed in with the
// password the owner was shown once, approves it, and it is confirmed on the chain.
func TestPeopleApproveWhatOthersCreate(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	owner := signInAs(t, api, b.Credentials.Owner.Email, b.Credentials.Owner.Password)

	r := owner.do(t, "POST", b.APIURL+"/developer/team?app=pay", `{"email":"approver@example.com","actions":["read","approve"]}`)
	link, _ := r.body["signInLink"].(string)
	if r.status != http.StatusCreated || !strings.HasPrefix(link, b.APIURL+"/console/welcome?token=sil_") {
		t.Fatalf("add the approver: HTTP %d", r.status) // the body holds a sign-in link
	}
	password := "the approver's own password"
	setPassword(t, link, password)
	approver := signInAs(t, api, "approver@example.com", password)

	// 20,000 USD: the seeded policy asks for one approval from 10,000 USD.
	r = owner.do(t, "POST", api+"/payments", `{"walletId":"`+b.Credentials.Wallets[0].ID+
		`","asset":"USDC","amount":"20000","destination":{"address":"0x2222222222222222222222222222222222222222"}}`)
	orderID, _ := r.body["id"].(string)
	if r.status != http.StatusCreated || r.body["createdBy"] != owner.userID {
		t.Fatalf("the owner creates a payment: HTTP %d %s", r.status, r.raw)
	}
	if r := owner.do(t, "POST", api+"/payments/"+orderID+"/submit", "{}"); r.status != http.StatusAccepted {
		t.Fatalf("submit: HTTP %d %s", r.status, r.raw)
	}

	var itemID string
	wait.For(t, 30*time.Second, "a pending approval for the approver", func() bool {
		r := approver.do(t, "GET", api+"/approvals?status=pending", "")
		if items, _ := r.body["data"].([]any); r.status == http.StatusOK && len(items) == 1 {
			itemID, _ = items[0].(map[string]any)["id"].(string)
		}
		return itemID != ""
	})
	decide := api + "/approvals/payment/" + itemID + "/decide"
	if r := owner.do(t, "POST", decide, `{"decision":"APPROVE"}`); r.status != http.StatusForbidden || r.body["code"] != "maker_checker_violation" {
		t.Fatalf("the owner approving their own payment: HTTP %d %s", r.status, r.raw)
	}
	if r := approver.do(t, "POST", api+"/payments", `{}`); r.status != http.StatusForbidden {
		t.Fatalf("the approver creating a payment: HTTP %d, want 403", r.status)
	}
	if r := approver.do(t, "POST", decide, `{"decision":"APPROVE","comment":"checked"}`); r.status != http.StatusAccepted {
		t.Fatalf("the approver approves: HTTP %d %s", r.status, r.raw)
	}
	wait.For(t, 60*time.Second, "the payment to confirm", func() bool {
		return approver.do(t, "GET", api+"/payments/"+orderID, "").body["status"] == "confirmed"
	})

	// The audit log names the people; signing out ends the session on the spot.
	r = owner.do(t, "GET", api+"/audit-logs?limit=200", "")
	var decidedBy string
	for _, a := range r.body["data"].([]any) {
		entry := a.(map[string]any)
		if entry["action"] == "approval.approve" {
			actor := entry["actor"].(map[string]any)
			decidedBy = actor["type"].(string) + " " + actor["id"].(string)
		}
	}
	if decidedBy != "user "+approver.userID {
		t.Fatalf("the approval's actor in the audit log: %q", decidedBy)
	}
	// The chain these records make verifies in the background, through the worker.
	dashboard := b.Credentials.Keys["treasury"].Read
	r = send(t, "POST", api+"/audit-logs/verifications", dashboard, "")
	verification, _ := r.body["id"].(string)
	if r.status != http.StatusAccepted || verification == "" {
		t.Fatalf("start a verification: HTTP %d %s", r.status, r.raw)
	}
	wait.For(t, 60*time.Second, "the verification to end", func() bool {
		r = call(t, "GET", api+"/audit-logs/verifications/"+verification, dashboard)
		return r.body["status"] != "running"
	})
	if head := r.body["head"].(map[string]any); r.body["status"] != "intact" || r.body["entries"] != head["seq"] {
		t.Fatalf("the verification: %s", r.raw)
	}
	if r := approver.do(t, "DELETE", api+"/session", ""); r.status != http.StatusNoContent {
		t.Fatalf("sign out: HTTP %d", r.status)
	}
	if r := approver.do(t, "GET", api+"/session", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("after signing out: HTTP %d", r.status)
	}
}
