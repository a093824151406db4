package console_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/console"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/webhook"
	"github.com/opentreasury/treasury/workflows"
)

// pages is the API's router with the console mounted, over a seeded store. Orders are
// submitted to a fake that allows them; no workflow runs. A policy dry run against
// history runs within its start, unless dryRuns holds it.
type pages struct {
	store   *store.Store
	creds   *seed.Credentials
	handler http.Handler
	dryRuns *dryRuns
}

// dryRuns runs a policy dry run to its end inside its start, page by page as the worker
// would; held, it leaves the run running until the test calls run.
type dryRuns struct {
	acts *activities.Policies
	held bool
}

func (r *dryRuns) StartPolicyDryRun(ctx context.Context, id string) error {
	if r.held {
		return nil
	}
	return r.run(ctx, id)
}

func (r *dryRuns) run(ctx context.Context, id string) error {
	for {
		p, err := r.acts.DryRunPage(ctx, workflows.DryRunInput{DryRunID: id})
		if err != nil || p.Done {
			return err
		}
	}
}

// recoveries runs a webhook recovery to its end inside its start, page by page as the
// worker would.
type recoveries struct{ acts *activities.WebhookRecoveries }

func (r recoveries) StartWebhookRecovery(ctx context.Context, id string) error {
	for {
		p, err := r.acts.RecoveryPage(ctx, workflows.RecoveryInput{RecoveryID: id})
		if err != nil || p.Done {
			return err
		}
	}
}

// webhookOptions seal webhook secrets with a fresh key, behind the production guard
// (https only, no private addresses).
func webhookOptions(t *testing.T) service.WebhookOptions {
	t.Helper()
	k, err := webhook.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := webhook.ParseKey(k)
	if err != nil {
		t.Fatal(err)
	}
	box, err := webhook.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	return service.WebhookOptions{Box: box}
}

type allowAll struct{}

func (allowAll) Submit(context.Context, workflows.Submission) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{Allowed: true}, nil
}

func (allowAll) Start(context.Context, workflows.Submission) error { return nil }

func (allowAll) SubmitOutcome(context.Context, string, string) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{}, workflows.ErrUnknownSubmission
}

func (allowAll) SignalApproval(context.Context, string, workflows.ApprovalDecision) error { return nil }

func (allowAll) SignalSignature(context.Context, string, workflows.Signature) error { return nil }
func (allowAll) SignalRefusal(context.Context, string, workflows.Refusal) error     { return nil }

func newPages(t *testing.T) *pages { return newPagesAt(t, nil) }

// newPagesAt is newPages with the sessions' clock (time.Now when nil).
func newPagesAt(t *testing.T, now func() time.Time) *pages {
	t.Helper()
	s := storetest.NewSQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	runs := &dryRuns{acts: &activities.Policies{Store: s, Log: log}}
	h := api.NewRouter(withPages(t, api.Config{
		Store: s,
		Log:   log,
		Now:   now,
		Service: &service.Service{Store: s, Log: log, Workflows: allowAll{}, DryRuns: runs, Webhooks: webhookOptions(t),
			Recoveries: recoveries{&activities.WebhookRecoveries{Store: s}}},
	}, console.Options{TemporalUIURL: "http://temporal-ui.test", Namespace: "treasury"}))
	return &pages{store: s, creds: creds, handler: h, dryRuns: runs}
}

// person is a browser: its session cookie, if any.
type person struct {
	session string
}

// reply is a page: its status, where it sends the browser, and its HTML.
type reply struct {
	status   int
	location string
	header   http.Header
	html     string
}

func (p *pages) send(t *testing.T, who person, method, path string, form url.Values, headers ...string) reply {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if who.session != "" {
		req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: who.session})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	p.handler.ServeHTTP(rec, req)
	return reply{status: rec.Code, location: rec.Header().Get("Location"), header: rec.Header(), html: rec.Body.String()}
}

func (p *pages) get(t *testing.T, who person, path string) reply {
	t.Helper()
	return p.send(t, who, "GET", path, nil)
}

// post sends a form with the session's CSRF token.
func (p *pages) post(t *testing.T, who person, path string, form url.Values) reply {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", auth.CSRFToken(who.session))
	return p.send(t, who, "POST", path, form)
}

// signIn signs in through the sign-in form.
func (p *pages) signIn(t *testing.T, email, password string) person {
	t.Helper()
	r := p.send(t, person{}, "POST", "/console/sign-in", url.Values{"email": {email}, "password": {password}, "next": {"/console/pay/orders"}})
	cookies := (&http.Response{Header: r.header}).Cookies()
	if r.status != http.StatusSeeOther || r.location != "/console/pay/orders" || len(cookies) != 1 {
		t.Fatalf("sign in %s: %d → %s %v", email, r.status, r.location, cookies)
	}
	c := cookies[0]
	// The request is plain http: a Secure cookie would be dropped by the browser.
	if c.Name != auth.SessionCookie || !c.HttpOnly || c.Secure || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", c)
	}
	return person{session: c.Value}
}

// member adds a person with grants, signed in without a password (its hash is slow).
func (p *pages) member(t *testing.T, role string, grants map[string]string) person {
	t.Helper()
	ctx := context.Background()
	var perms []store.MemberPermission
	for app, actions := range grants {
		perms = append(perms, store.MemberPermission{App: app, Actions: actions})
	}
	u := &store.User{ID: ids.New(ids.User), OrgID: p.creds.OrgID, Email: ids.New("usr") + "@example.com", PasswordHash: "-",
		Role: role, CreatedAt: time.Now()}
	if err := p.store.CreateUser(ctx, u, perms); err != nil {
		t.Fatal(err)
	}
	token, sess, _ := auth.NewSession(u.ID, u.OrgID, time.Now(), time.Hour)
	if err := p.store.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	return person{session: token}
}

// api sends a JSON write to the API with a person's session and returns the id answered.
func (p *pages) api(t *testing.T, who person, path, body string) string {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(auth.CSRFHeader, auth.CSRFToken(who.session))
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: who.session})
	rec := httptest.NewRecorder()
	p.handler.ServeHTTP(rec, req)
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(rec.Body.String())
	if rec.Code >= 300 || id == nil {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	return id[1]
}

// page gets a page that must answer 200 and show each of want, and returns its HTML.
func (p *pages) page(t *testing.T, who person, path string, want ...string) string {
	t.Helper()
	r := p.get(t, who, path)
	if r.status != http.StatusOK {
		t.Fatalf("%s: %d %s", path, r.status, r.html)
	}
	for _, w := range want {
		if !strings.Contains(r.html, w) {
			t.Fatalf("%s does not show %q:\n%s", path, w, r.html)
		}
	}
	return r.html
}

func (p *pages) owner(t *testing.T) person {
	t.Helper()
	return p.signIn(t, p.creds.Owner.Email, p.creds.Owner.Password)
}

func TestSigningIn(t *testing.T) {
	p := newPages(t)

	// A stranger is sent to the sign-in page, which brings them back afterwards.
	r := p.get(t, person{}, "/console/pay/orders?status=confirmed")
	if r.status != http.StatusSeeOther || r.location != "/console/sign-in?next=%2Fconsole%2Fpay%2Forders%3Fstatus%3Dconfirmed" {
		t.Fatalf("a stranger: %d → %s", r.status, r.location)
	}
	if r := p.get(t, person{}, "/console/sign-in?next=%2Fconsole%2Fpay%2Forders"); r.status != 200 ||
		!strings.Contains(r.html, `name="next" value="/console/pay/orders"`) {
		t.Fatalf("sign-in page: %d", r.status)
	}

	// A wrong password: the form again, with the API's message, and the address kept.
	r = p.send(t, person{}, "POST", "/console/sign-in", url.Values{"email": {p.creds.Owner.Email}, "password": {"wrong"}})
	if r.status != http.StatusUnauthorized || !strings.Contains(r.html, "The email address or the password is wrong.") ||
		!strings.Contains(r.html, `value="`+p.creds.Owner.Email+`"`) || len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("wrong password: %d %s", r.status, r.html)
	}
	// Another site's form cannot sign the browser in (login CSRF).
	r = p.send(t, person{}, "POST", "/console/sign-in", url.Values{"email": {p.creds.Owner.Email}, "password": {p.creds.Owner.Password}},
		"Origin", "https://evil.example")
	if r.status != http.StatusForbidden || len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a cross-site sign-in: %d", r.status)
	}
	// After sign-in, the browser goes back within the console only.
	for next, want := range map[string]string{"//evil.example/x": "/console/", "https://evil.example": "/console/",
		"/console/\\evil": "/console/", "/console/trade/orders": "/console/trade/orders"} {
		r := p.send(t, person{}, "POST", "/console/sign-in", url.Values{"email": {p.creds.Owner.Email},
			"password": {p.creds.Owner.Password}, "next": {next}})
		if r.status != http.StatusSeeOther || r.location != want {
			t.Errorf("next=%s: %d → %s, want %s", next, r.status, r.location, want)
		}
	}

	owner := p.owner(t)
	home := p.get(t, owner, "/console/")
	if home.status != http.StatusSeeOther || home.location != "/console/treasury/" {
		t.Fatalf("the owner's home: %d → %s", home.status, home.location)
	}
	if r := p.get(t, owner, "/console/treasury/"); r.location != "/console/treasury/overview" {
		t.Fatalf("the treasury app's first page: %s", r.location)
	}
	overview := p.get(t, owner, "/console/treasury/overview")
	if overview.status != 200 || !strings.Contains(overview.html, "34,550,000.00 USD") {
		t.Fatalf("overview: %d", overview.status)
	}
	for header, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY",
		"Content-Security-Policy": "default-src 'self'"} {
		if got := overview.header.Get(header); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q", header, got)
		}
	}

	// Signing out ends the session on the spot.
	if r := p.post(t, owner, "/console/sign-out", nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/console/sign-in") {
		t.Fatalf("sign out: %d → %s", r.status, r.location)
	}
	if r := p.get(t, owner, "/console/treasury/overview"); r.status != http.StatusSeeOther {
		t.Fatalf("after signing out: %d", r.status)
	}
}

// Failed sign-ins count once, whichever door they come through: the API's or the console's.
func TestFailedSignInsShareOneLimit(t *testing.T) {
	// The clock stands still: no failure is forgiven while the test runs (bcrypt is slow
	// under the race detector).
	start := time.Now()
	p := newPagesAt(t, func() time.Time { return start })
	email := "nobody@example.com"
	for range 10 {
		req := httptest.NewRequest("POST", "/api/v1/sessions", strings.NewReader(`{"email":"`+email+`","password":"wrong"}`))
		req.Header.Set("Content-Type", "application/json")
		p.handler.ServeHTTP(httptest.NewRecorder(), req)
	}
	r := p.send(t, person{}, "POST", "/console/sign-in", url.Values{"email": {email}, "password": {"wrong"}})
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.html, "Too many failed sign-ins") {
		t.Fatalf("the console after ten failures at the API: %d", r.status)
	}
}

func TestFormsNeedTheSessionsToken(t *testing.T) {
	p := newPages(t)
	owner := p.owner(t)
	form := url.Values{"kind": {"sk"}, "label": {"forged"}}
	for name, headers := range map[string][]string{"no token": nil, "another session's token": {"X-Unused", ""}} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if headers != nil {
			f.Set("csrf", auth.CSRFToken("ses_someone_else"))
		}
		if r := p.send(t, owner, "POST", "/console/pay/api-keys", f); r.status != http.StatusForbidden {
			t.Errorf("%s: %d", name, r.status)
		}
	}
	f := url.Values{"kind": {"sk"}, "label": {"forged"}, "csrf": {auth.CSRFToken(owner.session)}}
	if r := p.send(t, owner, "POST", "/console/pay/api-keys", f, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
		t.Errorf("a cross-site form with the token: %d", r.status)
	}
	if r := p.get(t, owner, "/console/pay/api-keys"); strings.Contains(r.html, "forged") {
		t.Fatal("a refused form made a key")
	}
}

func TestSecretsAreShownOnce(t *testing.T) {
	p := newPages(t)
	owner := p.owner(t)
	r := p.post(t, owner, "/console/pay/api-keys", url.Values{"kind": {"tk"}, "actions": {"read", "write"},
		"resourceIds": {p.creds.Wallets[0].ID}, "label": {"payouts"}})
	secret := regexp.MustCompile(`value="(tk_[^"]+)"`).FindStringSubmatch(r.html)
	if r.status != http.StatusCreated || secret == nil || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create a key: %d %s", r.status, r.html)
	}
	k, err := auth.NewAuthenticator(p.store).Authenticate(context.Background(), secret[1])
	if err != nil || k.App != "pay" || strings.Join(k.Actions, ",") != "read,write" || len(k.ResourceIDs) != 1 {
		t.Fatalf("the key made: %+v %v", k, err)
	}
	if list := p.get(t, owner, "/console/pay/api-keys"); !strings.Contains(list.html, "payouts") || strings.Contains(list.html, secret[1]) {
		t.Fatal("the keys page lists the key without its secret: it does not")
	}

	// Invalid input comes back as a message on the page it came from.
	r = p.post(t, owner, "/console/pay/api-keys", url.Values{"kind": {"tk"}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/console/pay/api-keys?error=") {
		t.Fatalf("a tk_ key without actions: %d → %s", r.status, r.location)
	}
	if page := p.get(t, owner, r.location); !strings.Contains(page.html, `role="alert"`) || !strings.Contains(page.html, "actions") {
		t.Fatalf("the message: %s", page.html)
	}

	// A member is invited with a one-time link, never a password; they choose their own.
	r = p.post(t, owner, "/console/pay/team", url.Values{"email": {"new@example.com"}, "actions": {"approve"}})
	link := regexp.MustCompile(`id="secret" readonly value="http://example.com(/console/welcome\?token=(sil_[^"]+))"`).FindStringSubmatch(r.html)
	if r.status != http.StatusCreated || link == nil {
		t.Fatalf("invite: %d %s", r.status, r.html)
	}
	if page := p.get(t, person{}, html.UnescapeString(link[1])); page.status != http.StatusOK || !strings.Contains(page.html, "new@example.com") {
		t.Fatalf("the link's page: %d %s", page.status, page.html)
	}
	chosen := "a password of their own"
	set := p.send(t, person{}, "POST", "/console/welcome", url.Values{"token": {link[2]}, "password": {chosen}, "confirm": {chosen}})
	if set.status != http.StatusSeeOther || set.location != "/console/" {
		t.Fatalf("setting the password: %d → %s %s", set.status, set.location, set.html)
	}
	if again := p.send(t, person{}, "POST", "/console/welcome", url.Values{"token": {link[2]}, "password": {chosen}, "confirm": {chosen}}); again.status != http.StatusNotFound {
		t.Fatalf("the link used twice: %d", again.status)
	}
	if member := p.signIn(t, "new@example.com", chosen); member.session == "" {
		t.Fatal("the invited member cannot sign in")
	}
}

func TestPagesFollowPermissions(t *testing.T) {
	p := newPages(t)
	approver := p.member(t, auth.RoleMember, map[string]string{"pay": "approve"})
	r := p.get(t, approver, "/console/pay/approvals")
	if r.status != 200 {
		t.Fatalf("approvals: %d", r.status)
	}
	nav := regexp.MustCompile(`<nav aria-label="Pay pages"[\s\S]*?</nav>`).FindString(r.html)
	if !strings.Contains(nav, "Approvals") || strings.Contains(nav, "API keys") || strings.Contains(nav, "Orders") {
		t.Fatalf("the approver's menu: %s", nav)
	}
	for _, path := range []string{"/console/pay/api-keys", "/console/pay/orders", "/console/pay/team", "/console/pay/logs", "/console/treasury/overview"} {
		if r := p.get(t, approver, path); r.status != http.StatusForbidden {
			t.Errorf("the approver at %s: %d", path, r.status)
		}
	}
	if r := p.post(t, approver, "/console/pay/api-keys", url.Values{"kind": {"sk"}}); r.status != http.StatusForbidden {
		t.Errorf("the approver making a key: %d", r.status)
	}

	// A developer reads the team page but only the owner changes it.
	developer := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	team := p.get(t, developer, "/console/pay/team")
	if team.status != 200 || strings.Contains(team.html, `action="team"`) || !strings.Contains(team.html, "Only the organisation's owner") {
		t.Fatalf("the developer's team page: %d", team.status)
	}
	if r := p.post(t, developer, "/console/pay/team", url.Values{"email": {"x@example.com"}, "actions": {"read"}}); !strings.Contains(r.location, "error=Only+the+organisation") {
		t.Fatalf("the developer inviting: %d → %s", r.status, r.location)
	}
	if r := p.get(t, developer, "/console/nowhere/orders"); r.status != http.StatusNotFound {
		t.Fatalf("an unknown app: %d", r.status)
	}
}

// Deciding from the approvals page follows the API's rules: maker-checker, one decision
// per person, nothing on a closed item; each refusal is said on the page.
func TestDecidingFollowsTheAPIsRules(t *testing.T) {
	p := newPages(t)
	ctx := context.Background()
	maker := p.member(t, auth.RoleMember, map[string]string{"pay": "read,write,approve"})
	checker := p.member(t, auth.RoleMember, map[string]string{"pay": "read,approve"})
	makerPrincipal, err := auth.NewAuthenticator(p.store).AuthenticateSession(ctx, maker.session)
	if err != nil {
		t.Fatal(err)
	}
	// A payment the maker made and submitted through the API; the workflow, faked here,
	// would open its approval item.
	orderID := p.api(t, maker, "/api/v1/payments", `{"walletId":"`+p.creds.Wallets[0].ID+
		`","asset":"USDC","amount":"20000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	p.api(t, maker, "/api/v1/payments/"+orderID+"/submit", `{}`)
	now := time.Now()
	item := &store.ApprovalItem{ID: ids.New(ids.ApprovalItem), OrgID: p.creds.OrgID, App: "pay", Domain: "payment", OrderID: orderID,
		Status: "pending", RequiredApprovals: 1, Reason: "orders worth 20000.00 USD need 1 approval(s)", PayloadHash: "h",
		Summary:   `{"amountUsd":"20000.00","walletId":"` + p.creds.Wallets[0].ID + `","chain":"ethereum","details":{"asset":"USDC","amount":"20000"}}`,
		CreatedBy: makerPrincipal.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := p.store.CreateApprovalItem(ctx, item); err != nil {
		t.Fatal(err)
	}
	page := p.get(t, checker, "/console/pay/approvals")
	if !strings.Contains(page.html, "20,000.00 USD") || !strings.Contains(page.html, `action="approvals/`+item.ID+`/decide"`) {
		t.Fatalf("the pending item on the page: %s", page.html)
	}
	decide := "/console/pay/approvals/" + item.ID + "/decide"
	r := p.post(t, maker, decide, url.Values{"decision": {"APPROVE"}})
	if !strings.Contains(r.location, "error=") || !strings.Contains(r.location, "creator+of+an+order") {
		t.Fatalf("the maker approving: %s", r.location)
	}
	r = p.post(t, checker, decide, url.Values{"decision": {"APPROVE"}, "comment": {"ok"}})
	if !strings.Contains(r.location, "notice=Approved") {
		t.Fatalf("the checker approving: %s", r.location)
	}
	r = p.post(t, checker, decide, url.Values{"decision": {"REJECT"}})
	if !strings.Contains(r.location, "error=") {
		t.Fatalf("deciding again: %s", r.location)
	}
	if r := p.get(t, checker, "/console/pay/approvals?status=all"); strings.Contains(r.html, `class="decide"`) || !strings.Contains(r.html, "approved") {
		t.Fatalf("the closed item still offers a decision")
	}
	order := p.get(t, checker, "/console/pay/orders/"+orderID)
	if order.status != 200 || !strings.Contains(order.html, `href="http://temporal-ui.test/namespaces/treasury/workflows/order-`+orderID+`"`) ||
		!strings.Contains(order.html, `http-equiv="refresh"`) {
		t.Fatalf("the order page: %d %s", order.status, order.html)
	}
	// createdBy on the page is the credential the API names: here the maker's session.
	if !strings.Contains(order.html, `<dt>Created by</dt><dd><code>`+makerPrincipal.ID+`</code> at`) {
		t.Fatalf("the order page does not name its creator %s: %s", makerPrincipal.ID, order.html)
	}
}

func TestGroupedAmounts(t *testing.T) {
	for in, want := range map[string]string{"0.00": "0.00", "999": "999", "1000": "1,000", "31050000.00": "31,050,000.00",
		"-1234567.891": "-1,234,567.891", "100000": "100,000"} {
		if got := console.Grouped(in); got != want {
			t.Errorf("Grouped(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestRequestsAreLimitedPerAddress(t *testing.T) {
	s := storetest.NewSQLite(t)
	h := api.NewRouter(withPages(t, api.Config{
		Store:     s,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		RateBurst: 3,
		RateLimit: 0.001,
		Service:   &service.Service{Store: s, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
	}, console.Options{}))
	status := func(addr string) int {
		req := httptest.NewRequest("GET", "/console/sign-in", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 3 {
		if got := status("192.0.2.1:1000"); got != http.StatusOK {
			t.Fatalf("request %d: %d", i+1, got)
		}
	}
	if got := status("192.0.2.1:1001"); got != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d", got)
	}
	if got := status("192.0.2.2:1000"); got != http.StatusOK {
		t.Fatalf("another address: %d", got)
	}
}

// site serves a router on a real listener and reaches it the way a browser on another
// machine would: under a host name that is not loopback (browsers and Go's cookie jar alike
// let a Secure cookie ride over plain http to localhost only), with a cookie jar that keeps
// the session. through, when set, stands for a proxy that ends TLS in front of the
// service: the browser speaks https to it, and it forwards plain http to the service
// from 127.0.0.1 with X-Forwarded-Proto: https.
type site struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newSite(t *testing.T, h http.Handler, scheme, host string, tlsHere, through bool) *site {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	if tlsHere {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	addr := srv.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	if tr.TLSClientConfig != nil {
		tr.TLSClientConfig.ServerName = "example.com" // the name httptest's certificate is for
	}
	var rt http.RoundTripper = tr
	if through {
		rt = tlsProxy{tr}
	}
	jar, _ := cookiejar.New(nil)
	return &site{t: t, base: scheme + "://" + host, client: &http.Client{Jar: jar, Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type tlsProxy struct{ next http.RoundTripper }

func (p tlsProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme = "http"
	r.Header.Set("X-Forwarded-Proto", "https")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	return p.next.RoundTrip(r)
}

func (s *site) do(method, path, body string, headers ...string) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// Sign-in works on any host, over http too: the session cookie is Secure exactly when the
// browser reached the service over https (TLS here, or a trusted proxy's
// X-Forwarded-Proto), through the console's form and the API's POST /sessions alike, and
// the browser is signed in on its next request.
func TestSessionCookieFollowsTheScheme(t *testing.T) {
	s := storetest.NewSQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	router := func(trusted ...string) http.Handler {
		return api.NewRouter(withPages(t, api.Config{Store: s, Log: log, TrustedProxies: trusted, Service: &service.Service{Store: s, Log: log, Workflows: allowAll{}}}, console.Options{}))
	}
	for _, tc := range []struct {
		name             string
		scheme, host     string
		tlsHere, through bool
		trusted          []string
		secure           bool
	}{
		{name: "http on a LAN name", scheme: "http", host: "treasury.internal:8080"},
		{name: "https", scheme: "https", host: "treasury.example.com", tlsHere: true, secure: true},
		{name: "https ended by a trusted proxy", scheme: "https", host: "treasury.internal", through: true,
			trusted: []string{"127.0.0.1"}, secure: true},
		// An untrusted peer's X-Forwarded-Proto is not believed: the cookie would still be
		// kept by the browser, but nothing said it came over https.
		{name: "X-Forwarded-Proto from an untrusted peer", scheme: "https", host: "treasury.internal", through: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := router(tc.trusted...)
			form := "application/x-www-form-urlencoded"
			for _, door := range []struct {
				name, path, contentType, body, check string
				status                               int
				signOut                              func(st *site, token string) *http.Response
			}{
				{"console", "/console/sign-in", form,
					url.Values{"email": {creds.Owner.Email}, "password": {creds.Owner.Password}, "next": {"/console/pay/orders"}}.Encode(),
					"/console/pay/orders", http.StatusSeeOther, func(st *site, token string) *http.Response {
						resp, _ := st.do("POST", "/console/sign-out", url.Values{"csrf": {auth.CSRFToken(token)}}.Encode(), "Content-Type", form)
						return resp
					}},
				{"API", "/api/v1/sessions", "application/json",
					`{"email":"` + creds.Owner.Email + `","password":"` + creds.Owner.Password + `"}`,
					"/api/v1/session", http.StatusCreated, func(st *site, token string) *http.Response {
						resp, _ := st.do("DELETE", "/api/v1/session", "", auth.CSRFHeader, auth.CSRFToken(token))
						return resp
					}},
			} {
				st := newSite(t, h, tc.scheme, tc.host, tc.tlsHere, tc.through)
				resp, body := st.do("POST", door.path, door.body, "Content-Type", door.contentType)
				cookies := resp.Cookies()
				if resp.StatusCode != door.status || len(cookies) != 1 {
					t.Fatalf("%s sign-in: %d %v %s", door.name, resp.StatusCode, cookies, body)
				}
				c := cookies[0]
				if c.Name != auth.SessionCookie || c.Secure != tc.secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
					t.Errorf("%s sign-in: cookie %+v, want Secure=%v", door.name, c, tc.secure)
				}
				if resp, _ := st.do("GET", door.check, ""); resp.StatusCode != http.StatusOK {
					t.Fatalf("%s sign-in, then GET %s: %d %s, want signed in", door.name, door.check, resp.StatusCode, resp.Header.Get("Location"))
				}
				out := door.signOut(st, c.Value)
				if cleared := out.Cookies(); len(cleared) != 1 || cleared[0].MaxAge >= 0 || cleared[0].Secure != tc.secure {
					t.Errorf("%s sign-out: %d, cookies %+v, want one cleared with Secure=%v", door.name, out.StatusCode, cleared, tc.secure)
				}
				if resp, _ := st.do("GET", door.check, ""); resp.StatusCode == http.StatusOK {
					t.Errorf("%s sign-out, then GET %s: still signed in", door.name, door.check)
				}
			}
		})
	}
}

// The WebSockets page gives each config the URL that connects to it on this service: ws
// or wss as the browser reached the page, the page's host, the config's id and a place for
// the key.
func TestWebSocketsPageShowsTheURLThatWorks(t *testing.T) {
	p := newPages(t)
	developer := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	var ids []string
	for range 2 {
		ids = append(ids, p.api(t, developer, "/developer/websockets?app=pay", `{"events":["order.*"]}`))
	}
	for _, tc := range []struct {
		name             string
		scheme, host     string
		tlsHere, through bool
		trusted          []string
		want             string
	}{
		{name: "http", scheme: "http", host: "treasury.internal:8080", want: "ws://treasury.internal:8080"},
		{name: "https", scheme: "https", host: "treasury.example.com", tlsHere: true, want: "wss://treasury.example.com"},
		{name: "https ended by a trusted proxy", scheme: "https", host: "treasury.internal", through: true,
			trusted: []string{"127.0.0.0/8"}, want: "wss://treasury.internal"},
		{name: "X-Forwarded-Proto from an untrusted peer", scheme: "https", host: "treasury.internal", through: true,
			want: "ws://treasury.internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := api.NewRouter(withPages(t, api.Config{
				Store:          p.store,
				Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
				TrustedProxies: tc.trusted,
				Service:        &service.Service{Store: p.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Workflows: allowAll{}},
			}, console.Options{}))
			st := newSite(t, h, tc.scheme, tc.host, tc.tlsHere, tc.through)
			resp, page := st.do("GET", "/console/pay/websockets", "", "Cookie", auth.SessionCookie+"="+developer.session)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the WebSockets page: %d", resp.StatusCode)
			}
			for _, id := range ids {
				want := tc.want + "/api/v1/ws?id=" + id + "&amp;token=<var>&lt;your pk_ key&gt;</var>"
				if !strings.Contains(page, want) {
					t.Errorf("the page does not show %s for %s:\n%s", want, id, page)
				}
			}
			if strings.Contains(page, "…/api/v1/ws") {
				t.Error("the page still shows a URL with an ellipsis for a host")
			}
		})
	}
}

// An empty orders page names the API route that creates the app's orders: the route the
// router registers for the domain, which answers.
func TestEmptyOrdersPagesNameTheirRoute(t *testing.T) {
	p := newPages(t)
	owner := p.owner(t)
	for _, d := range orders.Domains {
		page := p.get(t, owner, "/console/"+d.App+"/orders")
		route := regexp.MustCompile(`<code>POST (/api/v1/[a-z-]+)</code>`).FindStringSubmatch(page.html)
		if page.status != http.StatusOK || route == nil || route[1] != "/api/v1/"+d.Collection {
			t.Errorf("the empty %s orders page names %v, want POST /api/v1/%s", d.App, route, d.Collection)
			continue
		}
		r := p.send(t, owner, "POST", route[1], nil, "Content-Type", "application/json",
			auth.CSRFHeader, auth.CSRFToken(owner.session))
		if r.status == http.StatusNotFound {
			t.Errorf("POST %s, named on the %s orders page: %d %s", route[1], d.App, r.status, r.html)
		}
	}
}

// The sign-in page names the file the dev bundle wrote the owner's sign-in to, where it
// really is, and names none where nothing wrote one (production).
func TestSignInPageNamesTheCredentialsFile(t *testing.T) {
	s := storetest.NewSQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name string
		opts console.Options
	}{
		{"production", console.Options{}},
		{"dev bundle", console.Options{CredentialsFile: "/srv/treasury dev/credentials.json"}},
	} {
		h := api.NewRouter(withPages(t, api.Config{Store: s, Log: log, Service: &service.Service{Store: s, Log: log}}, tc.opts))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/sign-in", nil))
		page := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: the sign-in page: %d", tc.name, rec.Code)
		}
		named := regexp.MustCompile(`<code>([^<]*credentials\.json)</code>`).FindAllStringSubmatch(page, -1)
		if want := tc.opts.CredentialsFile; (want == "" && named != nil) || (want != "" && (len(named) != 1 || named[0][1] != want)) {
			t.Errorf("%s: the sign-in page names %v, want %q", tc.name, named, want)
		}
	}
}

// withPages puts the console's pages beside a router's routes, as the process does: on
// the router's service, authenticator and sign-in service.
func withPages(t testing.TB, cfg api.Config, opts console.Options) api.Config {
	t.Helper()
	cfg.Authn = auth.NewAuthenticator(cfg.Store)
	cfg.Sessions = api.NewSessions(cfg)
	pages, err := console.New(console.Config{Service: cfg.Service, Sessions: cfg.Sessions, Authn: cfg.Authn, Log: cfg.Log, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pages = pages
	return cfg
}

// The policy page's drafts and versions follow the API's rules: a draft changes nothing
// until published; once the policy asks for change approvals, its author cannot approve
// it and another person's approval publishes it; a rollback is a draft like any other, or
// published at once where no approval is asked for. Refused input comes back as typed.
func TestPolicyDraftsAndVersions(t *testing.T) {
	p := newPages(t)
	author := p.member(t, auth.RoleMember, map[string]string{"pay": "developer", "trade": "developer"})
	checker := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	draftOf := func(t *testing.T, r reply) string {
		t.Helper()
		m := regexp.MustCompile(`^/console/pay/policy/drafts/(pdr_[0-9a-f]+)\?notice=`).FindStringSubmatch(r.location)
		if r.status != http.StatusSeeOther || m == nil {
			t.Fatalf("a draft saved: %d → %s %s", r.status, r.location, r.html)
		}
		return m[1]
	}
	notice := func(t *testing.T, r reply, path, want string) {
		t.Helper()
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, path+"?notice=") {
			t.Fatalf("%d → %s, want %s with a notice", r.status, r.location, path)
		}
		if got, _ := url.QueryUnescape(strings.TrimPrefix(r.location, path+"?notice=")); !strings.Contains(got, want) {
			t.Fatalf("the notice %q does not say %q", got, want)
		}
	}
	refusal := func(t *testing.T, r reply, path, want string) {
		t.Helper()
		got, _ := url.QueryUnescape(strings.TrimPrefix(r.location, path+"?error="))
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, path+"?error=") || !strings.Contains(got, want) {
			t.Fatalf("%d → %s, want %s saying %q", r.status, r.location, path, want)
		}
	}
	page := p.page

	html := page(t, author, "/console/pay/policy", "In force: version 1", `href="/console/pay/policy/versions/1"`, "No open drafts.",
		`action="/console/pay/policy/drafts"`, "Publish now, without a draft")
	// The dry run starts from one of the organisation's EVM wallets for a person who may
	// list them (read on an app); the author, a developer without read, fills one in.
	sampleWallet := regexp.MustCompile(`walletId&#34;: &#34;(wal_[^&]+)&#34;`)
	if sample := sampleWallet.FindStringSubmatch(html); sample == nil || sample[1] != "wal_…" {
		t.Fatalf("the author's sample order: %v", sample)
	}
	sample := sampleWallet.FindStringSubmatch(page(t, p.owner(t), "/console/pay/policy", "In force: version 1"))
	if sample == nil || !slices.ContainsFunc(p.creds.Wallets, func(w seed.Wallet) bool { return w.ID == sample[1] && w.Chain != "solana" }) {
		t.Fatalf("the owner's sample order names no EVM wallet of the organisation: %v", sample)
	}

	// Rules that do not parse: the page again, saying why, with the text as typed.
	r := p.post(t, author, "/console/pay/policy/drafts", url.Values{"rules": {`{"maxOrderUsd": 5}`}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.html, `role="alert"`) ||
		!strings.Contains(r.html, "maxOrderUsd must be a decimal string") || !strings.Contains(r.html, `{&#34;maxOrderUsd&#34;: 5}</textarea>`) {
		t.Fatalf("a draft with bad rules: %d %s", r.status, r.html)
	}

	// changeApprovals 1, from a draft published directly: the policy asks for no approval yet.
	seedRules := `"maxOrderUsd":"5000000","destinationWhitelist":["0x1111111111111111111111111111111111111111","0x2222222222222222222222222222222222222222"],` +
		`"approvalTiers":[{"minUsd":"10000","quorum":1}]`
	id := draftOf(t, p.post(t, author, "/console/pay/policy/drafts", url.Values{"rules": {`{` + seedRules + `,"changeApprovals":1}`}}))
	html = page(t, author, "/console/pay/policy/drafts/"+id, "0 of 0", "changeApprovals", `action="/console/pay/policy/drafts/`+id+`/publish"`)
	if strings.Contains(html, "/approve\"") {
		t.Fatal("a draft that needs no approval offers Approve")
	}
	notice(t, p.post(t, author, "/console/pay/policy/drafts/"+id+"/publish", nil), "/console/pay/policy", "Published as version 2")
	html = page(t, author, "/console/pay/policy", "In force: version 2", "<strong>1 person(s)</strong> other than its author")
	if strings.Contains(html, "Publish now") {
		t.Fatal("the policy page offers to publish without a draft though changes need an approval")
	}
	// Publishing without a draft is refused now, and says where to go.
	r = p.post(t, author, "/console/pay/policy", url.Values{"rules": {`{}`}})
	if r.status != http.StatusConflict || !strings.Contains(r.html, "need 1 approval(s)") {
		t.Fatalf("PUT with changeApprovals 1: %d %s", r.status, r.html)
	}

	// A draft needing one approval: what it changes from the version in force.
	rules := `{` + strings.Replace(seedRules, `,"0x2222222222222222222222222222222222222222"`, "", 1) +
		`,"changeApprovals":1,"windows":[{"scope":"wallet","hours":24,"limitUsd":"100000"}]}`
	rules = strings.Replace(rules, `"5000000"`, `"250000"`, 1)
	id = draftOf(t, p.post(t, author, "/console/pay/policy/drafts", url.Values{"rules": {rules}}))
	html = page(t, author, "/console/pay/policy/drafts/"+id, "0 of 1",
		`maxOrderUsd changed from &#34;5000000&#34; to &#34;250000&#34;`, `<span class="status k-changed">changed</span>`,
		`<code>windows</code>`, `<code>{&#34;scope&#34;:&#34;wallet&#34;,&#34;hours&#34;:24,&#34;limitUsd&#34;:&#34;100000&#34;}</code>`,
		`class="minus"`, `&#34;0x2222222222222222222222222222222222222222&#34;`, "you cannot approve it")
	if strings.Contains(html, `/approve"`) || strings.Contains(html, `/publish"`) {
		t.Fatal("the author is offered Approve or Publish")
	}
	page(t, author, "/console/pay/policy", `href="/console/pay/policy/drafts/`+id+`"`, "0 of 1",
		"<code>maxOrderUsd</code>, <code>destinationWhitelist</code>, <code>windows</code>")

	// The author's own approval, forced, is refused with the service's reason; so is
	// publishing before the approval.
	refusal(t, p.post(t, author, "/console/pay/policy/drafts/"+id+"/approve", nil), "/console/pay/policy/drafts/"+id,
		"The author of a draft cannot approve it.")
	refusal(t, p.post(t, author, "/console/pay/policy/drafts/"+id+"/publish", nil), "/console/pay/policy/drafts/"+id,
		"0 of the 1 approval(s)")

	// Edited: bad rules come back as typed; good ones are saved.
	r = p.post(t, author, "/console/pay/policy/drafts/"+id, url.Values{"rules": {`{"windows":[{"scope":"planet","hours":1,"limitUsd":"1"}]}`}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.html, "scope must be one of") || !strings.Contains(r.html, "planet") {
		t.Fatalf("a draft saved with bad rules: %d %s", r.status, r.html)
	}
	rules = strings.Replace(rules, `"250000"`, `"300000"`, 1)
	notice(t, p.post(t, author, "/console/pay/policy/drafts/"+id, url.Values{"rules": {rules}}), "/console/pay/policy/drafts/"+id, "Draft saved")
	page(t, author, "/console/pay/policy/drafts/"+id, `&#34;300000&#34;`)

	// The dry run, against the draft: its window's headroom.
	r = p.post(t, author, "/console/pay/policy/evaluate", url.Values{"draft": {id}, "order": {`{"walletId":"` + p.creds.Wallets[0].ID +
		`","asset":"USDC","amount":"25000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`}})
	for _, want := range []string{"draft <code>" + id + "</code>, based on version 2", "needs 1 approval(s)", "Volume windows",
		"<td>wallet</td><td><code>" + p.creds.Wallets[0].ID + "</code></td><td class=\"num\">24</td><td class=\"num\">100,000.00</td>",
		`<option value="` + id + `" selected>`} {
		if r.status != http.StatusOK || !strings.Contains(r.html, want) {
			t.Fatalf("the dry run against the draft does not show %q: %d %s", want, r.status, r.html)
		}
	}

	// Another person approves it, which publishes it.
	page(t, checker, "/console/pay/policy/drafts/"+id, "Approve and publish")
	notice(t, p.post(t, checker, "/console/pay/policy/drafts/"+id+"/approve", nil), "/console/pay/policy", "Approved and published as version 3")
	page(t, checker, "/console/pay/policy", "In force: version 3", "No open drafts.", ", approved by ")
	page(t, checker, "/console/pay/policy/versions/3", "What it changed from", `href="/console/pay/policy/versions/2"`, "maxOrderUsd changed from",
		`href="/console/pay/policy/drafts/`+id+`"`)
	if html := page(t, checker, "/console/pay/policy/versions/3"); strings.Contains(html, "/rollback") {
		t.Fatal("the version in force offers a rollback to itself")
	}

	// A rollback to version 2 is a draft that needs an approval too: the checker starts
	// it, the author approves it.
	page(t, checker, "/console/pay/policy/versions/2", "Roll back to version 2", "starts a draft")
	rollback := draftOf(t, p.post(t, checker, "/console/pay/policy/versions/2/rollback", nil))
	page(t, author, "/console/pay/policy/drafts/"+rollback, "a rollback", "maxOrderUsd changed from &#34;300000&#34; to &#34;5000000&#34;")
	notice(t, p.post(t, author, "/console/pay/policy/drafts/"+rollback+"/approve", nil), "/console/pay/policy", "published as version 4")
	page(t, author, "/console/pay/policy", "In force: version 4", "a rollback to <a href=\"/console/pay/policy/versions/2\">version 2</a>",
		"rollback to version 2")

	// Discarded, a draft is closed: nothing to approve, publish or edit.
	id = draftOf(t, p.post(t, author, "/console/pay/policy/drafts", url.Values{"rules": {`{}`}}))
	notice(t, p.post(t, author, "/console/pay/policy/drafts/"+id+"/discard", nil), "/console/pay/policy", "discarded")
	if html := page(t, checker, "/console/pay/policy/drafts/"+id, "discarded"); strings.Contains(html, "<form method=\"post\" action=\"/console/pay/policy/drafts/") {
		t.Fatal("a discarded draft offers a form")
	}

	// Where no approval is asked for, a rollback is published at once.
	notice(t, p.post(t, author, "/console/trade/policy/versions/1/rollback", nil), "/console/trade/policy", "Version 1 restored: published as version 2")

	for _, path := range []string{"/console/pay/policy/versions/99", "/console/pay/policy/versions/x", "/console/pay/policy/drafts/pdr_nothing"} {
		if r := p.get(t, author, path); r.status != http.StatusNotFound {
			t.Errorf("%s: %d", path, r.status)
		}
	}
	// Someone with Write but not Developer tries orders against the policy in force only.
	writer := p.member(t, auth.RoleMember, map[string]string{"pay": "write"})
	if html := page(t, writer, "/console/pay/policy", "Dry run"); strings.Contains(html, "History") || strings.Contains(html, "pdr_") {
		t.Fatal("the dry run page shows a writer the policy's history or drafts")
	}
}

// pastPayment is a payment of 0x1111… from the first wallet, submitted an hour ago and
// decided by its policy as decided says.
func (p *pages) pastPayment(t *testing.T, who person, amount string, decided workflows.PolicyDecision) string {
	t.Helper()
	id := p.api(t, who, "/api/v1/payments", `{"walletId":"`+p.creds.Wallets[0].ID+`","asset":"USDC","amount":"`+amount+
		`","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	decision, _ := json.Marshal(decided)
	_, err := p.store.ApplyOrderStep(t.Context(), store.OrderChange{OrderID: id, Step: "submitted", To: orders.StatusSubmitted, CorrelationID: "c",
		Mutate: func(o *store.Order, _ []store.OrderLeg) {
			at, doc := time.Now().Add(-time.Hour), string(decision)
			o.SubmittedAt, o.PolicyDecision, o.PolicyAllowed = &at, &doc, decided.Allowed
		}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// compact is a page's HTML without the white space between its tags.
func compact(html string) string { return regexp.MustCompile(`>\s+<`).ReplaceAllString(html, "><") }

// A draft's dry run against history, started from the draft's page: the run's page shows
// its progress and reloads itself while it runs; then, beside what the draft changes,
// what would have changed, shift by shift with the first orders linked, and rule by rule.
// The draft's page and the policy page list the latest runs. What the service refuses
// goes back to the draft, saying why; another app's run is not found.
func TestPolicyDryRunAgainstHistory(t *testing.T) {
	p := newPages(t)
	author := p.member(t, auth.RoleMember, map[string]string{"pay": "read,write,developer"})
	small := p.pastPayment(t, author, "50", workflows.PolicyDecision{Allowed: true, PolicyVersion: 1})
	large := p.pastPayment(t, author, "20000", workflows.PolicyDecision{Allowed: true, ApprovalRequired: true, Quorum: 1, PolicyVersion: 1})
	r := p.post(t, author, "/console/pay/policy/drafts", url.Values{"rules": {`{"maxOrderUsd":"10000","approvalTiers":[{"minUsd":"10","quorum":1}]}`}})
	m := regexp.MustCompile(`^(/console/pay/policy/drafts/(pdr_[0-9a-f]+))\?notice=`).FindStringSubmatch(r.location)
	if m == nil {
		t.Fatalf("a draft saved: %d → %s", r.status, r.location)
	}
	draft, draftID := m[1], m[2]
	html := p.page(t, author, draft, "Dry run against history", `<form method="post" action="`+draft+`/dry-runs"`,
		`name="days" type="number" min="1" max="366" value="30"`)
	if strings.Contains(html, "/policy/dry-runs/") {
		t.Fatal("a draft never tried against history lists a dry run")
	}

	// Held by the worker, the run is running: its page says how far it is, and reloads.
	p.dryRuns.held = true
	r = p.post(t, author, draft+"/dry-runs", url.Values{"days": {"7"}})
	m = regexp.MustCompile(`^/console/pay/policy/dry-runs/(pdx_[0-9a-f]{32})$`).FindStringSubmatch(r.location)
	if r.status != http.StatusSeeOther || m == nil {
		t.Fatalf("start a dry run: %d → %s %s", r.status, r.location, r.html)
	}
	run, runID := r.location, m[1]
	p.page(t, author, run, `<meta http-equiv="refresh" content="2">`, `id="dry-run-status">running</span>`,
		`<span id="dry-run-progress">0 of 2</span>`, "in the last 7 day(s)", `href="`+draft+`"`, "reloads every 2 seconds",
		"maxOrderUsd changed from &#34;5000000&#34; to &#34;10000&#34;", "What the draft changes from version 1, in force")

	// Run by the worker to its end: the report beside the diff.
	p.dryRuns.held = false
	if err := p.dryRuns.run(t.Context(), runID); err != nil {
		t.Fatal(err)
	}
	html = compact(p.page(t, author, run))
	for _, want := range []string{`id="dry-run-status">completed</span>`, `<span id="dry-run-progress">2 of 2</span>`,
		"<strong>2</strong> order(s) evaluated: <strong>2</strong> would have had another outcome under the draft, 0 the same.",
		`<td><a href="#allowedToRefused">Would be refused (now allowed)</a></td><td class="num">1</td>`,
		`<td><a href="#approvalAdded">Would need approval (now none)</a></td><td class="num">1</td>`,
		`<td>Would be allowed (now refused)</td><td class="num">0</td>`,
		`<td class="num">20,000.00</td><td>allowed with 1 approval(s)</td><td>refused: maxOrderUsd</td>`,
		`<td class="num">50.00</td><td>allowed, no approval</td><td>allowed with 1 approval(s)</td>`,
		`<td><code>maxOrderUsd</code></td><td class="num">1</td><td class="num">0</td>`, "maxOrderUsd changed from"} {
		if !strings.Contains(html, want) {
			t.Fatalf("the completed dry run does not show %q:\n%s", want, html)
		}
	}
	// Each order under its shift, linked to its page.
	refused, added := strings.Index(html, `<h3 id="allowedToRefused">`), strings.Index(html, `<h3 id="approvalAdded">`)
	largeAt, smallAt := strings.Index(html, `<a href="/console/pay/orders/`+large+`">`), strings.Index(html, `<a href="/console/pay/orders/`+small+`">`)
	if refused < 0 || added < refused || largeAt < refused || largeAt > added || smallAt < added {
		t.Fatalf("the orders are not under their shifts (%d, %d, %d, %d):\n%s", refused, added, largeAt, smallAt, html)
	}
	if strings.Contains(html, `http-equiv="refresh"`) {
		t.Fatal("a completed dry run's page still reloads itself")
	}

	// The draft's page and the policy page list it, to another developer too.
	checker := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	link := `<a href="/console/pay/policy/dry-runs/` + runID + `">`
	for _, path := range []string{draft, "/console/pay/policy"} {
		if html := compact(p.page(t, checker, path)); !strings.Contains(html, link) || !strings.Contains(html, ` 2 of 2</td><td class="num">2</td>`) {
			t.Fatalf("%s does not list the dry run:\n%s", path, html)
		}
	}

	// Unheld, a run ends within its start; no days asks for the default 30.
	r = p.post(t, author, draft+"/dry-runs", nil)
	p.page(t, author, r.location, `id="dry-run-status">completed</span>`, "in the last 30 day(s)")

	// Refused: days out of range or not a number, back to the draft saying why.
	for _, days := range []string{"400", "0", "soon"} {
		r = p.post(t, author, draft+"/dry-runs", url.Values{"days": {days}})
		got, _ := url.QueryUnescape(strings.TrimPrefix(r.location, draft+"?error="))
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, draft+"?error=") || !strings.Contains(got, "days must be from 1 to 366") {
			t.Fatalf("a dry run of %q days: %d → %s", days, r.status, r.location)
		}
	}
	// Someone who may not read the policy's drafts, another app, no such run.
	writer := p.member(t, auth.RoleMember, map[string]string{"pay": "write"})
	if r := p.get(t, writer, run); r.status != http.StatusForbidden {
		t.Errorf("a writer on a dry run's page: %d", r.status)
	}
	if r := p.post(t, writer, draft+"/dry-runs", nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, draft+"?error=") {
		t.Errorf("a writer starts a dry run: %d → %s", r.status, r.location)
	}
	trade := p.member(t, auth.RoleMember, map[string]string{"pay": "developer", "trade": "developer"})
	for _, path := range []string{"/console/trade/policy/dry-runs/" + runID, "/console/pay/policy/dry-runs/pdx_nothing"} {
		if r := p.get(t, trade, path); r.status != http.StatusNotFound {
			t.Errorf("%s: %d", path, r.status)
		}
	}
	if r := p.post(t, trade, "/console/trade/policy/drafts/"+draftID+"/dry-runs", nil); !strings.Contains(r.location, "error=") {
		t.Errorf("a dry run of pay's draft in trade: %d → %s", r.status, r.location)
	}
}

// The policy page shows the headroom of each volume window of the policy in force: the
// keys with volume in it, the most used first, or, when none has any, every key's whole
// limit.
func TestPolicyPageShowsWindowHeadroom(t *testing.T) {
	p := newPages(t)
	author := p.member(t, auth.RoleMember, map[string]string{"pay": "read,write,developer"})
	p.page(t, author, "/console/pay/policy", "Volume windows", "The policy in force sets no volume window.")
	for _, amount := range []string{"100.25", "200"} {
		p.pastPayment(t, author, amount, workflows.PolicyDecision{Allowed: true, PolicyVersion: 1})
	}
	rules := `{"windows":[{"scope":"wallet","hours":24,"limitUsd":"1000"},{"scope":"destination","hours":24,"limitUsd":"10"}]}`
	if r := p.post(t, author, "/console/pay/policy", url.Values{"rules": {rules}}); r.status != http.StatusSeeOther {
		t.Fatalf("publish windows: %d %s", r.status, r.html)
	}
	html := compact(p.page(t, author, "/console/pay/policy"))
	for _, want := range []string{"<caption>Headroom under version 2</caption>",
		`<td>wallet</td><td><code>` + p.creds.Wallets[0].ID + `</code></td><td class="num">24</td><td class="num">1,000.00</td><td class="num">300.25</td><td class="num">699.75</td>`,
		`<td>destination</td><td>every key</td><td class="num">24</td><td class="num">10.00</td><td class="num">no volume yet</td><td class="num">10.00</td>`} {
		if !strings.Contains(html, want) {
			t.Fatalf("the policy page does not show %q:\n%s", want, html)
		}
	}
	// Someone with Write but not Developer sees no headroom.
	writer := p.member(t, auth.RoleMember, map[string]string{"pay": "write"})
	if html := p.page(t, writer, "/console/pay/policy"); strings.Contains(html, "Volume windows") {
		t.Fatal("a writer sees the windows' headroom")
	}
}

// createWebhook makes a webhook of pay through the console's form and returns its id.
func (p *pages) createWebhook(t *testing.T, who person, form url.Values) string {
	t.Helper()
	if !form.Has("url") {
		form.Set("url", "https://hooks.example.com/treasury")
	}
	if !form.Has("events") {
		form.Set("events", "order.*")
	}
	r := p.post(t, who, "/console/pay/webhooks", form)
	m := regexp.MustCompile(`/console/pay/webhooks/(whk_[0-9a-z]+)`).FindStringSubmatch(r.html)
	if r.status != http.StatusCreated || m == nil {
		t.Fatalf("create a webhook: %d → %s %s", r.status, r.location, r.html)
	}
	return m[1]
}

// hook reads a webhook from the store.
func (p *pages) hook(t *testing.T, id string) *store.WebhookConfig {
	t.Helper()
	c, err := p.store.WebhookConfig(context.Background(), p.creds.OrgID, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// failing marks a webhook failing since a time, as the dispatcher does; with a reason, the
// dispatcher has disabled it too.
func (p *pages) failing(t *testing.T, id string, since time.Time, reason string) {
	t.Helper()
	c := p.hook(t, id)
	c.FailingSince = &since
	if reason != "" {
		c.Enabled, c.DisabledReason = false, &reason
	}
	if err := p.store.SaveWebhookConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// banner is the banner of webhooks the service disabled, on the webhooks page.
var banner = regexp.MustCompile(`<section class="error banner" role="alert"[\s\S]*?</section>`)

// The webhooks page names, in a banner at its top, each webhook the service disabled, with
// why, since when it fails and how to fix it; a webhook a person disabled, or one failing
// but still enabled, is not in it. The webhook's own page says the same of it, or warns
// while it fails but is still enabled.
func TestWebhooksPageNamesTheWebhooksTheServiceDisabled(t *testing.T) {
	p := newPages(t)
	dev := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	broken := p.createWebhook(t, dev, url.Values{"description": {"ERP"}})
	flaky := p.createWebhook(t, dev, url.Values{})
	paused := p.createWebhook(t, dev, url.Values{})
	if r := p.post(t, dev, "/console/pay/webhooks/"+paused, url.Values{"enabled": {"false"}}); !strings.Contains(r.location, "notice=") {
		t.Fatalf("disable a webhook: %d → %s", r.status, r.location)
	}
	if html := p.page(t, dev, "/console/pay/webhooks", paused); banner.MatchString(html) {
		t.Fatalf("a banner with no webhook disabled by the service:\n%s", html)
	}

	since := time.Date(2025, 1, 2, 3, 4, 5, 678e6, time.UTC)
	reason := "every delivery to this URL has failed for 5 days; fix the endpoint and enable the webhook again"
	p.failing(t, broken, since, reason)
	p.failing(t, flaky, since.Add(time.Hour), "")
	html := p.page(t, dev, "/console/pay/webhooks")
	shown := banner.FindString(html)
	for _, want := range []string{"A webhook was disabled by the service", `<a href="webhooks/` + broken + `"><code>` + broken + `</code></a>`,
		reason, `failing since <time datetime="2025-01-02T03:04:05.678Z">`, "<strong>Enable</strong> it again", "<strong>recover its messages</strong>"} {
		if !strings.Contains(shown, want) {
			t.Fatalf("the banner does not show %q:\n%s", want, html)
		}
	}
	if strings.Contains(shown, flaky) || strings.Contains(shown, paused) {
		t.Fatalf("the banner names a webhook the service did not disable:\n%s", shown)
	}
	if i := strings.Index(html, "<h1>Webhooks</h1>"); i < 0 || strings.Index(html, shown) < i || strings.Index(html, shown) > strings.Index(html, "<table>") {
		t.Fatalf("the banner is not at the top of the page:\n%s", html)
	}

	// Its own page: the banner, and the recovery form filled in from when it began failing.
	html = p.page(t, dev, "/console/pay/webhooks/"+broken, "Disabled by the service", reason,
		`failing since <time datetime="2025-01-02T03:04:05.678Z">`, `name="enabled" value="true"><button type="submit">Enable</button>`,
		`<form method="post" action="`+broken+`/recover"`, `id="since" name="since" type="datetime-local" step="1" required value="2025-01-02T03:04:05"`,
		"Enable the webhook first")
	if !strings.Contains(html, `<section class="error banner" role="alert"`) {
		t.Fatalf("the disabled webhook's page has no banner:\n%s", html)
	}
	// Failing, still enabled: a warning, no banner.
	html = p.page(t, dev, "/console/pay/webhooks/"+flaky, `<p class="warning" role="status">Every delivery to this URL has failed since <time datetime="2025-01-02T04:04:05.678Z">`)
	if strings.Contains(html, "error banner") {
		t.Fatalf("a failing, enabled webhook has the disabled banner:\n%s", html)
	}
	// Disabled by a person: neither.
	html = p.page(t, dev, "/console/pay/webhooks/"+paused, "Disabled · no rate limit of its own")
	if strings.Contains(html, "error banner") || strings.Contains(html, `class="warning"`) {
		t.Fatalf("a webhook a person disabled has a banner or a warning:\n%s", html)
	}
}

// A webhook's rate limit is set on its creation, changed, removed (empty) and refused out
// of range from its page's settings form, and shown there as it is.
func TestWebhookRateLimitRoundTrips(t *testing.T) {
	p := newPages(t)
	dev := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	p.page(t, dev, "/console/pay/webhooks", `<input id="rateLimit" name="rateLimit" type="number" min="1" max="10000" step="1">`,
		"Rate limit (messages per second, empty for none)")
	id := p.createWebhook(t, dev, url.Values{"rateLimit": {"25"}})
	if got := p.hook(t, id).RateLimit; got == nil || *got != 25 {
		t.Fatalf("the rate limit created: %v", got)
	}
	path := "/console/pay/webhooks/" + id
	p.page(t, dev, path, `name="rateLimit" type="number" min="1" max="10000" step="1" value="25"`, "at most 25 messages per second")
	p.page(t, dev, "/console/pay/webhooks", "at most 25 messages per second")
	if none := p.createWebhook(t, dev, url.Values{"rateLimit": {""}}); p.hook(t, none).RateLimit != nil {
		t.Fatal("an empty rate limit made one")
	}

	settings := func(limit string) reply {
		return p.post(t, dev, path, url.Values{"url": {"https://hooks.example.com/treasury"}, "events": {"order.*"},
			"description": {""}, "rateLimit": {limit}})
	}
	if r := settings("40"); !strings.HasPrefix(r.location, path+"?notice=") {
		t.Fatalf("save a rate limit of 40: %d → %s", r.status, r.location)
	}
	p.page(t, dev, path, `step="1" value="40"`, "at most 40 messages per second")
	// The Enable/Disable button leaves it alone.
	p.post(t, dev, path, url.Values{"enabled": {"false"}})
	if got := p.hook(t, id).RateLimit; got == nil || *got != 40 {
		t.Fatalf("the rate limit after disabling: %v", got)
	}
	for _, bad := range []string{"0", "10001", "-3", "fast"} {
		r := settings(bad)
		got, _ := url.QueryUnescape(strings.TrimPrefix(r.location, path+"?error="))
		if !strings.HasPrefix(r.location, path+"?error=") || !strings.Contains(got, "rateLimit must be from 1 to 10000") {
			t.Fatalf("a rate limit of %q: %d → %s", bad, r.status, r.location)
		}
	}
	if r := settings(""); !strings.HasPrefix(r.location, path+"?notice=") {
		t.Fatalf("remove the rate limit: %d → %s", r.status, r.location)
	}
	if got := p.hook(t, id).RateLimit; got != nil {
		t.Fatalf("the rate limit after removing it: %v", *got)
	}
	p.page(t, dev, path, `step="1" value=""`, "no rate limit of its own")
}

// A webhook the service disabled is enabled again from its page, which comes back with
// the recovery form filled in from when its failures began; the form starts a recovery
// of the window's failed and skipped messages, which the page then lists. Skipped
// deliveries are filtered and labelled as such. What the service refuses comes back
// saying why.
func TestWebhookRecoveryFromItsPage(t *testing.T) {
	p := newPages(t)
	ctx := context.Background()
	dev := p.member(t, auth.RoleMember, map[string]string{"pay": "developer"})
	id := p.createWebhook(t, dev, url.Values{})
	path := "/console/pay/webhooks/" + id
	now := time.Now().UTC()
	failingSince := now.Add(-time.Hour)
	p.failing(t, id, failingSince, "every delivery to this URL has failed for 5 days; fix the endpoint and enable the webhook again")
	for i, status := range []string{store.DeliveryFailed, store.DeliverySkipped, store.DeliverySkipped, store.DeliverySucceeded} {
		d := &store.WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: ids.New(ids.WebhookMessage), ConfigID: id,
			EventID: ids.New(ids.Event), Event: "payment.confirmed", Payload: "{}", Status: status,
			CreatedAt: now.Add(-time.Duration(40-10*i) * time.Minute)}
		if err := p.store.CreateWebhookDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	html := p.page(t, dev, path+"?status=skipped", `<option value="skipped" selected>skipped</option>`, "No recoveries yet.")
	if n := strings.Count(html, `<span class="status s-skipped">skipped</span>`); n != 2 ||
		strings.Count(html, "not sent: the webhook was disabled (a recovery sends it)") != 2 {
		t.Fatalf("the skipped deliveries: %d shown:\n%s", n, html)
	}

	recoverForm := func(since, until string) reply {
		return p.post(t, dev, path+"/recover", url.Values{"since": {since}, "until": {until}})
	}
	errorOf := func(r reply) string {
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, path+"?error=") {
			t.Fatalf("a refused recovery: %d → %s", r.status, r.location)
		}
		got, _ := url.QueryUnescape(strings.TrimPrefix(r.location, path+"?error="))
		return got
	}
	if got := errorOf(recoverForm(failingSince.Format("2006-01-02T15:04:05"), "")); !strings.Contains(got, "enable it to recover") {
		t.Fatalf("a recovery while disabled: %s", got)
	}

	// Enabled again: back to its page with the form filled in from when it began failing.
	r := p.post(t, dev, path, url.Values{"enabled": {"true"}})
	typed := failingSince.Format("2006-01-02T15:04:05")
	if !strings.HasPrefix(r.location, path+"?since="+url.QueryEscape(typed)+"&notice=Webhook+enabled") {
		t.Fatalf("enable the webhook: %d → %s", r.status, r.location)
	}
	if c := p.hook(t, id); !c.Enabled || c.DisabledReason != nil || c.FailingSince != nil {
		t.Fatalf("the webhook enabled again: %+v", c)
	}
	html = p.page(t, dev, r.location, `id="since" name="since" type="datetime-local" step="1" required value="`+typed+`"`, "recover them below")
	if strings.Contains(html, "error banner") || strings.Contains(html, "Enable the webhook first") {
		t.Fatalf("an enabled webhook's page still says it is disabled:\n%s", html)
	}

	for _, bad := range []struct{ since, until, want string }{
		{"", "", "since must be a date and time in UTC"},
		{"yesterday", "", "since must be a date and time in UTC"},
		{typed, "soon", "until must be a date and time in UTC"},
		{typed, typed, "since must be before until"},
		{now.Add(time.Hour).Format(time.RFC3339), "", "since must be before until and before now"},
	} {
		if got := errorOf(recoverForm(bad.since, bad.until)); !strings.Contains(got, bad.want) {
			t.Fatalf("a recovery from %q to %q: %s, want %q", bad.since, bad.until, got, bad.want)
		}
	}
	// Another app's person reaches none of it.
	trade := p.member(t, auth.RoleMember, map[string]string{"trade": "developer"})
	if r := p.post(t, trade, "/console/trade/webhooks/"+id+"/recover", url.Values{"since": {typed}}); !strings.Contains(r.location, "error=") {
		t.Fatalf("a recovery of pay's webhook from trade: %d → %s", r.status, r.location)
	}

	// The form's datetime-local value, taken as UTC: the failed and skipped messages since
	// are queued again.
	r = recoverForm(typed, "")
	m := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `\?notice=Recovery\+(rcv_[0-9a-z]+)\+started`).FindStringSubmatch(r.location)
	if r.status != http.StatusSeeOther || m == nil {
		t.Fatalf("recover: %d → %s", r.status, r.location)
	}
	html = compact(p.page(t, dev, r.location))
	row := regexp.MustCompile(`<tr><td><code class="short" title="` + m[1] + `">` + m[1] + `</code></td><td><time datetime="([^"]+)">[^<]+</time> –<br><time datetime="[^"]+">[^<]+</time></td>` +
		`<td><span class="status s-completed">completed</span></td><td class="num">4</td><td class="num">3</td><td><time[^>]*>[^<]+</time> –<br>` +
		`<time[^>]*>[^<]+</time></td><td>—</td></tr>`).FindStringSubmatch(html)
	if row == nil || row[1] != failingSince.Truncate(time.Second).Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("the recovery is not listed as completed, 4 scanned, 3 requeued, from %s:\n%s", typed, html)
	}
	pending := p.page(t, dev, path+"?status=pending")
	if n := strings.Count(pending, `<span class="status s-pending">pending</span>`); n != 3 {
		t.Fatalf("%d deliveries pending after the recovery, want 3", n)
	}
	// An RFC 3339 until is taken too.
	r = recoverForm(now.Add(-2*time.Hour).Format(time.RFC3339), now.Add(-90*time.Minute).Format(time.RFC3339))
	if !strings.Contains(r.location, "notice=Recovery") {
		t.Fatalf("recover an RFC 3339 window: %d → %s", r.status, r.location)
	}
	if html := compact(p.page(t, dev, path)); strings.Count(html, `<span class="status s-completed">completed</span>`) != 2 {
		t.Fatalf("the page does not list both recoveries:\n%s", html)
	}
}

// The owner adds a wallet on the Wallets page: the page shows the message to sign, takes
// the signature made with the wallet's key, and lists the wallet with its holdings; a
// wrong signature is said on the page, and archiving is one button.
func TestAWalletIsAddedOnTheWalletsPage(t *testing.T) {
	p := newPages(t)
	owner := p.owner(t)
	p.page(t, owner, "/console/treasury/wallets", "Add a wallet", p.creds.Wallets[0].ID, "10,000,000 USDC")
	key, _ := keys.Generate(chain.Secp256k1)
	r := p.post(t, owner, "/console/treasury/wallets/challenge", url.Values{"chain": {"ethereum"}, "address": {key.Address()}, "label": {"Cold storage"}})
	message := regexp.MustCompile(`(?s)<textarea id="message" readonly rows="10" cols="72">(.*?)</textarea>`).FindStringSubmatch(r.html)
	challenge := regexp.MustCompile(`name="challengeId" value="(wch_[0-9a-f]+)"`).FindStringSubmatch(r.html)
	if r.status != http.StatusCreated || message == nil || challenge == nil || !strings.Contains(r.html, `value="Cold storage"`) {
		t.Fatalf("the message to sign: %d %s", r.status, r.html)
	}
	// The page is served at …/wallets/challenge: its form posts to the full path, never
	// relative to where it is.
	if !strings.Contains(r.html, `<form method="post" action="/console/treasury/wallets">`) {
		t.Fatalf("the signature's form does not post to /console/treasury/wallets:\n%s", r.html)
	}
	other, _ := keys.Generate(chain.Secp256k1)
	wrong, _ := other.SignPersonal(html.UnescapeString(message[1]))
	form := url.Values{"chain": {"ethereum"}, "address": {key.Address()}, "label": {"Cold storage"}, "challengeId": {challenge[1]}, "signature": {wrong}}
	if r := p.post(t, owner, "/console/treasury/wallets", form); r.status != http.StatusSeeOther || !strings.Contains(r.location, "error=") {
		t.Fatalf("a signature by another key: %d → %s", r.status, r.location)
	}
	sig, _ := key.SignPersonal(html.UnescapeString(message[1]))
	form.Set("signature", sig)
	r = p.post(t, owner, "/console/treasury/wallets", form)
	if r.status != http.StatusSeeOther || !strings.Contains(r.location, "notice=") {
		t.Fatalf("register: %d → %s", r.status, r.location)
	}
	id := regexp.MustCompile(`wal_[0-9a-f]{32}`).FindString(r.location)
	p.page(t, owner, r.location, "Cold storage", key.Address(), "registered")
	r = p.post(t, owner, "/console/treasury/wallets/"+id+"/archive", nil)
	if r.status != http.StatusSeeOther || !strings.Contains(r.location, "notice=") {
		t.Fatalf("archive: %d → %s", r.status, r.location)
	}
	p.page(t, owner, "/console/treasury/wallets", "archived")
	// A member who only reads the treasury sees the wallets, and no form to change them.
	reader := p.member(t, auth.RoleMember, map[string]string{"treasury": "read"})
	if page := p.page(t, reader, "/console/treasury/wallets", "Cold storage"); strings.Contains(page, "Add a wallet") || strings.Contains(page, "Archive") {
		t.Fatal("a reader is offered the wallet forms")
	}
	if r := p.post(t, reader, "/console/treasury/wallets/challenge", url.Values{"chain": {"ethereum"}, "address": {other.Address()}}); !strings.Contains(r.location, "error=") {
		t.Fatalf("a reader asks for a challenge: %d → %s", r.status, r.location)
	}
}
