package api

import (
	"bytes"
	"strings"
	"testing"
)

// Every JSON answer, problems and OAuth errors included, reads as written (a detail says
// "Bearer <key>", never \u003ckey\u003e) and ends with a newline, as a terminal shows it.
func TestAnswersAreTextAsWrittenEndingWithANewline(t *testing.T) {
	f := newFixture(t)
	unauthenticated := f.do(t, "GET", "/api/v1/payments", "", nil, "Authorization", "Basic abc")
	if unauthenticated.status != 401 || !bytes.Contains(unauthenticated.body, []byte("'Bearer <key>'")) ||
		bytes.Contains(unauthenticated.body, []byte(`\u003c`)) {
		t.Fatalf("the 401: %d %s", unauthenticated.status, unauthenticated.body)
	}
	answers := map[string]response{
		"a problem":      unauthenticated,
		"a list":         f.do(t, "GET", "/api/v1/payments", f.creds.Keys["pay"].SK, nil),
		"a resource":     f.do(t, "GET", "/api/v1/treasury/portfolio", f.creds.Keys["treasury"].SK, nil),
		"an OAuth error": f.do(t, "POST", "/api/v1/oauth/token", "", strings.NewReader("grant_type=password"), "Content-Type", "application/x-www-form-urlencoded"),
	}
	for name, r := range answers {
		if len(r.body) == 0 || r.body[len(r.body)-1] != '\n' || bytes.Count(r.body, []byte("\n")) != 1 {
			t.Errorf("%s (%d) does not end with one newline: %q", name, r.status, r.body)
		}
	}
}
