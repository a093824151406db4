package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/opentreasury/treasury/docs/openapicheck"
)

// openAPI holds every exchange the suite makes over httpClient (and the people's
// browsers) against docs/openapi.json.
var openAPI *openapicheck.Checker

func TestMain(m *testing.M) {
	check, err := openapicheck.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	openAPI = check
	httpClient.Transport = check.Transport(nil)
	code := m.Run()
	if failures := check.Failures(); len(failures) > 0 {
		fmt.Fprintf(os.Stderr, "docs/openapi.json disagrees with %d exchanges of the suite:\n", len(failures))
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, " -", f)
		}
		code = 1
	}
	covered := check.Covered()
	fmt.Printf("openapi.json: the suite's exchanges reached %d of its %d operations\n", len(covered), len(check.Operations()))
	os.Exit(code)
}
