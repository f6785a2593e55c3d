package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/validation"

	"github.com/postmill/postmill/ports"
)

// errorBody is the SPEC §7 body of every non-2xx response. It doubles as huma's error type (it implements
// huma.StatusError), so huma documents it as the error schema of every operation and writes it for the
// errors it detects itself.
type errorBody struct {
	_                 struct{}      `json:"-" additionalProperties:"true"`
	StatusCode        int           `json:"statusCode" example:"400" doc:"HTTP status code"`
	Name              string        `json:"error" example:"Bad Request" doc:"Machine word (insufficient_scope, plan_limit_exceeded, org_suspended, warmup_cap_reached) or the HTTP status text"`
	Message           string        `json:"message" example:"Validation failed" doc:"Human-readable explanation; SPEC §7 fixes the wording of the common ones (Validation failed, Resource already exists, ...)"`
	Details           []errorDetail `json:"details,omitempty" doc:"Schema violations, on 400 Validation failed"`
	Constraint        string        `json:"constraint,omitempty" doc:"Uniqueness or reference constraint name on conflicts and missing references"`
	RetryAfterSeconds int           `json:"retryAfterSeconds,omitempty" doc:"Seconds to wait, on a request-rate 429"`
	// Hint is an addition to SPEC §7's body: the messages are fixed word for word, so what to do about the
	// error travels beside the message.
	Hint string `json:"hint,omitempty" example:"The domain is suspended; it sends again once POST /v1/domains/{id}/verify finds its required records (SPF, DKIM, RETURN_PATH) published." doc:"What to do to get past the error (on an unverified or suspended domain, a paused organization, a plan limit or the warm-up cap); absent when there is nothing to add to the message"`
	// extra holds coded errors' additional top-level fields (requiredScopes, metric, limit).
	extra map[string]any
}

// errorDetail is one schema violation; Path is dot-joined (attachments.0.content).
type errorDetail struct {
	Path    string `json:"path" doc:"Dot-joined path of the field, such as attachments.0.content; cross-field rules name the object"`
	Message string `json:"message" doc:"What is wrong with it"`
}

// Error implements error.
func (e *errorBody) Error() string { return e.Message }

// GetStatus implements huma.StatusError.
func (e *errorBody) GetStatus() int { return e.StatusCode }

// MarshalJSON writes the fixed fields first and then the coded error's extra fields at the top level,
// never letting an extra field overwrite a fixed one.
func (e *errorBody) MarshalJSON() ([]byte, error) {
	type plain struct {
		StatusCode        int           `json:"statusCode"`
		Name              string        `json:"error"`
		Message           string        `json:"message"`
		Details           []errorDetail `json:"details,omitempty"`
		Constraint        string        `json:"constraint,omitempty"`
		RetryAfterSeconds int           `json:"retryAfterSeconds,omitempty"`
		Hint              string        `json:"hint,omitempty"`
	}
	out, err := marshalJSON(plain{e.StatusCode, e.Name, e.Message, e.Details, e.Constraint, e.RetryAfterSeconds, e.Hint})
	if err != nil || len(e.extra) == 0 {
		return out, err
	}
	keys := make([]string, 0, len(e.extra))
	for k := range e.extra {
		switch k {
		case "statusCode", "error", "message", "details", "constraint", "retryAfterSeconds", ports.FieldHint:
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out = out[:len(out)-1] // reopen the object
	for _, k := range keys {
		kb, _ := marshalJSON(k)
		vb, err := marshalJSON(e.extra[k])
		if err != nil {
			return nil, err
		}
		out = append(append(append(append(out, ','), kb...), ':'), vb...)
	}
	return append(out, '}'), nil
}

// marshalJSON is json.Marshal without HTML escaping, matching huma's response encoder so that messages
// such as "expected length >= 1" read the same in every body.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// statusByCode is the one table from ports codes to HTTP statuses (STYLE.md §3).
var statusByCode = map[ports.Code]int{
	ports.CodeInvalidArgument:    http.StatusBadRequest,
	ports.CodeUnauthenticated:    http.StatusUnauthorized,
	ports.CodePaymentRequired:    http.StatusPaymentRequired,
	ports.CodePermissionDenied:   http.StatusForbidden,
	ports.CodeNotFound:           http.StatusNotFound,
	ports.CodeAlreadyExists:      http.StatusConflict,
	ports.CodeFailedPrecondition: http.StatusConflict,
	ports.CodeResourceExhausted:  http.StatusTooManyRequests,
	ports.CodeInternal:           http.StatusInternalServerError,
}

// problemFor is the one function that turns an error into the HTTP status and SPEC §7 body. Anything that
// is not a *ports.Error, and every internal error, becomes a 500 that carries no detail: callers log the
// real error with the request id (see logInternal).
func problemFor(err error) *errorBody {
	pe, ok := ports.AsError(err)
	if !ok {
		return statusProblem(http.StatusInternalServerError, "")
	}
	status, known := statusByCode[pe.Code]
	if !known || status == http.StatusInternalServerError {
		return statusProblem(http.StatusInternalServerError, "")
	}
	body := &errorBody{
		StatusCode: status,
		Name:       http.StatusText(status),
		Message:    pe.Message,
		Constraint: pe.Constraint,
	}
	if pe.Reason != "" {
		body.Name = pe.Reason
	}
	if body.Message == "" {
		body.Message = http.StatusText(status)
	}
	if status == http.StatusTooManyRequests && pe.RetryAfterSeconds > 0 {
		body.RetryAfterSeconds = pe.RetryAfterSeconds
	}
	for _, d := range pe.Details {
		body.Details = append(body.Details, errorDetail{Path: d.Path, Message: d.Message})
	}
	body.Hint = pe.Hint()
	if len(pe.Fields) > 0 {
		body.extra = make(map[string]any, len(pe.Fields))
		for k, v := range pe.Fields {
			body.extra[k] = v
		}
	}
	return body
}

// statusProblem is the body of a transport-level error that has no ports code (404 for an unknown route,
// 413, 415, 503, ...). A 5xx never carries a message beyond its status text.
func statusProblem(status int, message string) *errorBody {
	if message == "" || status >= 500 {
		message = http.StatusText(status)
	}
	return &errorBody{StatusCode: status, Name: http.StatusText(status), Message: message}
}

func init() {
	huma.NewError = humaError
	huma.NewErrorWithContext = humaErrorWithContext
}

// humaErrorWithContext is huma's hook for every error it writes: the ones it detects and the ones handlers
// and middleware return. It logs what becomes a 500 with the request's logger, so the request id is on the
// line, and answers without detail.
func humaErrorWithContext(ctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
	body := humaError(status, msg, errs...)
	if body.GetStatus() >= 500 && ctx != nil {
		logInternal(ctx.Context(), msg, errs...)
	}
	return body
}

// humaError converts huma's errors to the SPEC §7 shape: schema violations become 400 Validation failed
// (never 422) with dot-joined paths, a body that is not JSON becomes 400, and an error carrying a ports
// code is mapped by problemFor regardless of the status huma proposed.
func humaError(status int, msg string, errs ...error) huma.StatusError {
	for _, err := range errs {
		if _, ok := ports.AsError(err); ok {
			return problemFor(err)
		}
	}
	switch {
	case status == 0:
		// huma asks for an example value when it builds the OpenAPI error schema.
		return &errorBody{}
	case status == http.StatusUnprocessableEntity:
		return problemFor(ports.ValidationError(violations(errs)...))
	case status == http.StatusBadRequest && msg == "validation failed":
		// huma reports 400 (rather than 422) only when the body could not be decoded at all.
		return problemFor(ports.Errorf(ports.CodeInvalidArgument, "Malformed JSON in request body"))
	case status == http.StatusBadRequest && msg == "request body is required":
		// A required body that is absent fails the schema as a whole: SPEC §7's Validation failed, with
		// the detail at the body itself.
		return problemFor(ports.ValidationError(ports.FieldViolation{Message: "request body is required"}))
	case status == http.StatusRequestEntityTooLarge:
		return statusProblem(status, "Request body is too large")
	case status == http.StatusUnsupportedMediaType:
		return statusProblem(status, "Request body must be application/json")
	case status >= 500:
		return statusProblem(http.StatusInternalServerError, "")
	}
	return statusProblem(status, sentence(msg))
}

// violations turns huma's error details into SPEC §7 field violations, never echoing the offending value.
func violations(errs []error) []ports.FieldViolation {
	out := make([]ports.FieldViolation, 0, len(errs))
	for _, err := range errs {
		if err == nil {
			continue
		}
		var d huma.ErrorDetailer
		if !errors.As(err, &d) {
			out = append(out, ports.FieldViolation{Message: err.Error()})
			continue
		}
		detail := d.ErrorDetail()
		path := fieldPath(detail.Location)
		if name, ok := requiredProperty(detail.Message); ok {
			// huma reports a missing property against its parent object; clients want the field itself.
			path = joinPath(path, name)
		}
		out = append(out, ports.FieldViolation{Path: path, Message: detail.Message})
	}
	return withoutVagueOneOf(out)
}

// withoutVagueOneOf drops huma's "matched none" verdict on a oneOf field (such as `to`, a string or an
// array) when a resolver reported what is actually wrong at that field or inside it, so clients see
// `to.1: expected string to be RFC 5322 email` rather than a riddle.
func withoutVagueOneOf(in []ports.FieldViolation) []ports.FieldViolation {
	out := in[:0:0]
	for _, v := range in {
		if v.Message == validation.MsgExpectedMatchExactlyOneSchema && explained(in, v.Path) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// explained reports whether another violation names path or a field inside it.
func explained(all []ports.FieldViolation, path string) bool {
	for _, v := range all {
		if v.Message == validation.MsgExpectedMatchExactlyOneSchema {
			continue
		}
		if v.Path == path || strings.HasPrefix(v.Path, path+".") {
			return true
		}
	}
	return false
}

// fieldPath converts a huma location such as body.attachments[0].content or path.id into the dot-joined
// path of SPEC §7 (attachments.0.content, id): the body. prefix goes, parameters keep their name.
func fieldPath(location string) string {
	for _, where := range []string{"body", "path", "query", "header", "cookie"} {
		rest, ok := strings.CutPrefix(location, where)
		if !ok || (rest != "" && rest[0] != '.' && rest[0] != '[') {
			continue
		}
		location = strings.TrimPrefix(rest, ".")
		break
	}
	var b strings.Builder
	for i := 0; i < len(location); i++ {
		switch c := location[i]; c {
		case '[':
			if b.Len() > 0 {
				b.WriteByte('.')
			}
		case ']':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// requiredProperty extracts the property name from huma's "expected required property X to be present".
func requiredProperty(message string) (string, bool) {
	prefix, suffix, ok := strings.Cut(validation.MsgExpectedRequiredProperty, "%s")
	if !ok {
		return "", false
	}
	rest, ok := strings.CutPrefix(message, prefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suffix)
	return name, ok && name != ""
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// logInternal records the real cause of a 500 with the request's logger; the client never sees it. A
// request its client abandoned (the request's context is cancelled and the cause says so) is not a
// server error: it is logged at info, so that a client hanging up on slow work cannot fill the error log.
func logInternal(ctx context.Context, msg string, errs ...error) {
	logger := loggerFrom(ctx)
	attrs := []any{slog.String("cause", msg)}
	err := errors.Join(errs...)
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		logger.Info("request abandoned by the client", attrs...)
		return
	}
	logger.Error("internal error", attrs...)
}
