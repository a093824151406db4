package activities

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// One table says which failures a retry cannot fix and what the workflow sees of them;
// everything else stays retryable.
func TestClassifyDecidesWhatARetryCanFix(t *testing.T) {
	for _, c := range []struct {
		err     error
		errType string // "" for retryable
		details string
	}{
		{fmt.Errorf("apply: %w", store.ErrTransition), workflows.ErrTypeInvalidState, ""},
		{fmt.Errorf("%w: the leg was never broadcast", errNotForThisStep), workflows.ErrTypeInvalidState, ""},
		{fmt.Errorf("%w: %w", errReplacedMined, chain.ErrNonceUsed), workflows.ErrTypeNonceUsed, ""},
		{fmt.Errorf("%w: %w", errCorruptOrder, errors.New("bad amount")), "CorruptOrder", ""},
		{fmt.Errorf("prepare: %w", chain.ErrInsufficientFunds), workflows.ErrTypeLegRefused, string(orders.FailureInsufficientFunds)},
		{fmt.Errorf("prepare: %w", chain.ErrAmountTooLarge), workflows.ErrTypeLegRefused, string(orders.FailureAmountTooLarge)},
		{errors.New("connection refused"), "", ""},
		{fmt.Errorf("broadcast: %w", chain.ErrNonceUsed), "", ""}, // only a replacement's is final
	} {
		got := classify(c.err)
		var app *temporal.ApplicationError
		if c.errType == "" {
			if errors.As(got, &app) || got != c.err {
				t.Errorf("%v: want it returned as it is, retryable; got %v", c.err, got)
			}
			continue
		}
		if !errors.As(got, &app) || !app.NonRetryable() || app.Type() != c.errType || !errors.Is(got, c.err) {
			t.Errorf("%v: want a non-retryable %s wrapping it; got %#v", c.err, c.errType, got)
			continue
		}
		var details string
		if c.details != "" && (app.Details(&details) != nil || details != c.details) {
			t.Errorf("%v: details %q, want %q", c.err, details, c.details)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) is not nil")
	}
}
