package inbound

import (
	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/ports"
)

// Replies that do not come from a ports error.
var (
	// errNoSuchRecipient answers RCPT for an address that is neither a return path Postmill made nor the
	// feedback-loop address (RFC 3463 §3.2 X.1.1, bad destination mailbox address).
	errNoSuchRecipient = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such recipient"}
	// errTemporary answers when the core could not decide or record: the sender keeps the message and
	// retries (RFC 5321 §4.2.1 class 4), so nothing it offered is lost.
	errTemporary = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local problem, try again later"}
)

// accepted is the success reply of DATA, saying what became of the message.
func accepted(what string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: "Ok: " + what}
}

// outcome classifies a core error for the reply table in the package documentation.
type outcome int

const (
	outcomeRecorded  outcome = iota // nil, or already_exists: the report is on record
	outcomePermanent                // the report will never map to anything: 550
	outcomeTemporary                // the core could not answer now: 451
)

// classify is the one table from ports codes to what the listener answers. invalid_argument and not_found
// say the report cannot be mapped to a message Postmill sent (a forged or stale return path, a report
// about mail of another system); failed_precondition and permission_denied cannot become true by retrying
// either. Everything else, internal above all, is temporary.
func classify(err error) outcome {
	switch ports.ErrorCode(err) {
	case "", ports.CodeAlreadyExists:
		return outcomeRecorded
	case ports.CodeInvalidArgument, ports.CodeNotFound, ports.CodeFailedPrecondition, ports.CodePermissionDenied:
		return outcomePermanent
	}
	return outcomeTemporary
}

// refused is the DATA reply for a report that cannot be used: 550 5.6.0 (RFC 3463 §3.7 X.6.0, other or
// undefined media error) with the reason. The sender of a bounce or feedback report uses the null path or
// a report mailbox, so a refusal never starts a bounce loop.
// errTooComplex refuses a message with more MIME parts, or deeper nesting, than the parser walks
// (maxParts, maxDepth): what lies beyond could not be scanned for malware (RFC 3463 X.6.0: other or
// undefined media error).
var errTooComplex = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
	Message: "Message structure too complex to check: more than 500 MIME parts or nested deeper than 10 levels"}

func refused(err error) *smtp.SMTPError {
	msg := "Report not accepted"
	if pe, ok := ports.AsError(err); ok {
		msg = pe.Describe()
	}
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: smtpd.ReplyText(msg)}
}
