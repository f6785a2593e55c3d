package deliverability

import (
	"context"
	"fmt"
	"strings"

	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/ports"
)

// AcceptsRecipient implements ports.FeedbackService. It answers from the address alone (no store lookup), so
// the MX listener can refuse mail for anything else at RCPT time, before it reads a message: a VERP address
// whose MAC checks, at whatever domain (each sending domain's bounce.<domain> points at Postmill),
// or the feedback-loop mailbox.
func (s *Service) AcceptsRecipient(_ context.Context, rcpt string) (bool, error) {
	addr := bareAddress(rcpt)
	if addr == "" {
		return false, nil
	}
	if s.cfg.FeedbackAddress != "" && addr == s.cfg.FeedbackAddress {
		return true, nil
	}
	_, ok := s.decodeVERP(addr)
	return ok, nil
}

// verp is what a Postmill return path names.
type verp struct {
	kind byte // sending.VERPRecipient or sending.VERPMessage
	id   string
}

// decodeVERP reads a bare VERP return path (local@domain, any domain) made with the Service's key.
func (s *Service) decodeVERP(addr string) (verp, bool) {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 {
		return verp{}, false
	}
	kind, id, ok := sending.DecodeVERPKeys(s.verpKeys, addr[:at])
	if !ok {
		return verp{}, false
	}
	return verp{kind: kind, id: id}, true
}

// bareAddress lower-cases an envelope or header address and drops surrounding space, angle brackets and an
// RFC 3464 §2.3.2 address-type prefix ("rfc822;"), so that addresses from reports compare with the ones
// Postmill sent to.
func bareAddress(s string) string {
	s = strings.TrimSpace(s)
	if typ, rest, ok := strings.Cut(s, ";"); ok && strings.EqualFold(strings.TrimSpace(typ), "rfc822") {
		s = strings.TrimSpace(rest)
	}
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">"))
	return strings.ToLower(s)
}

// errNoVERP is the invalid_argument of a report whose return path is not one Postmill made.
func errNoVERP(what string) error {
	return ports.Errorf(ports.CodeInvalidArgument, "%s is not addressed to a Postmill return path", what)
}

// unmapped turns a store's not_found (the recipient or message the VERP token names is gone, for example
// deleted with its organization) into the invalid_argument the FeedbackService promises: to the sender of
// the report the address simply names nothing Postmill knows.
func unmapped(what string, err error) error {
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.Errorf(ports.CodeInvalidArgument, "%s names no message Postmill sent", what)
	}
	return fmt.Errorf("deliverability: %s: %w", what, err)
}

// errNoRecipient is the invalid_argument of a report that maps to a message but to none of its recipients.
func errNoRecipient(what string) error {
	return ports.Errorf(ports.CodeInvalidArgument, "%s names no recipient of the message", what)
}
