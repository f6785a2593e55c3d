package ports

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies an error the way Connect does, so that every transport (REST, Connect, SMTP) can map it
// with one table. The set is deliberately small.
type Code string

// The error codes. Each driving-interface method documents which ones it returns.
const (
	CodeInvalidArgument    Code = "invalid_argument"
	CodeNotFound           Code = "not_found"
	CodeAlreadyExists      Code = "already_exists"
	CodeFailedPrecondition Code = "failed_precondition"
	CodePermissionDenied   Code = "permission_denied"
	CodeUnauthenticated    Code = "unauthenticated"
	CodeResourceExhausted  Code = "resource_exhausted"
	CodePaymentRequired    Code = "payment_required"
	CodeInternal           Code = "internal"
)

// FieldViolation names one schema violation: Path is dot-joined (attachments.0.content), as in SPEC §7.
type FieldViolation struct {
	Path    string
	Message string
}

// Error is the one error type that crosses Postmill's boundaries. Reason carries the SPEC §7 machine word
// (insufficient_scope, plan_limit_exceeded, org_suspended, warmup_cap_reached) when the error has one; the
// REST edge uses it as the body's `error` field. Fields holds extra top-level body fields such as
// requiredScopes, metric or limit: values must be JSON-encodable.
type Error struct {
	Code              Code
	Message           string
	Reason            string
	Details           []FieldViolation
	Constraint        string
	RetryAfterSeconds int
	Fields            map[string]any
}

// Error implements error.
func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Describe is the error for a human reader outside JSON (an SMTP reply, a batch item's error string): the
// message with the field violations appended, e.g. "Validation failed (from: exactly one address)", so the
// reader sees what to fix. The code stands in for an empty message. It does not decide whether the detail
// may be shown: callers use it only for codes whose message is meant for the client (never internal).
func (e *Error) Describe() string {
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	if len(e.Details) == 0 {
		return msg
	}
	parts := make([]string, 0, len(e.Details))
	for _, d := range e.Details {
		if d.Path == "" {
			parts = append(parts, d.Message)
			continue
		}
		parts = append(parts, d.Path+": "+d.Message)
	}
	return msg + " (" + strings.Join(parts, "; ") + ")"
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError finds the *Error in err's chain. Wrapped errors keep their code (errors.As, never a type assertion).
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ErrorCode returns the code of err: "" for nil, CodeInternal for an error that is not an *Error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	if e, ok := AsError(err); ok {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the human message of an *Error, or "internal error" for anything else so that
// unexpected details never leave the process.
func ErrorMessage(err error) string {
	if e, ok := AsError(err); ok {
		return e.Message
	}
	return "internal error"
}

// FieldHint is the key of Error.Fields that carries a hint: what the client can do to get past the error
// (verify the domain again, ask an admin to resume sending, wait for the allowance to reset). SPEC §7 fixes
// the messages of the coded errors word for word, so the way out travels beside the message, never in it.
const FieldHint = "hint"

// WithHint sets e's hint (Fields[FieldHint]) and returns e, so a constructor can end with it. An empty
// hint sets nothing.
func (e *Error) WithHint(hint string) *Error {
	if hint == "" {
		return e
	}
	if e.Fields == nil {
		e.Fields = map[string]any{}
	}
	e.Fields[FieldHint] = hint
	return e
}

// Hint returns e's hint, "" when it has none.
func (e *Error) Hint() string {
	h, _ := e.Fields[FieldHint].(string)
	return h
}

// Messages fixed by SPEC §7.
const (
	MessageValidationFailed  = "Validation failed"
	MessageAlreadyExists     = "Resource already exists"
	MessageMissingReference  = "Referenced resource does not exist"
	MessageRateLimitExceeded = "Rate limit exceeded. Try again later."
)

// ValidationError is the 400 of SPEC §7 for a schema violation.
func ValidationError(details ...FieldViolation) *Error {
	return &Error{Code: CodeInvalidArgument, Message: MessageValidationFailed, Details: details}
}

// AlreadyExists is the 409 of SPEC §7: it names the constraint and never echoes the conflicting value.
func AlreadyExists(constraint string) *Error {
	return &Error{Code: CodeAlreadyExists, Message: MessageAlreadyExists, Constraint: constraint}
}

// MissingReference is the 400 of SPEC §7 for a reference to a resource that does not exist.
func MissingReference(constraint string) *Error {
	return &Error{Code: CodeInvalidArgument, Message: MessageMissingReference, Constraint: constraint}
}

// NotFound is a 404 with the given message.
func NotFound(format string, args ...any) *Error { return Errorf(CodeNotFound, format, args...) }

// Unauthenticated is a 401 with the given message.
func Unauthenticated(format string, args ...any) *Error {
	return Errorf(CodeUnauthenticated, format, args...)
}

// RateLimited is the 429 of SPEC §7 for request-rate limits.
func RateLimited(retryAfterSeconds int) *Error {
	if retryAfterSeconds < 1 {
		retryAfterSeconds = 1
	}
	return &Error{Code: CodeResourceExhausted, Message: MessageRateLimitExceeded, RetryAfterSeconds: retryAfterSeconds}
}

// InsufficientScope is the 403 of SPEC §5 rule 9; required lists the scopes any one of which would do.
func InsufficientScope(required []string) *Error {
	return &Error{
		Code:    CodePermissionDenied,
		Reason:  "insufficient_scope",
		Message: "API key lacks the scope required for this route",
		Fields:  map[string]any{"requiredScopes": required},
	}
}

// recipientSuppressedPrefix starts SPEC §7's message for a send refused because a recipient (or its domain)
// is suppressed: `recipient suppressed: <address>`.
const recipientSuppressedPrefix = "recipient suppressed: "

// RecipientSuppressed is the send path's refusal of a suppressed recipient (400, SPEC §7).
func RecipientSuppressed(address string) error {
	return &Error{Code: CodeInvalidArgument, Message: recipientSuppressedPrefix + address}
}

// IsRecipientSuppressed reports whether err is RecipientSuppressed's refusal, also after it crossed Connect
// (which carries the code and the message).
func IsRecipientSuppressed(err error) bool {
	return ErrorCode(err) == CodeInvalidArgument && strings.HasPrefix(ErrorMessage(err), recipientSuppressedPrefix)
}
