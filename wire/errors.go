package wire

// ErrorCode is the stable machine-readable part of an error response.
type ErrorCode string

// The error codes. Their strings never change.
const (
	CodeBadRequest       ErrorCode = "bad_request"
	CodeUnauthorized     ErrorCode = "unauthorized"
	CodeForbidden        ErrorCode = "forbidden"
	CodeNotFound         ErrorCode = "not_found"
	CodeMethodNotAllowed ErrorCode = "method_not_allowed"
	CodeTooLarge         ErrorCode = "payload_too_large"
	CodeUnsupportedMedia ErrorCode = "unsupported_media_type"
	CodeUnavailable      ErrorCode = "unavailable"
	CodeConflict         ErrorCode = "conflict"
	CodeInternal         ErrorCode = "internal"
)

// Error is the body of every error response.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}
