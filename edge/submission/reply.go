package submission

import (
	"strconv"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/ports"
)

// stage tells replyFor which command the error answers: AUTH has its own temporary-failure reply.
type stage int

const (
	stageAuth stage = iota
	stageData
)

// maxReplyText keeps a reply line within RFC 5321 §4.5.3.1.5's 512 octets with room for the codes.
const maxReplyText = 400

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
		return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{class, subject, detail}, Message: replyText(msg)}
	}
	switch pe.Code {
	case ports.CodeUnauthenticated:
		return errAuthFailed
	case ports.CodeInvalidArgument, ports.CodePermissionDenied, ports.CodeNotFound, ports.CodeAlreadyExists,
		ports.CodeFailedPrecondition:
		return reply(550, 5, 7, 1, describe(pe))
	case ports.CodePaymentRequired:
		return reply(550, 5, 7, 0, describe(pe))
	case ports.CodeResourceExhausted:
		msg := describe(pe)
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

// describe is the message with its field violations, e.g. "Validation failed (from: exactly one address)".
func describe(pe *ports.Error) string {
	msg := pe.Message
	if msg == "" {
		msg = string(pe.Code)
	}
	if len(pe.Details) == 0 {
		return msg
	}
	parts := make([]string, 0, len(pe.Details))
	for _, d := range pe.Details {
		if d.Path == "" {
			parts = append(parts, d.Message)
			continue
		}
		parts = append(parts, d.Path+": "+d.Message)
	}
	return msg + " (" + strings.Join(parts, "; ") + ")"
}

// replyText makes a message safe for one reply line: printable US-ASCII (RFC 5321 §4.2), no line breaks,
// bounded length.
func replyText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxReplyText {
			b.WriteString("...")
			break
		}
		switch {
		case r == '\r' || r == '\n' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f:
		case r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
