package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	rpcv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/rpc/v1"
)

// codes is the one table between ports codes and Connect codes, read in both directions. Connect has no
// payment code, so payment_required travels as FailedPrecondition with ErrorDetail.payment_required set:
// the pair (Connect code, flag) names exactly one ports code.
var codes = []struct {
	port            ports.Code
	connect         connect.Code
	paymentRequired bool
}{
	{ports.CodeInvalidArgument, connect.CodeInvalidArgument, false},
	{ports.CodeNotFound, connect.CodeNotFound, false},
	{ports.CodeAlreadyExists, connect.CodeAlreadyExists, false},
	{ports.CodeFailedPrecondition, connect.CodeFailedPrecondition, false},
	{ports.CodePermissionDenied, connect.CodePermissionDenied, false},
	{ports.CodeUnauthenticated, connect.CodeUnauthenticated, false},
	{ports.CodeResourceExhausted, connect.CodeResourceExhausted, false},
	{ports.CodePaymentRequired, connect.CodeFailedPrecondition, true},
	{ports.CodeInternal, connect.CodeInternal, false},
}

// internalMessage is what a caller learns about a failure that is not a *ports.Error: the same words
// ports.ErrorMessage uses, so nothing unexpected leaves the process.
const internalMessage = "internal error"

// toConnectError turns an implementation's error into the Connect error sent on the wire. A *ports.Error
// (anywhere in the chain) keeps every field: code and message in the Connect error, the rest in an
// ErrorDetail. Anything else becomes Internal with internalMessage; the caller logs the original.
func toConnectError(err error) *connect.Error {
	code, message, detail := errorToWire(err)
	cerr := connect.NewError(code, errors.New(message))
	if d, err := connect.NewErrorDetail(detail); err == nil {
		cerr.AddDetail(d)
	}
	return cerr
}

// errorToWire splits an implementation's error into the Connect code, the message and the ErrorDetail
// that together carry it. toConnectError wraps them in a Connect error; a batch item's error carries them
// in a BatchItemError, so both travel through this one table.
func errorToWire(err error) (connect.Code, string, *rpcv1.ErrorDetail) {
	perr, ok := ports.AsError(err)
	if !ok {
		perr = &ports.Error{Code: ports.CodeInternal, Message: internalMessage}
	}
	code, paymentRequired := connect.CodeInternal, false
	for _, row := range codes {
		if row.port == perr.Code {
			code, paymentRequired = row.connect, row.paymentRequired
			break
		}
	}
	if code == connect.CodeInternal && perr.Code != ports.CodeInternal {
		// An unknown code is a bug in the implementation; do not let its words out either.
		perr = &ports.Error{Code: ports.CodeInternal, Message: internalMessage}
	}
	detail := &rpcv1.ErrorDetail{
		Reason:            perr.Reason,
		Constraint:        perr.Constraint,
		RetryAfterSeconds: clampInt32(perr.RetryAfterSeconds),
		PaymentRequired:   paymentRequired,
		DetailsPresent:    perr.Details != nil,
	}
	for _, d := range perr.Details {
		detail.Details = append(detail.Details, &rpcv1.FieldViolation{Path: d.Path, Message: d.Message})
	}
	if perr.Fields != nil {
		// Fields are promised JSON-encodable; a value that is not is dropped rather than turning a
		// meaningful error into an internal one.
		if b, err := json.Marshal(perr.Fields); err == nil {
			detail.FieldsJson = b
		}
	}
	return code, perr.Message, detail
}

// fromConnectError turns what a Connect call returned into what the in-process implementation would have
// returned. A wire error carrying an ErrorDetail was a *ports.Error on the server and is rebuilt field for
// field. Every other failure (connection refused, timeout, a refused inter-tier token, an unmounted
// service, a recovered panic) is this hop's fault, not the caller's: it becomes a ports internal error
// that wraps the cause, so errors.Is and connect.CodeOf still see it.
func fromConnectError(procedure string, err error) error {
	if err == nil {
		return nil
	}
	var cerr *connect.Error
	if errors.As(err, &cerr) && connect.IsWireError(cerr) {
		for _, d := range cerr.Details() {
			msg, derr := d.Value()
			if detail, ok := msg.(*rpcv1.ErrorDetail); derr == nil && ok {
				return portsError(cerr.Code(), cerr.Message(), detail)
			}
		}
	}
	return &transportError{
		perr:      &ports.Error{Code: ports.CodeInternal, Message: internalMessage},
		procedure: procedure,
		cause:     err,
	}
}

// portsError rebuilds a *ports.Error from its wire form.
func portsError(code connect.Code, message string, detail *rpcv1.ErrorDetail) *ports.Error {
	perr := &ports.Error{
		Code:              ports.CodeInternal,
		Message:           message,
		Reason:            detail.GetReason(),
		Constraint:        detail.GetConstraint(),
		RetryAfterSeconds: int(detail.GetRetryAfterSeconds()),
	}
	for _, row := range codes {
		if row.connect == code && row.paymentRequired == detail.GetPaymentRequired() {
			perr.Code = row.port
			break
		}
	}
	if detail.GetDetailsPresent() || len(detail.GetDetails()) > 0 {
		perr.Details = make([]ports.FieldViolation, 0, len(detail.GetDetails()))
		for _, d := range detail.GetDetails() {
			perr.Details = append(perr.Details, ports.FieldViolation{Path: d.GetPath(), Message: d.GetMessage()})
		}
	}
	if len(detail.GetFieldsJson()) > 0 {
		// UseNumber keeps integers exact: re-encoded, the fields are byte-for-byte what the server's
		// implementation would have rendered.
		dec := json.NewDecoder(bytes.NewReader(detail.GetFieldsJson()))
		dec.UseNumber()
		var fields map[string]any
		if dec.Decode(&fields) == nil {
			perr.Fields = fields
		}
	}
	return perr
}

// transportError is a failure of the hop itself. It is a ports internal error to every caller that asks
// for the code (errors.As finds perr), and it keeps the cause for logs and for
// errors.Is(err, context.DeadlineExceeded).
type transportError struct {
	perr      *ports.Error
	procedure string
	cause     error
}

func (e *transportError) Error() string {
	return fmt.Sprintf("rpc %s: %v", e.procedure, e.cause)
}

func (e *transportError) Unwrap() []error { return []error{e.perr, e.cause} }

func clampInt32(n int) int32 {
	switch {
	case n > math.MaxInt32:
		return math.MaxInt32
	case n < math.MinInt32:
		return math.MinInt32
	}
	return int32(n)
}

// batchItemErrorToProto carries one batch item's error exactly as a failed call would carry it; nil for
// an item that succeeded.
func batchItemErrorToProto(err error) *emailv1.BatchItemError {
	if err == nil {
		return nil
	}
	code, message, detail := errorToWire(err)
	return &emailv1.BatchItemError{Code: code.String(), Message: message, Detail: detail}
}

// batchItemErrorFromProto rebuilds the *ports.Error of a batch item, as fromConnectError does for a call.
// A code this client does not know is an internal error: the item failed, but not in a way the caller
// can act on.
func batchItemErrorFromProto(e *emailv1.BatchItemError) error {
	if e == nil {
		return nil
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(e.GetCode())); err != nil {
		return &ports.Error{Code: ports.CodeInternal, Message: internalMessage}
	}
	return portsError(code, e.GetMessage(), e.GetDetail())
}

// encodeError reports a request the client could not put on the wire (template variables that are not
// JSON, which ports promises they are): the caller's bug, so it is internal, and it names the cause.
func encodeError(procedure string, err error) error {
	return &transportError{
		perr:      &ports.Error{Code: ports.CodeInternal, Message: internalMessage},
		procedure: procedure,
		cause:     err,
	}
}
