package api

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
)

// The developer lists are read whole and paged in memory; they must page like every list:
// limit and cursor, the same items in the same order as one long page, and a last page
// without a cursor.
func TestDeveloperListsPage(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["trade"].SK
	for range 3 {
		f.newKey(t, dev, `{"kind":"tk","actions":["read"]}`)
		if r := f.post(t, "/developer/oauth-clients", dev, `{"scopes":"trade:read"}`); r.status != 201 {
			t.Fatalf("oauth client: %d %s", r.status, r.body)
		}
		if r := f.post(t, "/developer/websockets", dev, `{"events":["*"]}`); r.status != 201 {
			t.Fatalf("websocket config: %d %s", r.status, r.body)
		}
	}
	for _, path := range []string{"/developer/api-keys", "/developer/oauth-clients",
		"/developer/websockets", "/developer/team"} {
		t.Run(path, func(t *testing.T) {
			list := func(query string) ([]string, *string) {
				t.Helper()
				r := f.do(t, "GET", path+"?"+query, dev, nil)
				var out struct {
					Data []struct {
						ID string `json:"id"`
					} `json:"data"`
					NextCursor *string `json:"nextCursor"`
				}
				if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
					t.Fatalf("GET %s?%s: %d %s", path, query, r.status, r.body)
				}
				var got []string
				for _, d := range out.Data {
					got = append(got, d.ID)
				}
				return got, out.NextCursor
			}
			whole, next := list("limit=200")
			if next != nil || len(whole) < 1 {
				t.Fatalf("one long page: %v, cursor %v", whole, next)
			}
			var paged []string
			query := "limit=1"
			for range len(whole) + 1 {
				got, next := list(query)
				if len(got) != 1 {
					t.Fatalf("a page of limit 1 holds %v", got)
				}
				paged = append(paged, got...)
				if next == nil {
					break
				}
				query = "limit=1&cursor=" + url.QueryEscape(*next)
			}
			if !slices.Equal(paged, whole) {
				t.Fatalf("pages %v, whole list %v", paged, whole)
			}
			f.do(t, "GET", path+"?limit=0", dev, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
			f.do(t, "GET", path+"?sort=id", dev, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
		})
	}
}

// A key or an OAuth client can be read alone, like a WebSocket config: never its secret,
// and only from its own app.
func TestDeveloperRecordsReadAlone(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["trade"].SK
	key := f.newKey(t, dev, `{"kind":"tk","actions":["read"]}`)
	r := f.post(t, "/developer/oauth-clients", dev, `{"scopes":"trade:read"}`)
	var client struct {
		ID     string `json:"id"`
		Secret string `json:"clientSecret"`
	}
	if err := json.Unmarshal(r.body, &client); err != nil || r.status != 201 {
		t.Fatalf("oauth client: %d %s", r.status, r.body)
	}
	for _, rec := range []struct{ path, id, secret string }{
		{"/developer/api-keys/", key.ID, key.Secret},
		{"/developer/oauth-clients/", client.ID, client.Secret},
	} {
		got := f.do(t, "GET", rec.path+rec.id, dev, nil)
		var out struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(got.body, &out); err != nil || got.status != 200 || out.ID != rec.id {
			t.Fatalf("GET %s%s: %d %s", rec.path, rec.id, got.status, got.body)
		}
		if rec.secret == "" || bytes.Contains(got.body, []byte(rec.secret)) {
			t.Fatalf("GET %s%s shows the secret", rec.path, rec.id)
		}
		f.do(t, "GET", rec.path+rec.id, f.creds.Keys["pay"].SK, nil).wantProblem(t, 404, apitypes.CodeNotFound)
		f.do(t, "GET", rec.path+"nothing_here", dev, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	}
}

// The developer surface answers at the root, /developer/… (SPEC 6), behind the same
// middleware as /api/v1: correlation ids, problems, rate-limit budgets, idempotent
// replays. /api/v1/developer/… is an alias served by the same routes.
func TestDeveloperSurfaceAtTheRoot(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["pay"].SK
	created := f.post(t, "/developer/websockets", dev, `{"events":["order.*"]}`, "Idempotency-Key", "root-1", "X-Correlation-Id", "root-corr")
	if created.status != 201 || created.header.Get("X-Correlation-Id") != "root-corr" || created.header.Get("RateLimit-Limit") == "" {
		t.Fatalf("POST /developer/websockets: %d %v %s", created.status, created.header, created.body)
	}
	var cfg struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(created.body, &cfg)
	replay := f.post(t, "/developer/websockets", dev, `{"events":["order.*"]}`, "Idempotency-Key", "root-1")
	if replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, created.body) {
		t.Fatalf("replay: %d %v %s", replay.status, replay.header, replay.body)
	}
	root := f.do(t, "GET", "/developer/websockets/"+cfg.ID, dev, nil)
	alias := f.do(t, "GET", "/api/v1/developer/websockets/"+cfg.ID, dev, nil)
	if root.status != 200 || alias.status != 200 || !bytes.Equal(root.body, alias.body) {
		t.Fatalf("root %d %s, alias %d %s", root.status, root.body, alias.status, alias.body)
	}
	f.do(t, "GET", "/developer/websockets", "", nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	f.do(t, "GET", "/developer/websockets", f.creds.Keys["pay"].Read, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.do(t, "GET", "/developer/websockets/wsc_nothing", dev, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "GET", "/developer/nothing-here", dev, nil).wantProblem(t, 404, apitypes.CodeNotFound)
}
