package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// Failures no retry can fix, for activities to wrap (fmt.Errorf("%w: …", errX)) and
// classify to recognise. Every other error is retried by the activity's retry policy.
var (
	// errCorruptOrder: the order's stored details no longer hash to what was approved.
	errCorruptOrder = errors.New("the order's details do not match its payload hash")
	// errNotForThisStep: the order is not where the step applies (no transaction to
	// replace, a leg never broadcast), as store.ErrTransition is for a stored step.
	errNotForThisStep = errors.New("the order is not in a state for this step")
	// errReplacedMined: a replacement not sent, because the transaction it replaces was
	// mined meanwhile.
	errReplacedMined = errors.New("the transaction it replaces was mined")
	errBadSignature  = errors.New("the signature is not base64")
	errUnknownDryRun = errors.New("no such dry run")
	errUnknownJob    = errors.New("no such background job")
	// errStepEvent: a step given an event it does not emit (a programming error).
	errStepEvent = errors.New("the step emits no event")
)

// permanentTypes name each failure no retry fixes by the type of the Temporal application
// error the workflow sees; the workflow tells some apart (workflows.ErrType…).
var permanentTypes = []struct {
	is      error
	errType string
}{
	{store.ErrTransition, workflows.ErrTypeInvalidState},
	{errNotForThisStep, workflows.ErrTypeInvalidState},
	{errReplacedMined, workflows.ErrTypeNonceUsed},
	{errCorruptOrder, "CorruptOrder"},
	{orders.ErrStoredDetails, "CorruptOrder"},
	{errBadSignature, "BadSignature"},
	{errUnknownDryRun, "UnknownDryRun"},
	{errUnknownJob, "UnknownJob"},
	{errStepEvent, "StepEvent"},
}

// classify decides whether an activity's error is worth a retry: a failure no retry can
// fix becomes a non-retryable application error of its type (a leg the chain refused for
// good carries its failure code as details); anything else is returned as it is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if code, refused := refusal(err); refused {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeLegRefused, err, string(code))
	}
	for _, p := range permanentTypes {
		if errors.Is(err, p.is) {
			return temporal.NewNonRetryableApplicationError(err.Error(), p.errType, err)
		}
	}
	return err
}

// refusal is the failure code of a leg the chain refused for good, before any nonce: a
// retry would meet the same refusal.
func refusal(err error) (orders.FailureCode, bool) {
	switch {
	case errors.Is(err, chain.ErrInsufficientFunds):
		return orders.FailureInsufficientFunds, true
	case errors.Is(err, chain.ErrUnsupportedAsset):
		return orders.FailureUnsupportedAsset, true
	case errors.Is(err, chain.ErrAmountTooLarge):
		return orders.FailureAmountTooLarge, true
	}
	return "", false
}
