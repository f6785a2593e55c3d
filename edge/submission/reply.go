package submission

import (
	"strconv"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/ports"
)

// stage tells replyFor which command the error answers: AUTH has its own temporary-failure reply.
type stage int

const (
	stageAuth stage = iota
	stageData
)

// queued is the success reply of DATA, naming the message so the client can look it up.
func queued(id string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: "Ok: queued as " + id}
}

// replyFor is the one table from ports codes to SMTP replies (RFC 5321 §4.2.1 classes, RFC 3463 enhanced
// codes); the package documentation explains each row. The human part is the core's SPEC §7 message (with
// schema violations appended), except for internal errors, which say nothing about their cause.
func replyFor(err error, st stage) *smtp.SMTPError {
	pe, ok := ports.AsError(err)
	if !ok {
		pe = &ports.Error{Code: ports.CodeInternal}
	}
	reply := func(code int, class, subject, detail int, msg string) *smtp.SMTPError {
		return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{class, subject, detail}, Message: smtpd.ReplyText(msg)}
	}
	switch pe.Code {
	case ports.CodeUnauthenticated:
		return errAuthFailed
	case ports.CodeInvalidArgument, ports.CodePermissionDenied, ports.CodeNotFound, ports.CodeAlreadyExists,
		ports.CodeFailedPrecondition:
		return reply(550, 5, 7, 1, pe.Describe())
	case ports.CodePaymentRequired:
		return reply(550, 5, 7, 0, pe.Describe())
	case ports.CodeResourceExhausted:
		msg := pe.Describe()
		if pe.RetryAfterSeconds > 0 {
			msg += " (retry after " + strconv.Itoa(pe.RetryAfterSeconds) + " seconds)"
		}
		return reply(451, 4, 7, 0, msg)
	}
	if st == stageAuth {
		return reply(454, 4, 7, 0, "Temporary authentication failure")
	}
	return reply(451, 4, 3, 0, "Temporary local problem, try again later")
}
