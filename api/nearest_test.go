package api

import (
	"strings"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
)

func TestAPathServedUnderAnotherMethodAnswers405WithAllow(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	r := f.do(t, "GET", "/api/v1/rpc/ethereum", sk, nil)
	r.wantProblem(t, 405, apitypes.CodeMethodNotAllowed)
	if r.header.Get("Allow") != "POST" || !strings.Contains(r.problem.Detail, "it takes POST") {
		t.Fatalf("Allow %q, detail %q", r.header.Get("Allow"), r.problem.Detail)
	}
	r = f.do(t, "DELETE", "/api/v1/payments", sk, nil)
	r.wantProblem(t, 405, apitypes.CodeMethodNotAllowed)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Fatalf("Allow %q", allow)
	}
}

func TestA404UnderTheAPINamesTheNearestRoute(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	for _, c := range []struct{ method, path, nearest string }{
		{"GET", "/api/v1/payment/ord_123", "GET /api/v1/payments/{id}"},
		{"POST", "/api/v1/payments/ord_123/submitt", "POST /api/v1/payments/{id}/submit"},
		{"POST", "/api/v1/rpc", "POST /api/v1/rpc/{chain}"},
		{"GET", "/api/v1/treasury/portfolios", "GET /api/v1/treasury/portfolio"},
		{"GET", "/api/v1/zzzz/qqqq", ""},
		{"GET", "/elsewhere/payments", ""},
	} {
		r := f.do(t, c.method, c.path, sk, nil)
		r.wantProblem(t, 404, apitypes.CodeNotFound)
		named := strings.Contains(r.problem.Detail, "nearest route")
		if c.nearest == "" && named || c.nearest != "" && !strings.Contains(r.problem.Detail, "The nearest route is "+c.nearest+".") {
			t.Errorf("%s %s: detail %q, want the nearest %q", c.method, c.path, r.problem.Detail, c.nearest)
		}
	}
}
