package service

import (
	"errors"
	"net/http"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
)

// Kind is why an operation refused: each maps to one answer of the API (SPEC 2).
type Kind int

const (
	// NotFound: no such resource, or one the caller may not see (existence is never revealed).
	NotFound Kind = iota + 1
	// PermissionDenied: the caller lacks the app or the action.
	PermissionDenied
	// MakerChecker: the creator of an order tried to decide it.
	MakerChecker
	// Conflict: the resource's state does not allow it.
	Conflict
	// AlreadyDecided: the person behind the credential has decided the approval item
	// already, through another credential (one person is one approver).
	AlreadyDecided
	// Invalid: the request has invalid fields (Fields names each).
	Invalid
	// PolicyViolation: the policy refused the order (Violations names the rules).
	PolicyViolation
	// InvalidSignature: the signature does not verify against the wallet's key.
	InvalidSignature
	// PriceUnavailable: the order's asset has no fresh USD price (limits are in USD: fail
	// closed); Fields names the asset's field.
	PriceUnavailable
	// Unavailable: something the operation needs cannot act now; safe to retry.
	Unavailable
	// Unauthenticated: the credentials given (an e-mail and password, or a token) are wrong.
	Unauthenticated
	// RateLimited: too many attempts; RetryAfter says when to try again.
	RateLimited

	// kinds ends the list: the answers' test walks every kind below it.
	kinds
)

// answer is how HTTP answers a kind of refusal.
type answer struct {
	status int
	code   string
}

// answers is the one table of what each kind answers over HTTP (SPEC 2). The API renders
// the problem with this code and status, and the console its page with this status; the
// console may not import the API, so the table lives with the kinds.
var answers = [kinds]answer{
	NotFound:         {http.StatusNotFound, apitypes.CodeNotFound},
	PermissionDenied: {http.StatusForbidden, apitypes.CodePermissionDenied},
	MakerChecker:     {http.StatusForbidden, apitypes.CodeMakerChecker},
	Conflict:         {http.StatusConflict, apitypes.CodeConflict},
	AlreadyDecided:   {http.StatusConflict, apitypes.CodeAlreadyDecided},
	Invalid:          {http.StatusUnprocessableEntity, apitypes.CodeValidationFailed},
	PolicyViolation:  {http.StatusUnprocessableEntity, apitypes.CodePolicyViolation},
	InvalidSignature: {http.StatusUnprocessableEntity, apitypes.CodeInvalidSignature},
	PriceUnavailable: {http.StatusUnprocessableEntity, apitypes.CodePriceUnavailable},
	Unavailable:      {http.StatusServiceUnavailable, apitypes.CodeUnavailable},
	Unauthenticated:  {http.StatusUnauthorized, apitypes.CodeUnauthenticated},
	RateLimited:      {http.StatusTooManyRequests, apitypes.CodeRateLimited},
}

func (k Kind) answer() answer {
	if k <= 0 || k >= kinds {
		return answer{}
	}
	return answers[k]
}

// Status is the HTTP status of a refusal of this kind, or 0 when k is no refusal's kind
// (KindOf an error that is not a refusal).
func (k Kind) Status() int { return k.answer().status }

// Code is the problem code (SPEC 2) of a refusal of this kind, or "" when k is no
// refusal's kind.
func (k Kind) Code() string { return k.answer().code }

// Error is a refusal the caller can act on, with a human detail.
type Error struct {
	Kind       Kind
	Detail     string
	Fields     []orders.FieldError
	Violations []policy.Violation
	// RetryAfter is how long a RateLimited caller should wait.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Detail }

func refuse(kind Kind, detail string) *Error { return &Error{Kind: kind, Detail: detail} }

// invalid is the refusal of a request with invalid fields.
func invalid(fields ...orders.FieldError) *Error {
	return &Error{Kind: Invalid, Detail: "The request has invalid fields; see errors.", Fields: fields}
}

// field names one invalid field.
func field(name, message string) orders.FieldError {
	return orders.FieldError{Field: name, Message: message}
}

// KindOf is the kind of a refusal, or 0 for any other error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}
