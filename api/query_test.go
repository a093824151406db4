package api

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/docs"
)

// Every route refuses a query parameter it does not take, naming it (SPEC 2), after the
// caller is known; the parameters it takes pass.
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	f := newFixture(t)
	engine := unlimitedRouter(f)
	pay := credential{bearer: f.creds.Keys["pay"].SK}
	for _, route := range engine.Routes() {
		if strings.HasPrefix(route.Path, "/console") {
			continue
		}
		path := concretePath(route.Path, "nothing_here") + "?zzUnknown=1&limit=1"
		rec := serve(t, f.handler, pay.requestWith(route.Method, path, "{}"))
		var p Problem
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		key := route.Method + " " + strings.Replace(route.Path, developerAlias, "/developer/", 1)
		takesLimit := slices.Contains(routeQuery[key], "limit")
		var fields []string
		for _, e := range p.Errors {
			fields = append(fields, e.Field)
		}
		want := []string{"zzUnknown"}
		if !takesLimit {
			want = []string{"limit", "zzUnknown"}
		}
		if rec.Code != 422 || p.Code != apitypes.CodeValidationFailed || !slices.Equal(fields, want) {
			t.Errorf("%s %s: want 422 naming %v, got %d %v", route.Method, path, want, rec.Code, fields)
		}
	}
	// Known parameters pass, and a person's ?app= on the developer surface.
	if r := f.do(t, "GET", "/api/v1/payments?status=draft&limit=5", f.creds.Keys["pay"].SK, nil); r.status != 200 {
		t.Fatalf("known parameters: %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/developer/webhooks?app=pay", f.creds.Keys["pay"].SK, nil); r.status != 200 {
		t.Fatalf("?app= on the developer surface: %d %s", r.status, r.body)
	}
	// Before the caller is known, the answer is 401, whatever the query.
	f.do(t, "GET", "/api/v1/payments?zzUnknown=1", "", nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
}

// The query parameters each route takes are the ones docs/openapi.json declares for its
// operation, so the contract and the refusals agree.
func TestQueryParametersAreTheDocumentsOwn(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]openAPIParameter `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(docs.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	param := regexp.MustCompile(`:([A-Za-z]+)`)
	for _, route := range unlimitedRouter(f).Routes() {
		if strings.HasPrefix(route.Path, "/console") {
			continue
		}
		canonical := strings.Replace(route.Path, developerAlias, "/developer/", 1)
		if strings.HasPrefix(canonical, "/rpc/") { // the alias of /api/v1/rpc/{chain}
			canonical = "/api/v1" + canonical
		}
		var op struct {
			Parameters []openAPIParameter `json:"parameters"`
		}
		raw := doc.Paths[param.ReplaceAllString(canonical, "{$1}")][strings.ToLower(route.Method)]
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Errorf("%s %s: no operation in docs/openapi.json", route.Method, canonical)
			continue
		}
		var documented []string
		for _, p := range op.Parameters {
			if ref, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
				p = doc.Components.Parameters[ref]
			}
			if p.In == "query" && !(p.Name == "app" && strings.HasPrefix(canonical, "/developer/")) {
				documented = append(documented, p.Name)
			}
		}
		taken := slices.Clone(routeQuery[route.Method+" "+canonical])
		slices.Sort(documented)
		slices.Sort(taken)
		if !slices.Equal(documented, taken) {
			t.Errorf("%s %s takes %v; docs/openapi.json declares %v", route.Method, canonical, taken, documented)
		}
	}
}

type openAPIParameter struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

// Every write refuses a body that is not JSON with 415 (SPEC 2), after the caller is
// known; the token endpoint alone takes a form (RFC 6749).
func TestEveryWriteRefusesABodyThatIsNotJSON(t *testing.T) {
	f := newFixture(t)
	engine := unlimitedRouter(f)
	pay := credential{bearer: f.creds.Keys["pay"].SK}
	for _, route := range engine.Routes() {
		if route.Method == "GET" || strings.HasPrefix(route.Path, "/console") || route.Path == "/api/v1/oauth/token" {
			continue
		}
		for _, contentType := range []string{"application/x-www-form-urlencoded", "text/plain", ""} {
			req := pay.requestWith(route.Method, concretePath(route.Path, "nothing_here"), `{"a":"b"}`)
			req.Header.Set("Content-Type", contentType)
			rec := serve(t, f.handler, req)
			if rec.Code != 415 || !strings.Contains(rec.Body.String(), `"code":"unsupported_media_type"`) {
				t.Errorf("%s %s with a %q body: want 415, got %d %s", route.Method, route.Path, contentType, rec.Code, rec.Body)
			}
		}
	}
	// JSON with a charset is JSON; a write without a body needs no Content-Type.
	body := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	req := pay.requestWith("POST", "/api/v1/payments", body)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	rec := serve(t, f.handler, req)
	if rec.Code != 201 {
		t.Fatalf("JSON with a charset: %d %s", rec.Code, rec.Body)
	}
	id := decodeOrder(t, response{status: rec.Code, body: rec.Body.Bytes()})["id"].(string)
	req = httptestRequest("POST", "/api/v1/payments/"+id+"/submit", "")
	req.Header.Del("Content-Type")
	req.Header.Set("Authorization", "Bearer "+f.creds.Keys["pay"].SK)
	if rec := serve(t, f.handler, req); rec.Code != 202 {
		t.Fatalf("a submit without a body or Content-Type: %d %s", rec.Code, rec.Body)
	}
	// Before the caller is known, the answer is 401.
	req = httptestRequest("POST", "/api/v1/payments", "a=b")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := serve(t, f.handler, req); rec.Code != 401 {
		t.Fatalf("an unauthenticated form: %d", rec.Code)
	}
}
