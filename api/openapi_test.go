package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opentreasury/treasury/docs"
	"github.com/opentreasury/treasury/docs/openapicheck"
)

// openAPI is the document every exchange of this package's tests is held against.
var openAPI = sync.OnceValues(openapicheck.New)

// documented fails t when an exchange disagrees with openapi.json: an answer the document
// does not describe for its operation, or an accepted request it would refuse.
func documented(t *testing.T, req *http.Request, sent []byte, r response) {
	t.Helper()
	check, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(req, sent, r.status, r.header, r.body); err != nil {
		t.Errorf("openapi.json disagrees: %v", err)
	}
}

// serve is h.ServeHTTP with the exchange held against openapi.json.
func serve(t *testing.T, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	var sent []byte
	if req.Body != nil {
		sent, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	documented(t, req, sent, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()})
	return rec
}

// Every route of the router is an operation of the document, and every operation of the
// document a route: a route cannot be added without its contract, nor stay in the
// document once removed.
func TestOpenAPIDocumentCoversEveryRoute(t *testing.T) {
	check, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	routes := map[string]bool{}
	for _, route := range unlimitedRouter(f).Routes() {
		if strings.HasPrefix(route.Path, "/console") {
			continue
		}
		path := strings.Replace(route.Path, developerAlias, "/developer/", 1)
		op := check.Operation(route.Method, concretePath(path, "x"))
		if op == "" {
			t.Errorf("%s %s has no operation in docs/openapi.json", route.Method, route.Path)
			continue
		}
		routes[op] = true
	}
	for _, op := range check.Operations() {
		if !routes[op] {
			t.Errorf("docs/openapi.json describes %s, which the router does not serve", op)
		}
	}
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/v1/openapi.json", "", nil)
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") ||
		json.Unmarshal(r.body, &doc) != nil || doc.OpenAPI != "3.1.0" || !slices.Equal(r.body, docs.OpenAPI) {
		t.Fatalf("GET /api/v1/openapi.json: %d %q", r.status, r.header.Get("Content-Type"))
	}
	if _, ok := doc.Paths["/api/v1/payments/{id}/submit"]; !ok {
		t.Fatal("the served document lacks the payments' submit")
	}
}
