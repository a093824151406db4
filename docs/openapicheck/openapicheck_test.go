package openapicheck

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	header := http.Header{"Content-Type": {"application/json"}, "X-Correlation-Id": {"c-1"}}
	portfolio := httptest.NewRequest("GET", "/api/v1/treasury/portfolio", nil)
	good := `{"totalUsd":"31050000.00","walletCount":5,"chainRollup":[{"chain":"ethereum","usdValue":"28500000.00"}],"syncedAt":null,"unpricedAssets":[]}`
	if err := c.Check(portfolio, nil, 200, header, []byte(good)); err != nil {
		t.Fatalf("a portfolio as the service answers it: %v", err)
	}
	for name, body := range map[string]string{
		"an amount as a number": strings.Replace(good, `"31050000.00"`, `31050000`, 1),
		"a missing field":       strings.Replace(good, `"walletCount":5,`, ``, 1),
	} {
		if err := c.Check(portfolio, nil, 200, header, []byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := c.Check(portfolio, nil, 418, header, []byte(`{}`)); err == nil {
		t.Error("an undocumented status: accepted")
	}
	if err := c.Check(httptest.NewRequest("GET", "/api/v1/undocumented", nil), nil, 200, header, []byte(`{}`)); err == nil {
		t.Error("a 2xx from a path the document lacks: accepted")
	}
	if err := c.Check(httptest.NewRequest("GET", "/api/v1/undocumented", nil), nil, 404, header, []byte(`{}`)); err != nil {
		t.Errorf("a 404 from a path the document lacks: %v", err)
	}
	if op := c.Operation("DELETE", "/api/v1/developer/api-keys/key_1"); op != "DELETE /developer/api-keys/{id}" {
		t.Errorf("the alias maps to %q", op)
	}
	if len(c.Failures()) != 4 || c.Covered()["GET /api/v1/treasury/portfolio"] != 4 {
		t.Errorf("failures %d, covered %v", len(c.Failures()), c.Covered())
	}
}
