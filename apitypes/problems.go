package apitypes

// Problem codes (SPEC 2, docs/errors.md): the code of every problem document the API
// answers with, each of one HTTP status. Clients branch on these, never on the detail.
const (
	CodeUnauthenticated      = "unauthenticated"
	CodePermissionDenied     = "permission_denied"
	CodeMakerChecker         = "maker_checker_violation"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodeAlreadyDecided       = "already_decided"
	CodeIdempotencyKeyInUse  = "idempotency_key_in_use"
	CodeValidationFailed     = "validation_failed"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodePolicyViolation      = "policy_violation"
	CodeInvalidSignature     = "invalid_signature"
	CodePriceUnavailable     = "price_unavailable"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeRateLimited          = "rate_limited"
	CodeInternal             = "internal"
	CodeUnavailable          = "unavailable"
)
