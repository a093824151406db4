package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/opentreasury/treasury/dev/browser"
	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/wait"
)

// tab is one browser tab of a person.
type tab = browser.Tab

// The console in a real browser, against the dev bundle: the owner signs in with
// credentials.json, makes a key (its secret shown once), a WebSocket config whose delivery
// log updates live when Send test is pressed, and a member with Approve on Pay, who signs
// in in a browser of their own, approves a 20,000 USDC payment the owner's key made, and
// watches its page reach confirmed. The member does not see the API keys page, and is
// refused it. Every page is loaded, and saved as a screenshot with CONSOLE_SCREENSHOTS set.
func TestConsoleInABrowser(t *testing.T) {
	browserPath := browser.Chromium(t)
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// treasury.test is the bundle under a name that is not loopback, where browsers keep
	// no Secure cookie over plain http: the member signs in there.
	ownerCtx, stopBrowser := browser.Start(t, browserPath, chromedp.Flag("host-resolver-rules", "MAP treasury.test 127.0.0.1"))
	defer stopBrowser()
	owner := &tab{T: t, Ctx: ownerCtx, Base: b.APIURL, Shots: shots}

	owner.Open("/console/sign-in")
	credentials, _ := filepath.Abs(b.CredentialsPath)
	if named := owner.Text(".signin p.hint code"); named != credentials {
		t.Fatalf("the sign-in page names %q, not the bundle's credentials file %s", named, credentials)
	}
	if at := owner.SignIn(b.Credentials.Owner.Email, b.Credentials.Owner.Password); at != "/console/treasury/overview" {
		t.Fatalf("the owner signed in lands at %s", at)
	}
	if total := owner.Text(".figure .big"); !strings.HasSuffix(total, " USD") || total == "0.00 USD" {
		t.Fatalf("the overview's total: %q", total)
	}
	if bars := browser.Eval[int](owner, `document.querySelectorAll("svg.chart rect.bar").length`); bars < 2 {
		t.Fatalf("the overview's chart has %d bars, want one per chain", bars)
	}
	owner.Screenshot("overview")
	// Keyboard users skip the header: the first Tab reaches the skip link.
	owner.Do("tab", chromedp.KeyEvent("\t"))
	if focused := browser.Eval[string](owner, `document.activeElement.className`); focused != "skip" {
		t.Fatalf("the first Tab focuses %q, not the skip link", focused)
	}

	consoleKeys(t, owner, b)
	consoleWebSockets(t, owner, b)
	link := consoleInvite(t, owner)

	// The payment: made and submitted with the owner's pay key.
	api := b.APIURL + "/api/v1"
	payKey := b.Credentials.Keys["pay"].SK
	r := send(t, "POST", api+"/payments", payKey, `{"walletId":"`+b.Credentials.Wallets[0].ID+
		`","asset":"USDC","amount":"20000","destination":{"address":"0x2222222222222222222222222222222222222222"}}`)
	orderID, _ := r.body["id"].(string)
	if r.status != http.StatusCreated {
		t.Fatalf("create the payment: HTTP %d %s", r.status, r.raw)
	}
	if r := send(t, "POST", api+"/payments/"+orderID+"/submit", payKey, "{}"); r.status != http.StatusAccepted {
		t.Fatalf("submit: HTTP %d %s", r.status, r.raw)
	}

	memberCtx, closeMember := chromedp.NewContext(ownerCtx, chromedp.WithNewBrowserContext())
	defer closeMember()
	if err := chromedp.Do(memberCtx); err != nil { // the tab lives as long as this call's context
		t.Fatalf("a second browser context: %v", err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(b.APIURL, "http://"), ":")
	member := &tab{T: t, Ctx: memberCtx, Base: "http://treasury.test:" + port}
	if at := member.AcceptLink(link, "the approver's password"); at != "/console/pay/orders" {
		t.Fatalf("the member signed in lands at %s", at)
	}
	if menu := member.Menu(); menu != "Orders,Approvals,Payout schedules,Passkeys" {
		t.Fatalf("the member's Pay menu: %s", menu)
	}
	if apps := browser.Eval[string](member, `[...document.querySelectorAll("nav.apps a")].map(a => a.textContent).join(",")`); apps != "Pay" {
		t.Fatalf("the member's apps: %s", apps)
	}
	if status := member.Open("/console/pay/api-keys"); status != http.StatusForbidden || member.Text("h1") != "Permission denied" {
		t.Fatalf("the member at the API keys page: HTTP %d, %q", status, member.Text("h1"))
	}
	owner.Shots, member.Shots = "", shots
	member.Screenshot("forbidden")

	consoleApprove(t, member, orderID)
	consoleOrderConfirms(t, member, b, orderID)
	everyPage(t, owner, b, shots, orderID)
	consolePolicy(t, owner, b, shots, orderID)

	if status := member.Submit("sign out", chromedp.Click(chromedp.CSS(`form.who button`))); status != http.StatusOK ||
		!strings.HasPrefix(member.Location(), "/console/sign-in") {
		t.Fatalf("signing out leads to %s (HTTP %d)", member.Location(), status)
	}
	if member.Open("/console/pay/orders"); !strings.HasPrefix(member.Location(), "/console/sign-in") {
		t.Fatalf("after signing out, the orders page is at %s", member.Location())
	}
}

// consoleKeys: a tk_ key made on the API keys page works at once; its secret is shown on
// that page alone, never again.
func consoleKeys(t *testing.T, owner *tab, b *devstack.Bundle) {
	owner.Open("/console/pay/api-keys")
	owner.Do("fill in the new key",
		chromedp.Click(chromedp.CSS(`input[name="kind"][value="tk"]`)),
		chromedp.Click(chromedp.CSS(`input[name="actions"][value="read"]`)),
		chromedp.SetValue(chromedp.CSS("#label"), "reconciliation"))
	if status := owner.Submit("create the key", chromedp.Click(chromedp.CSS(`form[action="api-keys"] button[type="submit"]`))); status != http.StatusCreated {
		t.Fatalf("create a key: HTTP %d", status)
	}
	secret := browser.Eval[string](owner, `document.getElementById("secret").value`)
	if !strings.HasPrefix(secret, "tk_") {
		t.Fatalf("the key's secret on the page: %q", secret)
	}
	if copyButton := browser.Eval[int](owner, `document.querySelectorAll('button[data-copy="secret"]').length`); copyButton != 1 {
		t.Fatal("the secret has no copy button")
	}
	owner.Screenshot("api-key-created")
	if r := call(t, "GET", b.APIURL+"/api/v1/payments", secret); r.status != http.StatusOK {
		t.Fatalf("the new key reads payments: HTTP %d", r.status)
	}
	if r := call(t, "POST", b.APIURL+"/api/v1/payments", secret); r.status != http.StatusForbidden {
		t.Fatalf("the new read-only key creates a payment: HTTP %d", r.status)
	}
	owner.Submit("done", chromedp.Click(chromedp.CSS(`main a[href$="/api-keys"]`)))
	html := browser.Eval[string](owner, `document.documentElement.outerHTML`)
	if strings.Contains(html, secret) || strings.Contains(html, secret[3:]) {
		t.Fatal("the keys page shows the secret again")
	}
	if !strings.Contains(html, "reconciliation") {
		t.Fatal("the keys page does not list the new key")
	}

	// Revoked on the page, the key is refused at once; its row says when, and the table,
	// fuller by two times that never wrap, still has room for each Revoke on one line.
	revoke := browser.Eval[string](owner, `[...document.querySelectorAll("tbody tr")].find(r => r.textContent.includes("reconciliation")).querySelector("button").getAttribute("aria-label")`)
	if status := owner.Submit("revoke the key", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[aria-label=%q]`, revoke)))); status != http.StatusOK ||
		!strings.Contains(owner.Text("p.notice"), "revoked") {
		t.Fatalf("revoke the key: HTTP %d", status)
	}
	if r := call(t, "GET", b.APIURL+"/api/v1/payments", secret); r.status != http.StatusUnauthorized {
		t.Fatalf("the revoked key reads payments: HTTP %d", r.status)
	}
	owner.Screenshot("api-keys")
	revokeOnOneLine(t, owner)
}

// revokeOnOneLine checks, at a 1280 px window, that each Revoke button of the keys page
// is one line high: its content box is one line-height.
func revokeOnOneLine(t *testing.T, owner *tab) {
	t.Helper()
	if width := browser.Eval[int](owner, `window.innerWidth`); width != 1280 {
		t.Fatalf("the window is %d px wide, want 1280", width)
	}
	lines := browser.Eval[[]float64](owner, `[...document.querySelectorAll('button[aria-label^="Revoke "]')].map(b => {
		const s = getComputedStyle(b);
		return (b.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom)) / parseFloat(s.lineHeight);
	})`)
	if len(lines) == 0 {
		t.Fatal("no Revoke button on the API keys page")
	}
	for i, n := range lines {
		if n < 0.9 || n > 1.1 {
			t.Errorf("Revoke button %d of %d is %.2f lines high at 1280 px, want 1", i+1, len(lines), n)
		}
	}
}

// consoleWebSockets: a config made on the WebSockets page; a live connection to it shows
// in its count, and Send test puts a row in its delivery log, all without a reload.
func consoleWebSockets(t *testing.T, owner *tab, b *devstack.Bundle) {
	owner.Open("/console/pay/websockets")
	owner.Do("events", chromedp.SetValue(chromedp.CSS("#events"), "order.*"))
	owner.Submit("create the config", chromedp.Click(chromedp.CSS(`form[action="websockets"] button[type="submit"]`)))
	notice := owner.Text("p.notice")
	configID := regexp.MustCompile(`wsc_[0-9a-f]+`).FindString(notice)
	if configID == "" {
		t.Fatalf("no config id in the notice %q", notice)
	}
	// The URL the page shows connects as it stands, once the key is in its place.
	shown := owner.Text(fmt.Sprintf(`[data-connect="%s"]`, configID))
	if want := "ws" + strings.TrimPrefix(b.APIURL, "http") + "/api/v1/ws?id=" + configID + "&token=<your pk_ key>"; shown != want {
		t.Fatalf("the page shows %q to connect to %s, want %q", shown, configID, want)
	}
	live := dialURL(t, strings.Replace(shown, "<your pk_ key>", b.Credentials.Keys["pay"].PK, 1))
	owner.Do("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	owner.WaitFor("the live connection counted without a reload",
		fmt.Sprintf(`document.querySelector('[data-live="%s"]').textContent === "1" && window.notReloaded`, configID))
	owner.Do("send test", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-send-test="%s"] button`, configID))))
	owner.WaitFor("the test event in the delivery log without a reload",
		fmt.Sprintf(`document.querySelector('[data-log="%s"]').textContent.includes("websocket.test") && window.notReloaded`, configID))
	select {
	case f := <-live.frames:
		if f["event"] != "websocket.test" {
			t.Fatalf("the live connection got %v", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the live connection got no test event")
	}
	owner.Screenshot("websockets")
}

// consoleInvite: the owner invites a member with Read and Approve on Pay, and is shown
// their one-time sign-in link once.
func consoleInvite(t *testing.T, owner *tab) string {
	link := invite(t, owner, "approver@example.com", "read", "approve")
	owner.Screenshot("team")
	return link
}

// invite: the owner invites a member with actions on Pay on the team page, and is shown
// their one-time sign-in link once.
func invite(t *testing.T, owner *tab, email string, actions ...string) string {
	t.Helper()
	owner.Open("/console/pay/team")
	owner.Do("fill in the invitation", chromedp.SetValue(chromedp.CSS("#email"), email))
	for _, a := range actions {
		owner.Do("tick "+a, chromedp.Click(chromedp.CSS(fmt.Sprintf(`form[action="team"] input[value=%q]`, a))))
	}
	if status := owner.Submit("invite", chromedp.Click(chromedp.CSS(`form[action="team"] button[type="submit"]`))); status != http.StatusCreated {
		t.Fatalf("invite %s: HTTP %d", email, status)
	}
	link := browser.Eval[string](owner, `document.getElementById("secret").value`)
	if !strings.HasPrefix(link, owner.Base+"/console/welcome?token=sil_") {
		t.Fatalf("the sign-in link shown: %q", link)
	}
	owner.Open("/console/pay/team")
	if row := owner.Text("tbody"); !strings.Contains(row, email) {
		t.Fatalf("the team page does not list %s: %s", email, row)
	}
	return link
}

// consoleApprove: the member approves the payment on the approvals page.
func consoleApprove(t *testing.T, member *tab, orderID string) {
	wait.For(t, 30*time.Second, "a pending approval of "+orderID+" on the approvals page", func() bool {
		member.Open("/console/pay/approvals")
		return strings.Contains(member.Text("main"), orderID)
	})
	member.Screenshot("approvals")
	member.Do("comment", chromedp.SetValue(chromedp.CSS(`form.decide input[name="comment"]`), "checked the invoice"))
	if status := member.Submit("approve", chromedp.Click(chromedp.CSS(`form.decide button[value="APPROVE"]`))); status != http.StatusOK {
		t.Fatalf("approve: HTTP %d", status)
	}
	if notice := member.Text("p.notice"); !strings.HasPrefix(notice, "Approved") {
		t.Fatalf("after approving: %q", notice)
	}
	member.Open("/console/pay/approvals?status=all")
	if browser.Eval[int](member, `document.querySelectorAll("form.decide").length`) != 0 || !strings.Contains(member.Text("main"), "checked the invoice") {
		t.Fatalf("the decided item: %s", member.Text("main"))
	}
}

// consoleOrderConfirms: the order page, reloading itself, reaches confirmed with its
// timeline and a link to its workflow.
func consoleOrderConfirms(t *testing.T, member *tab, b *devstack.Bundle, orderID string) {
	member.Open("/console/pay/orders/" + orderID)
	wait.For(t, 60*time.Second, "the order page to show confirmed", func() bool {
		status, _ := chromedp.Run(member.Ctx, chromedp.Evaluate[string](`(document.getElementById("order-status") || {}).textContent || ""`))
		return status == "confirmed"
	})
	timeline := member.Text("ol.timeline")
	for _, ev := range []string{"Order.Created", "Order.Submitted", "Order.Approved", "Wallet.TransactionSigned", "Order.Confirmed"} {
		if !strings.Contains(timeline, ev) {
			t.Fatalf("the timeline lacks %s: %s", ev, timeline)
		}
	}
	if ids := browser.Eval[int](member, `[...document.querySelectorAll("ol.timeline code.corr")].filter(c => c.textContent.length > 0).length`); ids < 5 {
		t.Fatalf("%d timeline entries carry a correlation id", ids)
	}
	link := browser.Eval[string](member, `document.querySelector('a[href*="/workflows/"]').href`)
	if want := b.TemporalUIURL + "/namespaces/" + b.Namespace + "/workflows/order-" + orderID; link != want {
		t.Fatalf("the workflow link %s, want %s", link, want)
	}
	member.Screenshot("order")
}

// everyPage loads each page of the owner's console: each answers 200 with its heading.
// A webhook with a test delivery and a dry run of the policy fill theirs.
func everyPage(t *testing.T, owner *tab, b *devstack.Bundle, shots, orderID string) {
	owner.Shots = shots
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer receiver.Close()
	owner.Open("/console/pay/webhooks")
	owner.Do("fill in the webhook", chromedp.SetValue(chromedp.CSS("#url"), receiver.URL+"/hooks"),
		chromedp.SetValue(chromedp.CSS("#description"), "ERP"))
	if status := owner.Submit("create the webhook", chromedp.Click(chromedp.CSS(`form[action="webhooks"] button[type="submit"]`))); status != http.StatusCreated {
		t.Fatalf("create a webhook: HTTP %d %s", status, owner.Text("main"))
	}
	if secret := browser.Eval[string](owner, `document.getElementById("secret").value`); !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the webhook's secret: %q", secret)
	}
	owner.Submit("done", chromedp.Click(chromedp.CSS(`main p > a`)))
	owner.Submit("send a test", chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	wait.For(t, 20*time.Second, "the test delivery to succeed", func() bool {
		if browser.Eval[int](owner, `document.querySelectorAll("article .s-succeeded").length`) > 0 {
			return true
		}
		owner.Open(strings.Split(owner.Location(), "?")[0])
		return false
	})
	// A recovery of the last hour: listed with its status on one line, the table inside the page.
	owner.Do("a window to recover", chromedp.SetValue(chromedp.CSS("#since"), time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04:05")))
	if status := owner.Submit("recover", chromedp.Click(chromedp.CSS(`form[action$="/recover"] button`))); status >= 400 {
		t.Fatalf("recover: HTTP %d %s", status, owner.Text("main"))
	}
	wait.For(t, 20*time.Second, "the recovery to complete", func() bool {
		if browser.Eval[int](owner, `document.querySelectorAll("table.recoveries .s-completed").length`) > 0 {
			return true
		}
		owner.Open(strings.Split(owner.Location(), "?")[0])
		return false
	})
	if lines := browser.Eval[int](owner, `(() => { const r = document.createRange(); r.selectNodeContents(document.querySelector("table.recoveries .status")); return r.getClientRects().length })()`); lines > 1 {
		t.Errorf("the recovery's status badge takes %d lines", lines)
	}
	if wide := browser.Eval[bool](owner, `(() => { const box = document.querySelector("table.recoveries").parentElement; return box.scrollWidth > box.clientWidth || document.documentElement.scrollWidth > document.documentElement.clientWidth })()`); wide {
		t.Error("the recoveries table is wider than the page")
	}
	owner.Screenshot("webhook")

	owner.Open("/console/pay/policy")
	owner.Do("an order to try", chromedp.SetValue(chromedp.CSS("#order"), `{"walletId":"`+b.Credentials.Wallets[0].ID+
		`","asset":"USDC","amount":"25000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
	owner.Submit("dry run", chromedp.Click(chromedp.CSS(`form[action$="/policy/evaluate#result"] button`)))
	if result := owner.Text(".result"); !strings.Contains(result, "needs 1 approval") {
		t.Fatalf("the dry run of 25,000 USDC: %s", result)
	}
	owner.Screenshot("policy")
	consoleBatch(t, owner, b)
	consolePayouts(t, owner, b)

	for _, page := range []struct{ path, heading, shot string }{
		{"/console/treasury/overview", "Overview", ""},
		{"/console/pay/orders", "Orders", "orders"},
		{"/console/pay/orders/" + orderID, "confirmed " + orderID, ""},
		{"/console/pay/approvals?status=all", "Approvals", ""},
		{"/console/pay/api-keys", "API keys", ""},
		{"/console/pay/oauth-clients", "OAuth clients", "oauth-clients"},
		{"/console/pay/websockets", "WebSockets", ""},
		{"/console/pay/webhooks", "Webhooks", "webhooks"},
		{"/console/pay/team", "Team & Permissions", ""},
		{"/console/pay/logs", "Logs", "logs"},
		{"/console/pay/policy", "Policy", ""},
		{"/console/trade/orders", "Orders", ""},
		{"/console/earn/policy", "Policy", ""},
		{"/console/borrow/approvals", "Approvals", ""},
	} {
		if status := owner.Open(page.path); status != http.StatusOK {
			t.Fatalf("%s: HTTP %d", page.path, status)
		}
		if h := owner.Text("h1"); h != page.heading {
			t.Fatalf("%s: heading %q, want %q", page.path, h, page.heading)
		}
		if page.shot != "" {
			owner.Screenshot(page.shot)
		}
	}

	// The empty trade orders page (the seed makes no orders) names the route that makes one.
	owner.Open("/console/trade/orders")
	hint := regexp.MustCompile(`^POST (/api/v1/\S+)$`).FindStringSubmatch(owner.Text("tbody td code"))
	if hint == nil || hint[1] != "/api/v1/trade-orders" {
		t.Fatalf("the empty trade orders page names %v, want POST /api/v1/trade-orders", hint)
	}
	if r := send(t, "POST", b.APIURL+hint[1], b.Credentials.Keys["trade"].SK, "{}"); r.status == http.StatusNotFound {
		t.Fatalf("POST %s, named on the trade orders page: HTTP %d %s", hint[1], r.status, r.raw)
	}
}

// consolePolicy: the Pay policy changed by maker-checker. The owner has changes need one
// approval (changeApprovals 1, in a draft published directly, since none is asked for
// yet), then drafts a lower order limit, a volume window and a shorter whitelist: its diff
// from the version in force shows, it offers the owner no approval of their own draft,
// and its dry run shows the window's headroom. A reviewer, a second person with Developer
// on Pay, approves it in a browser of their own, which publishes it, and the policy page
// shows the window's headroom; the reviewer then rolls back to the version before, a
// draft the owner approves. Last, the owner tries a stricter draft against the week's
// orders: the worker's dry run reports the 20,000 USDC payment refused and a small one
// needing approval, each linked.
func consolePolicy(t *testing.T, owner *tab, b *devstack.Bundle, shots string, orderID string) {
	// A small payment besides the 20,000 USDC one: it needed no approval.
	payKey := b.Credentials.Keys["pay"].SK
	r := send(t, "POST", b.APIURL+"/api/v1/payments", payKey, `{"walletId":"`+b.Credentials.Wallets[0].ID+
		`","asset":"USDC","amount":"50","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	small, _ := r.body["id"].(string)
	if r.status != http.StatusCreated {
		t.Fatalf("create a small payment: HTTP %d %s", r.status, r.raw)
	}
	if r := send(t, "POST", b.APIURL+"/api/v1/payments/"+small+"/submit", payKey, "{}"); r.status != http.StatusAccepted {
		t.Fatalf("submit the small payment: HTTP %d %s", r.status, r.raw)
	}

	link := invite(t, owner, "reviewer@example.com", "read", "developer")
	reviewerCtx, closeReviewer := chromedp.NewContext(owner.Ctx, chromedp.WithNewBrowserContext())
	defer closeReviewer()
	if err := chromedp.Do(reviewerCtx); err != nil { // the tab lives as long as this call's context
		t.Fatalf("a third browser context: %v", err)
	}
	reviewer := &tab{T: t, Ctx: reviewerCtx, Base: owner.Base}
	reviewer.AcceptLink(link, "the reviewer's password")
	reviewer.Shots = shots

	// rules is the draft form's rules, changed by edit.
	rules := func(p *tab, edit func(r map[string]any)) string {
		t.Helper()
		var r map[string]any
		if err := json.Unmarshal([]byte(browser.Eval[string](p, `document.getElementById("rules").value`)), &r); err != nil {
			t.Fatalf("the rules in the draft form: %v", err)
		}
		edit(r)
		out, _ := json.MarshalIndent(r, "", "  ")
		return string(out)
	}
	inForce := func(p *tab, want string) {
		t.Helper()
		if h := p.Text("#in-force"); h != want {
			t.Fatalf("the policy page says %q, want %q", h, want)
		}
	}
	noticeSays := func(p *tab, want string) {
		t.Helper()
		if notice := p.Text("p.notice"); !strings.Contains(notice, want) {
			t.Fatalf("the notice %q does not say %q", notice, want)
		}
	}
	newDraft := func(edit func(r map[string]any)) string {
		t.Helper()
		owner.Open("/console/pay/policy")
		owner.Do("open the draft form", chromedp.Click(chromedp.CSS(`details.new-draft > summary`)))
		owner.Do("edit the rules", chromedp.SetValue(chromedp.CSS("#rules"), rules(owner, edit)))
		if status := owner.Submit("save the draft", chromedp.Click(chromedp.CSS(`form[action$="/policy/drafts"] button:not([formaction])`))); status != http.StatusOK {
			t.Fatalf("save the draft: HTTP %d %s", status, owner.Text("main"))
		}
		noticeSays(owner, "Draft saved")
		id := regexp.MustCompile(`/policy/drafts/(pdr_[0-9a-f]+)`).FindStringSubmatch(owner.Location())
		if id == nil {
			t.Fatalf("saving a draft led to %s", owner.Location())
		}
		return id[1]
	}

	owner.Open("/console/pay/policy")
	inForce(owner, "In force: version 1")
	newDraft(func(r map[string]any) { r["changeApprovals"] = 1 })
	if got := owner.Text("#approval-count"); got != "0 of 0" {
		t.Fatalf("a draft under a policy asking for no approval needs %s", got)
	}
	owner.Submit("publish", chromedp.Click(chromedp.CSS(`form[action$="/publish"] button`)))
	noticeSays(owner, "Published as version 2")
	inForce(owner, "In force: version 2")

	id := newDraft(func(r map[string]any) {
		r["maxOrderUsd"] = "2500000"
		r["windows"] = []map[string]any{{"scope": "wallet", "hours": 24, "limitUsd": "1000000"}}
		r["destinationWhitelist"] = []string{"0x1111111111111111111111111111111111111111", "0x2222222222222222222222222222222222222222"}
	})
	diff := owner.Text("table.diff")
	for _, want := range []string{"maxOrderUsd", "changed from \"5000000\" to \"2500000\"", "windows", "added", "destinationWhitelist", "removed"} {
		if !strings.Contains(diff, want) {
			t.Fatalf("the draft's diff does not show %q: %s", want, diff)
		}
	}
	if got := owner.Text("#approval-count"); got != "0 of 1" {
		t.Fatalf("the draft's approvals: %s, want 0 of 1", got)
	}
	if n := browser.Eval[int](owner, `document.querySelectorAll('form[action$="/approve"], form[action$="/publish"]').length`); n != 0 ||
		!strings.Contains(owner.Text("#not-yours"), "cannot approve it") {
		t.Fatalf("the author is offered %d approve or publish forms, or no word why not", n)
	}
	owner.Screenshot("policy-draft")

	// The dry run against the draft: the window's headroom.
	owner.Submit("dry run against the draft", chromedp.Click(chromedp.CSS(`a[href$="?draft=`+id+`#dry"]`)))
	if selected := browser.Eval[string](owner, `document.getElementById("draft").value`); selected != id {
		t.Fatalf("the dry run is against %q, not the draft %s", selected, id)
	}
	owner.Do("an order to try", chromedp.SetValue(chromedp.CSS("#order"), `{"walletId":"`+b.Credentials.Wallets[0].ID+
		`","asset":"USDC","amount":"25000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
	owner.Submit("dry run", chromedp.Click(chromedp.CSS(`form[action$="/policy/evaluate#result"] button`)))
	if result := owner.Text(".result"); !strings.Contains(result, "draft "+id) {
		t.Fatalf("the dry run was not against the draft: %s", result)
	}
	window := owner.Text("table.windows tbody")
	for _, want := range []string{"wallet", b.Credentials.Wallets[0].ID, "24", "1,000,000.00"} {
		if !strings.Contains(window, want) {
			t.Fatalf("the window's headroom does not show %q: %s", want, window)
		}
	}
	owner.Screenshot("policy-dry-run")

	// The reviewer approves it, which publishes it.
	reviewer.Open("/console/pay/policy")
	reviewer.Submit("open the draft", chromedp.Click(chromedp.CSS(`#drafts ~ table a[href$="/drafts/`+id+`"]`)))
	reviewer.Screenshot("policy-approve")
	reviewer.Submit("approve", chromedp.Click(chromedp.CSS(`form[action$="/drafts/`+id+`/approve"] button`)))
	noticeSays(reviewer, "Approved and published as version 3")
	inForce(reviewer, "In force: version 3")
	// Its window's headroom now: the wallet's payments of the day count in it.
	headroom := reviewer.Text("table.headroom tbody")
	for _, want := range []string{"wallet", b.Credentials.Wallets[0].ID, "24", "1,000,000.00"} {
		if !strings.Contains(headroom, want) || strings.Contains(headroom, "no volume yet") {
			t.Fatalf("the policy page's window headroom does not show %q, or no volume: %s", want, headroom)
		}
	}
	reviewer.Screenshot("policy-windows")

	// Version 3's diff, then a rollback to version 2: a draft, since changes need an
	// approval, which the owner gives.
	reviewer.Submit("version 3", chromedp.Click(chromedp.CSS(`#history ~ table a[href$="/versions/3"]`)))
	if diff := reviewer.Text("table.diff"); !strings.Contains(diff, "2500000") {
		t.Fatalf("version 3's diff from version 2: %s", diff)
	}
	reviewer.Screenshot("policy-version")
	reviewer.Submit("version 2", chromedp.Click(chromedp.CSS(`#changes a[href$="/versions/2"]`)))
	reviewer.Submit("roll back", chromedp.Click(chromedp.CSS(`form[action$="/versions/2/rollback"] button`)))
	noticeSays(reviewer, "Draft saved to restore version 2")
	rollback := regexp.MustCompile(`pdr_[0-9a-f]+`).FindString(reviewer.Location())
	if got := reviewer.Text("#approval-count"); got != "0 of 1" {
		t.Fatalf("the rollback draft's approvals: %s", got)
	}
	owner.Open("/console/pay/policy/drafts/" + rollback)
	owner.Submit("approve the rollback", chromedp.Click(chromedp.CSS(`form[action$="/approve"] button`)))
	noticeSays(owner, "Approved and published as version 4")
	if about := owner.Text("#in-force + p"); !strings.Contains(about, "a rollback to version 2") {
		t.Fatalf("the policy in force: %s", about)
	}
	if latest := owner.Text("#history ~ table tbody tr"); !strings.Contains(latest, "rollback to version 2") || !strings.Contains(latest, "reviewer@example.com") {
		t.Fatalf("the history's latest version: %s", latest)
	}
	owner.Screenshot("policy-history")

	// A stricter draft tried against the week's orders, by the worker.
	strict := newDraft(func(r map[string]any) {
		r["maxOrderUsd"] = "10000"
		r["approvalTiers"] = []map[string]any{{"minUsd": "10", "quorum": 1}}
	})
	owner.Do("days", chromedp.SetValue(chromedp.CSS("#days"), "7"))
	owner.Submit("dry run against history", chromedp.Click(chromedp.CSS(`form[action$="/drafts/`+strict+`/dry-runs"] button`)))
	run := regexp.MustCompile(`^/console/pay/policy/dry-runs/(pdx_[0-9a-f]+)$`).FindStringSubmatch(owner.Location())
	if run == nil {
		t.Fatalf("starting a dry run led to %s: %s", owner.Location(), owner.Text("main"))
	}
	// The page reloads itself every 2 seconds while the run goes on.
	wait.For(t, 60*time.Second, "the dry run to complete", func() bool {
		status, _ := chromedp.Run(owner.Ctx, chromedp.Evaluate[string](`(document.getElementById("dry-run-status") || {}).textContent || ""`))
		if status == "failed" {
			t.Fatalf("the dry run never completed (last %q): %s", status, owner.Text("main"))
		}
		return status == "completed"
	})
	if progress := owner.Text("#dry-run-progress"); !regexp.MustCompile(`^(\d+) of (\d+)$`).MatchString(progress) ||
		strings.Split(progress, " of ")[0] != strings.Split(progress, " of ")[1] || progress == "0 of 0" {
		t.Fatalf("the completed dry run's progress: %q", progress)
	}
	for shift, order := range map[string]string{"allowedToRefused": orderID, "approvalAdded": small} {
		if !browser.Eval[bool](owner, fmt.Sprintf(`!!document.querySelector('h3#%s + table a[href="/console/pay/orders/%s"]')`, shift, order)) {
			t.Fatalf("the report does not link %s under %s: %s", order, shift, owner.Text("main"))
		}
	}
	if shifts := owner.Text("table.shifts"); !strings.Contains(shifts, "Would be refused (now allowed)") || !strings.Contains(shifts, "Would need approval (now none)") {
		t.Fatalf("the report's shifts: %s", shifts)
	}
	if byRule := owner.Text("table.by-rule tbody"); !strings.Contains(byRule, "maxOrderUsd") {
		t.Fatalf("the report by rule: %s", byRule)
	}
	if diff := owner.Text("table.diff"); !strings.Contains(diff, "changed from \"5000000\" to \"10000\"") {
		t.Fatalf("the dry run's page does not show the draft's diff: %s", diff)
	}
	owner.Screenshot("policy-dry-run-history")

	// Back on the draft, the run is listed; so it is on the policy page.
	owner.Submit("back to the draft", chromedp.Click(chromedp.CSS(`main > p > a[href$="/drafts/`+strict+`"]`)))
	if runs := owner.Text("table.dry-runs"); !strings.Contains(runs, run[1]) || !strings.Contains(runs, "completed") {
		t.Fatalf("the draft's page does not list its dry run: %s", runs)
	}
	owner.Open("/console/pay/policy")
	if runs := owner.Text("table.dry-runs"); !strings.Contains(runs, run[1]) || !strings.Contains(runs, strict) {
		t.Fatalf("the policy page does not list the dry run: %s", runs)
	}
}

// consoleBatch makes a batch payment from a CSV file uploaded on the pay orders page,
// submits it from its page, and watches every recipient confirm in its one part.
// consolePayouts: a payout schedule made on its page pays at each of its times (every
// second here), its page lists its runs with their orders, and it pauses and is deleted
// there.
func consolePayouts(t *testing.T, owner *tab, b *devstack.Bundle) {
	owner.Open("/console/pay/payouts")
	owner.Do("fill in the schedule", chromedp.SetValue(chromedp.CSS("#payout-amount"), "3"),
		chromedp.SetValue(chromedp.CSS("#payout-address"), "0x1111111111111111111111111111111111111111"),
		chromedp.SetValue(chromedp.CSS("#payout-reference"), "retainer"), chromedp.SetValue(chromedp.CSS("#payout-when"), "PT1S"))
	if status := owner.Submit("create the schedule", chromedp.Click(chromedp.CSS(`form[action="payouts"] button[type="submit"]`))); status != http.StatusOK {
		t.Fatalf("create the schedule: HTTP %d %s", status, owner.Text("main"))
	}
	id := strings.TrimPrefix(owner.Text("h1"), "Payout schedule ")
	if !strings.HasPrefix(id, "pys_") {
		t.Fatalf("the schedule's page: heading %q", owner.Text("h1"))
	}
	page := strings.Split(owner.Location(), "?")[0]
	wait.For(t, 30*time.Second, "a run's order to be confirmed on the schedule's page", func() bool {
		if browser.Eval[int](owner, `document.querySelectorAll("tbody .s-confirmed").length`) > 0 {
			return true
		}
		owner.Open(page)
		return false
	})
	owner.Screenshot("payouts")
	if status := owner.Submit("pause", chromedp.Click(chromedp.CSS(`form[action$="/pause"] button`))); status != http.StatusOK ||
		!strings.Contains(owner.Text("main"), "paused: the times that pass are skipped") {
		t.Fatalf("pause: HTTP %d %s", status, owner.Text("main"))
	}
	if r := call(t, "GET", b.APIURL+"/api/v1/payout-schedules/"+id, b.Credentials.Keys["pay"].Read); r.body["paused"] != true {
		t.Fatalf("the schedule paused on its page: %s", r.raw)
	}
	if status := owner.Submit("delete", chromedp.Click(chromedp.CSS(`form[action$="/delete"] button`))); status != http.StatusOK ||
		owner.Text("h1") != "Payout schedules" {
		t.Fatalf("delete: HTTP %d %s", status, owner.Text("main"))
	}
	if r := call(t, "GET", b.APIURL+"/api/v1/payout-schedules/"+id, b.Credentials.Keys["pay"].Read); r.status != http.StatusNotFound {
		t.Fatalf("the deleted schedule: HTTP %d", r.status)
	}
}

func consoleBatch(t *testing.T, owner *tab, b *devstack.Bundle) {
	file := filepath.Join(t.TempDir(), "payroll.csv")
	if err := os.WriteFile(file, []byte("address,amount,reference\n"+
		"0x1111111111111111111111111111111111111111,125.50,emp-17\n"+
		"0x2222222222222222222222222222222222222222,98,emp-18\n"+
		"0x1111111111111111111111111111111111111111,40.25,emp-19\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	owner.Open("/console/pay/orders")
	owner.Do("choose the file", chromedp.SetValue(chromedp.CSS("#batch-reference"), "payroll"),
		chromedp.SetUploadFiles(chromedp.CSS("#batch-file"), []string{file}))
	if status := owner.Submit("make the batch", chromedp.Click(chromedp.CSS(`form[action="batches"] button[type="submit"]`))); status != http.StatusOK {
		t.Fatalf("make the batch: HTTP %d", status)
	}
	if h := owner.Text("h1"); !strings.HasPrefix(h, "draft ord_") {
		t.Fatalf("the batch's page: heading %q", h)
	}
	if rows := browser.Eval[int](owner, `document.querySelectorAll('section[aria-labelledby="recipients"] tbody tr').length`); rows != 3 {
		t.Fatalf("the batch's page lists %d recipients", rows)
	}
	id := strings.TrimPrefix(owner.Text("h1"), "draft ")
	owner.Submit("submit the batch", chromedp.Click(chromedp.CSS("#submit-order")))
	// The page reloads itself while the order moves: the API says when it is done.
	waitStatus(t, b.APIURL+"/api/v1/payments/"+id, b.Credentials.Keys["pay"].Read, "confirmed")
	owner.Open("/console/pay/orders/" + id)
	cells := browser.Eval[[]string](owner, `[...document.querySelectorAll('section[aria-labelledby="recipients"] tbody tr')].map(r => r.cells[6].textContent + " " + r.cells[5].textContent)`)
	if strings.Join(cells, ",") != "confirmed 1,confirmed 1,confirmed 1" {
		t.Fatalf("the recipients' parts and statuses: %v", cells)
	}
	owner.Screenshot("batch")
	if r := call(t, "GET", b.APIURL+"/api/v1/payments?limit=1", b.Credentials.Keys["pay"].Read); r.body["data"].([]any)[0].(map[string]any)["amount"] != "263.75" {
		t.Fatalf("the newest payment is not the batch of 263.75: %s", r.raw)
	}
}
