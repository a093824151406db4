package api

import (
	"testing"

	"github.com/opentreasury/treasury/internal/service"
)

// The service's table names the problem of each refusal; a code the API does not know, or
// one whose status differs from the problem's, would answer a refusal as something else.
func TestEveryRefusalIsAProblemOfItsStatus(t *testing.T) {
	n := 0
	for k := service.Kind(1); k.Code() != ""; k++ {
		n++
		if status, ok := codeStatus[k.Code()]; !ok || status != k.Status() {
			t.Errorf("kind %d: code %q is status %d here (known %v), %d in the service", k, k.Code(), status, ok, k.Status())
		}
	}
	if n < int(service.RateLimited) {
		t.Errorf("only %d kinds answer", n)
	}
}
