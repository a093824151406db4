// Package openapicheck holds HTTP exchanges against the OpenAPI document, for tests: every
// answer must be one the document describes for its operation (status included), and
// every request the server accepted must be one the document allows. Tests run their
// traffic through it so that the document cannot drift from the service.
package openapicheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/opentreasury/treasury/docs"
)

// developerAlias is where the developer surface also answers; the document describes its
// routes once, at the root.
const developerAlias = "/api/v1/developer/"

// JSON Lines (the audit export) is held to the document line by line: the document
// describes such a body as an array whose items are its lines, in order.
func init() { openapi3filter.RegisterBodyDecoder("application/jsonl", jsonLinesDecoder) }

func jsonLinesDecoder(body io.Reader, h http.Header, schema *openapi3.SchemaRef, enc openapi3filter.EncodingFn) (any, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	lines := []any{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		v, err := openapi3filter.JSONBodyDecoder(bytes.NewReader(line), h, schema, enc)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		lines = append(lines, v)
	}
	return lines, nil
}

// Checker checks exchanges and remembers which operations they covered. It is safe for
// concurrent use.
type Checker struct {
	Doc    *openapi3.T
	router routers.Router

	mu       sync.Mutex
	covered  map[string]int
	failures []string
}

// New loads the service's document, validates it, and returns a checker of it.
func New() (*Checker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid document: %w", err)
	}
	// Route by path alone: the exchanges of tests go to whatever host the test picked.
	routed := *doc
	routed.Servers = nil
	router, err := legacy.NewRouter(&routed)
	if err != nil {
		return nil, err
	}
	return &Checker{Doc: doc, router: router, covered: map[string]int{}}, nil
}

// Operation names a route of the document: "GET /api/v1/payments/{id}", or "" when the
// document has no such route.
func (c *Checker) Operation(method, path string) string {
	req, _ := http.NewRequest(method, "http://host"+canonical(path), nil)
	route, _, err := c.router.FindRoute(req)
	if err != nil {
		return ""
	}
	return route.Method + " " + route.Path
}

// isAPI says whether a path is the API's: what the document must describe.
func isAPI(path string) bool {
	return strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/developer/") || strings.HasPrefix(path, "/rpc/") ||
		path == "/healthz" || path == "/readyz"
}

// canonical is the documented path of an alias: /api/v1/developer/… is /developer/…, and
// /rpc/{chain} is /api/v1/rpc/{chain}.
func canonical(path string) string {
	if strings.HasPrefix(path, developerAlias) {
		return "/developer/" + strings.TrimPrefix(path, developerAlias)
	}
	if strings.HasPrefix(path, "/rpc/") {
		return "/api/v1" + path
	}
	return path
}

// Check holds one exchange against the document and returns what disagrees with it. The
// request is checked only when the server accepted it (2xx): the document may be stricter
// than the server about what it refuses, never about what it takes.
func (c *Checker) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	if !isAPI(req.URL.Path) {
		return nil // the console's pages, or another server a test talks to (the Temporal UI)
	}
	routed := req.Clone(context.Background())
	routed.URL.Path = canonical(req.URL.Path)
	routed.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := c.router.FindRoute(routed)
	if err != nil {
		// A path the service does not serve needs no operation; one it answers does.
		if status < 200 || status > 299 {
			return nil
		}
		return c.fail(fmt.Errorf("%s %s answered %d but has no operation in openapi.json", req.Method, req.URL.Path, status))
	}
	op := route.Method + " " + route.Path
	c.mu.Lock()
	c.covered[op]++
	c.mu.Unlock()
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true,
		MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: routed, PathParams: params, Route: route, Options: opts}
	var problems []string
	if status >= 200 && status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			problems = append(problems, "request: "+err.Error())
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: opts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		problems = append(problems, fmt.Sprintf("response %d: %v", status, err))
	}
	if len(problems) == 0 {
		return nil
	}
	return c.fail(fmt.Errorf("%s (%s %s): %s\n  answer: %.600s", op, req.Method, req.URL.RequestURI(), strings.Join(problems, "\n  "), body))
}

func (c *Checker) fail(err error) error {
	c.mu.Lock()
	c.failures = append(c.failures, err.Error())
	c.mu.Unlock()
	return err
}

// Failures are every disagreement found so far.
func (c *Checker) Failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.failures...)
}

// Covered lists the operations exchanges reached, with how many each.
func (c *Checker) Covered() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.covered))
	for k, v := range c.covered {
		out[k] = v
	}
	return out
}

// Operations lists every operation of the document, sorted.
func (c *Checker) Operations() []string {
	var out []string
	for path, item := range c.Doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// Transport sends requests through next and checks each exchange on the way back. Bodies
// are read whole (tests' bodies are small) and handed on unchanged.
func (c *Checker) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		var reqBody []byte
		if req.Body != nil {
			reqBody, _ = io.ReadAll(req.Body)
			_ = req.Body.Close()
			req.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		res, err := next.RoundTrip(req)
		if err != nil || res.StatusCode == http.StatusSwitchingProtocols {
			return res, err
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return nil, err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		_ = c.Check(req, reqBody, res.StatusCode, res.Header, body)
		return res, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
