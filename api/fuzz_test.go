package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/webhook"
)

// The fuzz targets of the API: every request body it decodes (FuzzRequestBody), list
// cursors (FuzzCursor) and the Idempotency-Key header (FuzzIdempotencyKey). Their seed
// corpora run with the other tests; make test-fuzz runs each for a while.

// fuzzRouter is the real router over a seeded store, with what the body routes need: the
// seeded credentials, the owner's session, and a resource of each kind a PATCH changes.
type fuzzRouter struct {
	name    string
	h       http.Handler
	creds   *seed.Credentials
	session struct{ token, csrf string }
	// ids of a WebSocket config, a webhook and a member of the pay app.
	wsc, whk, member string
}

// newFuzzRouters builds the router twice, over SQLite and over PostgreSQL: a body that a
// production database refuses (a NUL character in a text column, say) must be refused as
// invalid before it reaches it, and both stores must answer alike.
// Their clock of sign-ins is stopped, so that both refuse failed sign-ins alike; a minute
// ahead, so that it is after the seed set the people's passwords.
func newFuzzRouters(tb testing.TB) []*fuzzRouter {
	tb.Helper()
	now := time.Now().Add(time.Minute)
	clock := func() time.Time { return now }
	return []*fuzzRouter{
		newFuzzRouter(tb, "sqlite", storetest.NewSQLite(tb), clock),
		newFuzzRouter(tb, "postgres", storetest.NewPostgres(tb), clock),
	}
}

func newFuzzRouter(tb testing.TB, name string, s *store.Store, clock func() time.Time) *fuzzRouter {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds, err := seed.Ensure(context.Background(), s, tb.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		tb.Fatal(err)
	}
	k, _ := webhook.NewKey()
	key, _ := webhook.ParseKey(k)
	box, err := webhook.NewBox(key)
	if err != nil {
		tb.Fatal(err)
	}
	r := &fuzzRouter{name: name, creds: creds, h: NewRouter(Config{
		Store:     s,
		Log:       log,
		RateLimit: 1e9,
		RateBurst: 1 << 30,
		Now:       clock,
		Service:   &service.Service{Store: s, Log: log, Webhooks: service.WebhookOptions{Box: box}},
	})}

	in, _ := json.Marshal(map[string]string{"email": creds.Owner.Email, "password": creds.Owner.Password})
	res := r.send("POST", "/api/v1/sessions", "", in, "Content-Type", "application/json")
	cookies := (&http.Response{Header: res.Header()}).Cookies()
	var signed struct{ CSRFToken string }
	if res.Code != http.StatusCreated || len(cookies) != 1 || json.Unmarshal(res.Body.Bytes(), &signed) != nil {
		tb.Fatalf("%s: owner sign-in: %d %s", name, res.Code, res.Body)
	}
	r.session.token, r.session.csrf = cookies[0].Value, signed.CSRFToken

	created := func(method, target string, body string, session bool) string {
		tb.Helper()
		var res *httptest.ResponseRecorder
		if session {
			res = r.send(method, target, "", []byte(body), "Content-Type", "application/json",
				"Cookie", auth.SessionCookie+"="+r.session.token, auth.CSRFHeader, r.session.csrf)
		} else {
			res = r.send(method, target, creds.Keys["pay"].SK, []byte(body), "Content-Type", "application/json")
		}
		var out struct{ ID string }
		if res.Code != http.StatusCreated || json.Unmarshal(res.Body.Bytes(), &out) != nil || out.ID == "" {
			tb.Fatalf("%s: %s %s: %d %s", name, method, target, res.Code, res.Body)
		}
		return out.ID
	}
	r.wsc = created("POST", "/developer/websockets", `{"events":["order.*"]}`, false)
	r.whk = created("POST", "/developer/webhooks", `{"url":"https://example.com/hook","events":["*"]}`, false)
	r.member = created("POST", "/developer/team?app=pay", `{"email":"invited@example.com","actions":["read"]}`, true)
	return r
}

// send serves one request; headers are name, value pairs.
func (r *fuzzRouter) send(method, target, token string, body []byte, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	return rec
}

// bodyRoute is one request body the API decodes: where it is sent, as whom, and every
// field name it knows at any depth (an object key outside them must be refused).
type bodyRoute struct {
	name   string
	method string
	// path may hold {wsc}, {whk} and {member}, the fixture's resources.
	path string
	// as is who sends it: "sk:<app>", "approve:<app>", "session", "oauth:<app>" (HTTP
	// Basic with the app's OAuth client, a form body), "form" (a form body, nobody) or ""
	// (nobody).
	as     string
	fields []string
	// seeds are bodies worth starting from: accepted ones and refused ones.
	seeds []string
}

var (
	paymentFields = []string{"walletId", "asset", "amount", "destination", "reference", "address", "label"}
	policyFields  = []string{"maxOrderUsd", "dailyVolumeUsd", "destinationWhitelist", "allowedPairs", "deniedPairs",
		"allowedProtocols", "approvalTiers", "minUsd", "quorum"}
)

// moneyFields hold amounts: decimal strings, never JSON numbers (SPEC 2).
var moneyFields = []string{"amount", "sellAmount", "maxOrderUsd", "dailyVolumeUsd", "minUsd"}

// bodyRoutes are every JSON (and form) request body of the API. In a body, {wallet} stands
// for the first seeded wallet, {clientId} and {clientSecret} for the trade app's OAuth
// client.
var bodyRoutes = []bodyRoute{
	{"payment", "POST", "/api/v1/payments", "sk:pay", paymentFields, []string{
		`{"walletId":"{wallet}","asset":"USDC","amount":"1250.50","destination":{"address":"0x1111111111111111111111111111111111111111","label":"Acme"},"reference":"inv-1"}`,
		`{"walletId":"{wallet}","asset":"USDC","amount":1250.5,"destination":{"address":"0x1111111111111111111111111111111111111111"}}`,
		`{"walletId":"{wallet}","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}]`,
		`{"walletId":"{wallet}","asset":"USDC","amount":"1","destination":{"Address":"0x1111111111111111111111111111111111111111"}}`,
	}},
	{"trade", "POST", "/api/v1/trade-orders", "sk:trade", []string{"walletId", "sellAsset", "buyAsset", "sellAmount", "maxSlippageBps"}, []string{
		`{"walletId":"{wallet}","sellAsset":"ETH","buyAsset":"USDC","sellAmount":"2.5","maxSlippageBps":50}`,
		`{"walletId":"{wallet}","sellAsset":"ETH","buyAsset":"USDC","sellAmount":"2.5","maxSlippageBps":5e1}`,
	}},
	{"earn", "POST", "/api/v1/earn-orders", "sk:earn", []string{"walletId", "protocol", "action", "asset", "amount"}, []string{
		`{"walletId":"{wallet}","protocol":"aave","action":"deposit","asset":"USDC","amount":"1000"}`,
		`{"walletId":"{wallet}","protocol":"Aave","action":"stake","asset":"USDC","amount":"-1"}`,
	}},
	{"borrow", "POST", "/api/v1/borrow-orders", "sk:borrow", []string{"walletId", "protocol", "action", "asset", "amount", "collateralAsset"}, []string{
		`{"walletId":"{wallet}","protocol":"compound","action":"draw","asset":"USDC","amount":"500","collateralAsset":"ETH"}`,
		`{"walletId":"{wallet}","protocol":"compound","action":"draw","asset":"USDC","amount":"1e3"}`,
	}},
	{"approval decision", "POST", "/api/v1/approvals/payment/apr_0000000000000000000000000/decide", "approve:pay", []string{"decision", "comment"}, []string{
		`{"decision":"APPROVE","comment":"ok"}`, `{"decision":"approve"}`, `{"Decision":"REJECT"}`,
	}},
	{"signature", "POST", "/api/v1/signing-requests/sig_0000000000000000000000000/signature", "sk:pay", []string{"signature"}, []string{
		`{"signature":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"}`, `{"signature":42}`,
	}},
	{"policy", "PUT", "/api/v1/policies/pay", "sk:pay", policyFields, []string{
		`{"maxOrderUsd":"5000000","dailyVolumeUsd":"10000000","destinationWhitelist":["0x1111111111111111111111111111111111111111"],"approvalTiers":[{"minUsd":"10000","quorum":1},{"minUsd":"1000000","quorum":2}]}`,
		`{"maxOrderUsd":5000000}`, `{"approvalTiers":[{"MinUsd":"10","quorum":1}]}`, `{"deniedPairs":[["WBTC","USDC"]],"allowedProtocols":["aave"]}`,
	}},
	{"policy evaluation", "POST", "/api/v1/policies/pay/evaluate", "sk:pay", paymentFields, []string{
		`{"walletId":"{wallet}","asset":"USDC","amount":"20000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`,
	}},
	{"websocket config", "POST", "/developer/websockets", "sk:pay", []string{"events"}, []string{
		`{"events":["Order.Submitted","order.*","*"]}`, `{"events":[]}`, `{"events":"order.*"}`,
	}},
	{"websocket config change", "PATCH", "/developer/websockets/{wsc}", "sk:pay", []string{"enabled"}, []string{
		`{"enabled":true}`, `{"enabled":"false"}`, `{}`,
	}},
	{"webhook", "POST", "/developer/webhooks", "sk:pay", []string{"url", "events", "description"}, []string{
		`{"url":"https://example.com/hooks","events":["order.confirmed"],"description":"payouts"}`,
		`{"url":"http://127.0.0.1/hooks","events":["order.confirmed"]}`,
	}},
	{"webhook change", "PATCH", "/developer/webhooks/{whk}", "sk:pay", []string{"url", "events", "description", "enabled"}, []string{
		`{"enabled":true,"events":["wallet.*"]}`, `{"url":"ftp://example.com"}`,
	}},
	{"api key", "POST", "/developer/api-keys", "sk:pay", []string{"kind", "actions", "resourceIds", "label"}, []string{
		`{"kind":"tk","actions":["read"],"resourceIds":["{wallet}"],"label":"reporting"}`, `{"kind":"pk","label":"browser"}`, `{"kind":"xk"}`,
	}},
	{"oauth client", "POST", "/developer/oauth-clients", "sk:pay", []string{"scopes", "label"}, []string{
		`{"scopes":"pay:read pay:write","label":"erp"}`, `{"scopes":"trade:read"}`,
	}},
	{"team member", "POST", "/developer/team?app=pay", "session", []string{"email", "actions"}, []string{
		`{"email":"new@example.com","actions":["read","approve"]}`, `{"email":"not an address","actions":["read"]}`,
	}},
	{"team member change", "PATCH", "/developer/team/{member}?app=pay", "session", []string{"actions"}, []string{
		`{"actions":["read","write"]}`, `{"actions":null}`,
	}},
	{"sign-in", "POST", "/api/v1/sessions", "", []string{"email", "password"}, []string{
		`{"email":"owner@example.com","password":"wrong password"}`, `{"email":"a@b.c","password":"x","remember":true}`,
	}},
	{"password change", "POST", "/api/v1/session/password", "session", []string{"currentPassword", "newPassword"}, []string{
		`{"currentPassword":"not it","newPassword":"correct horse battery staple"}`,
	}},
	{"oauth token", "POST", "/api/v1/oauth/token", "oauth:trade", nil, []string{
		"grant_type=client_credentials&scope=trade%3Aread", "grant_type=password", "grant_type=client_credentials&grant_type=client_credentials",
	}},
	{"oauth token, credentials in the form", "POST", "/api/v1/oauth/token", "form", nil, []string{
		"grant_type=client_credentials&client_id={clientId}&client_secret={clientSecret}&scope=trade%3Awrite",
		"grant_type=client_credentials&client_id={clientId}&client_secret=wrong", "grant_type=client_credentials&client_id=%00&client_secret=%00",
	}},
}

// FuzzRequestBody sends arbitrary bytes as the body of every kind of request the API
// decodes, on SQLite and on PostgreSQL. Whatever the bytes, the answer is a success or a
// typed problem, never a 5xx; a success means the body was one JSON object whose field
// names are all the route's, with its amounts as strings; a 422 validation_failed names
// its fields; and both stores answer with the same status.
func FuzzRequestBody(f *testing.F) {
	for i, r := range bodyRoutes {
		for _, s := range r.seeds {
			f.Add(uint8(i), []byte(s))
		}
		f.Add(uint8(i), []byte(`{"unknown":1}`))
		f.Add(uint8(i), []byte(`[]`))
	}
	routers := newFuzzRouters(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		route := bodyRoutes[int(which)%len(bodyRoutes)]
		var statuses []int
		for _, r := range routers {
			oc := r.creds.OAuthClients["trade"]
			body := []byte(strings.NewReplacer("{wallet}", r.creds.Wallets[0].ID, "{clientId}", oc.ClientID,
				"{clientSecret}", url.QueryEscape(oc.ClientSecret)).Replace(string(body)))
			res := r.sendBody(route, body)
			checkBodyAnswer(t, r.name, route, body, res)
			statuses = append(statuses, res.Code)
		}
		if statuses[0] != statuses[1] {
			t.Fatalf("%s: SQLite answered %d and PostgreSQL %d to %q", route.name, statuses[0], statuses[1], body)
		}
	})
}

// sendBody sends body on the route as its credential would.
func (r *fuzzRouter) sendBody(route bodyRoute, body []byte) *httptest.ResponseRecorder {
	target := strings.NewReplacer("{wsc}", r.wsc, "{whk}", r.whk, "{member}", r.member).Replace(route.path)
	who, app, _ := strings.Cut(route.as, ":")
	headers := []string{"Content-Type", "application/json"}
	token := ""
	switch who {
	case "sk":
		token = r.creds.Keys[app].SK
	case "approve":
		token = r.creds.Keys[app].Approve
	case "session":
		headers = append(headers, "Cookie", auth.SessionCookie+"="+r.session.token, auth.CSRFHeader, r.session.csrf)
	case "form":
		headers = []string{"Content-Type", "application/x-www-form-urlencoded"}
	case "oauth":
		c := r.creds.OAuthClients[app]
		basic := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.ClientID) + ":" + url.QueryEscape(c.ClientSecret)))
		headers = []string{"Content-Type", "application/x-www-form-urlencoded", "Authorization", "Basic " + basic}
	}
	return r.send(route.method, target, token, body, headers...)
}

// fieldError is one entry of a problem's errors.
type fieldError struct{ Field, Message string }

func checkBodyAnswer(t *testing.T, db string, route bodyRoute, body []byte, res *httptest.ResponseRecorder) {
	t.Helper()
	fatal := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, %s %s with %q: answered %d %s: %s", db, route.method, route.path, body, res.Code, res.Body, fmt.Sprintf(format, args...))
	}
	if res.Code >= 500 {
		fatal("a request body never causes a 5xx")
	}
	if strings.HasPrefix(route.path, "/api/v1/oauth/") {
		// RFC 6749 §5.2 errors, not problems.
		var e struct {
			Error string `json:"error"`
		}
		if res.Code >= 400 && (json.Unmarshal(res.Body.Bytes(), &e) != nil ||
			!slices.Contains([]string{"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope"}, e.Error)) {
			fatal("not an RFC 6749 error")
		}
		return
	}
	if res.Code >= 400 {
		var p struct {
			Status int
			Code   string
			Errors []fieldError
		}
		if !strings.HasPrefix(res.Header().Get("Content-Type"), problemContentType) || json.Unmarshal(res.Body.Bytes(), &p) != nil {
			fatal("an error is a problem document")
		}
		if want, ok := codeStatus[p.Code]; !ok || want != res.Code || p.Status != res.Code {
			fatal("problem code %q does not go with the status", p.Code)
		}
		if p.Code == apitypes.CodeValidationFailed {
			if len(p.Errors) == 0 {
				fatal("validation_failed names no field")
			}
			var named map[string]json.RawMessage
			_ = json.Unmarshal(body, &named)
			for _, e := range p.Errors {
				if _, emptyName := named[""]; e.Message == "" || e.Field == "" && !emptyName {
					fatal("a field error without its field or message")
				}
			}
		}
		return
	}
	// Accepted: one JSON object, only the route's fields, amounts as decimal strings.
	var v any
	if !json.Valid(body) || json.Unmarshal(body, &v) != nil {
		fatal("accepted a body that is not JSON")
	}
	if _, ok := v.(map[string]any); !ok {
		fatal("accepted a body that is not a JSON object")
	}
	walkJSON(v, func(key string, value any) {
		if !slices.Contains(route.fields, key) {
			fatal("accepted the unknown field %q", key)
		}
		if _, isString := value.(string); slices.Contains(moneyFields, key) && value != nil && !isString {
			fatal("accepted %s as a JSON %T, not a decimal string", key, value)
		}
	})
	// A policy is kept as sent: nothing dropped, cut short or filled in.
	if route.name == "policy" {
		var kept struct{ Rules any }
		if json.Unmarshal(res.Body.Bytes(), &kept) != nil || !reflect.DeepEqual(normalRules(v), normalRules(kept.Rules)) {
			fatal("the policy kept is not the one sent")
		}
	}
}

// normalRules is a policy document as its meaning: amounts as canonical decimals, no null
// or empty rule (a rule left out), a tier's minimum 0 when left out.
func normalRules(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if l, isList := e.([]any); e == nil || isList && len(l) == 0 {
				continue
			}
			if s, isString := e.(string); isString && slices.Contains(moneyFields, k) {
				if d, err := decimal.NewFromString(s); err == nil {
					e = d.String()
				}
			}
			out[k] = normalRules(e)
		}
		if _, tier := v["quorum"]; tier && v["minUsd"] == nil {
			out["minUsd"] = "0" // a tier's minimum is 0 when left out (docs/openapi.json)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalRules(e)
		}
		return out
	}
	return v
}

// walkJSON calls fn for every key of every object in v, at any depth.
func walkJSON(v any, fn func(key string, value any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			fn(k, e)
			walkJSON(e, fn)
		}
	case []any:
		for _, e := range v {
			walkJSON(e, fn)
		}
	}
}

// pageOf reads a list's paging query as a handler does.
func pageOf(query string) (service.Page, []orders.FieldError) {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("GET", "/list?"+query, nil)
	var errs []orders.FieldError
	return parsePage(c, &errs), errs
}

// cursorAlphabet is base64url without padding: a cursor is safe in a URL as it is.
var cursorAlphabet = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// FuzzCursor checks list cursors: the cursor of any key a list hands out decodes to that
// key; any other string is either refused as a cursor (422 naming it) or decodes to a key
// the store can be asked about (UTF-8 text without NUL); and no cursor makes a list
// answer anything but 200 or 422, on SQLite and on PostgreSQL.
func FuzzCursor(f *testing.F) {
	for _, s := range [][2]string{
		{"ord_01JD6Z8X4Q2W3E4R5T6Y7U8I9O", ""}, {"wal_01JD6Z8X4Q2W3E4R5T6Y7U8I9O|USDC", "d2FsX3h8RVRI"},
		{"", "!!!"}, {"", "AA"}, {"", "_w"}, {"", "%00"}, {"", "d2FsX3g="}, {"", "-_-_"},
	} {
		f.Add(s[0], s[1])
	}
	routers := newFuzzRouters(f)
	lists := []struct{ path, as string }{
		{"/api/v1/payments", "pay"}, {"/api/v1/treasury/wallets", "treasury"}, {"/api/v1/treasury/positions", "treasury"},
		{"/api/v1/approvals", "pay"}, {"/api/v1/events", "pay"}, {"/developer/api-keys", "pay"}, {"/developer/webhooks", "pay"},
	}
	f.Fuzz(func(t *testing.T, key, raw string) {
		if key != "" && utf8.ValidString(key) && !strings.ContainsRune(key, 0) {
			cursor := string(encodeCursor(key))
			if !cursorAlphabet.MatchString(cursor) {
				t.Fatalf("cursor %q of %q is not URL-safe", cursor, key)
			}
			pg, errs := pageOf("cursor=" + url.QueryEscape(cursor))
			if len(errs) != 0 || pg.After != key {
				t.Fatalf("cursor of %q reads back as %q, %v", key, pg.After, errs)
			}
		}
		pg, errs := pageOf("cursor=" + url.QueryEscape(raw))
		switch {
		case len(errs) > 0:
			if len(errs) != 1 || errs[0].Field != "cursor" || pg.After != "" {
				t.Fatalf("cursor %q: errors %v, after %q", raw, errs, pg.After)
			}
		case raw == "":
			if pg.After != "" {
				t.Fatalf("no cursor reads as %q", pg.After)
			}
		default:
			if pg.After == "" || !utf8.ValidString(pg.After) || strings.ContainsRune(pg.After, 0) {
				t.Fatalf("cursor %q accepted as key %q, which the store cannot be asked about", raw, pg.After)
			}
			if again, errs := pageOf("cursor=" + url.QueryEscape(string(encodeCursor(pg.After)))); len(errs) != 0 || again.After != pg.After {
				t.Fatalf("key %q of cursor %q does not survive a round trip: %q %v", pg.After, raw, again.After, errs)
			}
		}
		list := lists[len(raw)%len(lists)]
		for _, r := range routers {
			res := r.send("GET", list.path+"?cursor="+url.QueryEscape(raw), r.creds.Keys[list.as].SK, nil)
			if res.Code != http.StatusOK && res.Code != http.StatusUnprocessableEntity {
				t.Fatalf("%s: GET %s with cursor %q: %d %s", r.name, list.path, raw, res.Code, res.Body)
			}
		}
	})
}

// validKey is the rule of SPEC 2, restated: 1 to 255 printable ASCII characters.
func validKey(k string) bool {
	if k == "" || len(k) > 255 {
		return false
	}
	for _, c := range []byte(k) {
		if c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// FuzzIdempotencyKey checks the Idempotency-Key header and the request fingerprint: a key
// outside the rule is refused (422 naming the header) before anything runs; with a valid
// key the first request runs once, the same request again is replayed byte for byte
// without running, and the same key with another body, method, path or credential is
// refused as reused (the fingerprint is deterministic and tells them apart). A key is
// scoped to its organisation.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []struct {
		key         string
		body, other string
	}{
		{"order-2026-11-22-0001", `{"amount":"1"}`, `{"amount":"2"}`}, {"", `{}`, `{}`}, {" ", `{}`, ``},
		{"k\x7f", `{}`, `{}`}, {strings.Repeat("k", 255), `x`, `y`}, {strings.Repeat("k", 256), `x`, `y`},
		{"ключ", `{}`, `{}`}, {"tab\tkey", `{}`, `{}`}, {"~!@#$%^&*()_+`-=[]{}|;':\",./<>?", `{}`, `{} `},
	} {
		f.Add(s.key, []byte(s.body), []byte(s.other))
	}
	s := storetest.NewSQLite(f)
	var runs atomic.Int64
	m := &idempotency{store: s, log: slog.New(slog.NewTextHandler(io.Discard, nil)), retention: time.Hour, lease: time.Minute, now: time.Now}
	r := gin.New()
	r.Use(withCorrelationID(), func(c *gin.Context) {
		c.Set(principalContextKey, &auth.Principal{OrgID: c.GetHeader("X-Test-Org"), App: "pay", Kind: "sk", ID: c.GetHeader("X-Test-Key")})
	}, m.handle)
	write := func(c *gin.Context) {
		n := runs.Add(1)
		body, _ := io.ReadAll(c.Request.Body)
		c.Header("Location", "/things/1")
		c.JSON(http.StatusCreated, gin.H{"run": n, "echo": base64.StdEncoding.EncodeToString(body)})
	}
	r.POST("/things", write)
	r.PUT("/things", write)
	r.POST("/other", write)
	var orgs atomic.Int64
	f.Fuzz(func(t *testing.T, key string, body, other []byte) {
		org := fmt.Sprintf("org_fuzz%d", orgs.Add(1))
		send := func(method, path, credential, org string, body []byte) (*httptest.ResponseRecorder, bool) {
			t.Helper()
			req := httptest.NewRequest(method, path, bytes.NewReader(body))
			req.Header.Set(idempotencyHeader, key)
			req.Header.Set("X-Test-Org", org)
			req.Header.Set("X-Test-Key", credential)
			before := runs.Load()
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			return rec, runs.Load() != before
		}
		problem := func(res *httptest.ResponseRecorder) (code string, fields []string) {
			var p struct {
				Code   string
				Errors []fieldError
			}
			_ = json.Unmarshal(res.Body.Bytes(), &p)
			for _, e := range p.Errors {
				fields = append(fields, e.Field)
			}
			return p.Code, fields
		}

		first, ran := send("POST", "/things", "key_a", org, body)
		switch {
		case key == "":
			if first.Code != http.StatusCreated || !ran {
				t.Fatalf("without a key: %d, ran %v", first.Code, ran)
			}
			return
		case !validKey(key):
			code, fields := problem(first)
			if first.Code != http.StatusUnprocessableEntity || code != apitypes.CodeValidationFailed || !slices.Equal(fields, []string{idempotencyHeader}) || ran {
				t.Fatalf("key %q: %d %s, ran %v; want 422 naming %s", key, first.Code, first.Body, ran, idempotencyHeader)
			}
			return
		}
		if first.Code != http.StatusCreated || !ran || first.Header().Get(replayedHeader) != "" {
			t.Fatalf("key %q, first request: %d %s, ran %v", key, first.Code, first.Body, ran)
		}
		again, ran := send("POST", "/things", "key_a", org, body)
		if ran || again.Code != first.Code || again.Header().Get(replayedHeader) != "true" ||
			!bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) || again.Header().Get("Location") != first.Header().Get("Location") {
			t.Fatalf("key %q, repeat: %d %s (replayed %q), ran %v; want the first answer replayed", key, again.Code, again.Body,
				again.Header().Get(replayedHeader), ran)
		}
		reused := func(what, method, path, credential string, body []byte) {
			t.Helper()
			res, ran := send(method, path, credential, org, body)
			if code, _ := problem(res); res.Code != http.StatusUnprocessableEntity || code != apitypes.CodeIdempotencyKeyReused || ran {
				t.Fatalf("key %q with %s: %d %s, ran %v; want 422 %s", key, what, res.Code, res.Body, ran, apitypes.CodeIdempotencyKeyReused)
			}
		}
		if !bytes.Equal(other, body) {
			reused("another body", "POST", "/things", "key_a", other)
		}
		reused("another method", "PUT", "/things", "key_a", body)
		reused("another path", "POST", "/other", "key_a", body)
		reused("another credential", "POST", "/things", "key_b", body)
		if res, ran := send("POST", "/things", "key_a", org+"x", body); res.Code != http.StatusCreated || !ran || res.Header().Get(replayedHeader) != "" {
			t.Fatalf("key %q in another organisation: %d, ran %v; want a run of its own", key, res.Code, ran)
		}
	})
}
