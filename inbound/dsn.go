package inbound

import (
	"strings"

	"github.com/postmill/postmill/ports"
)

// parseDSN reads a delivery status notification: the message/delivery-status part of RFC 3464 §2 (or
// RFC 6533 §6.2's message/global-delivery-status, which differs only in allowing UTF-8), whose body is a
// group of per-message fields followed by one group of per-recipient fields for each recipient, groups
// separated by blank lines (§2.1). Field names compare case-insensitively, lines may be folded and end in
// CRLF or LF. A group is a recipient's when it has a Final-Recipient or Original-Recipient field, so a
// generator that forgets the blank line after the per-message fields still yields its recipient.
//
// The Message-ID of the bounced message comes from the returned message or its header (the third part,
// RFC 3462 §2: message/rfc822, text/rfc822-headers, or RFC 6533's message/global and
// message/global-headers), else from the X-Original-Message-ID per-message field some providers add.
func parseDSN(mp *mimeParts) (ports.BounceReport, error) {
	var (
		r        ports.BounceReport
		altMsgID string
	)
	for _, g := range readFieldGroups(mp.deliveryStatus) {
		if r.ReportingMTA == "" {
			if v := g.get("Reporting-MTA"); v != "" {
				r.ReportingMTA = mtaName(v)
			}
		}
		if altMsgID == "" {
			altMsgID = messageID(g.get("X-Original-Message-ID"))
		}
		final, orig := g.get("Final-Recipient"), g.get("Original-Recipient")
		if final == "" && orig == "" {
			continue // the per-message group (RFC 3464 §2.2), or an empty one
		}
		if len(r.Recipients) >= maxReportRecipients {
			break
		}
		rc := ports.DSNRecipient{
			FinalRecipient:    typedAddress(final),
			OriginalRecipient: typedAddress(orig),
			Action:            firstWordLower(g.get("Action")),
			Status:            statusCode(g.get("Status")),
			DiagnosticCode:    collapseSpace(g.get("Diagnostic-Code")),
			RemoteMTA:         mtaName(g.get("Remote-MTA")),
		}
		if rc.FinalRecipient == "" {
			// RFC 3464 §2.3.2 makes Final-Recipient required; without it the original recipient is the best
			// name the report gives.
			rc.FinalRecipient = rc.OriginalRecipient
		}
		if rc.FinalRecipient == "" {
			continue
		}
		r.Recipients = append(r.Recipients, rc)
	}
	if len(r.Recipients) == 0 {
		return ports.BounceReport{}, ports.Errorf(ports.CodeInvalidArgument,
			"delivery status notification names no recipient (RFC 3464 section 2.3)")
	}
	r.OriginalMessageID = returnedMessageID(mp)
	if r.OriginalMessageID == "" {
		r.OriginalMessageID = altMsgID
	}
	return r, nil
}

// returnedMessageID is the Message-ID of the returned original: from its MIME part, else from the copy a
// plain-text part carries after a marker line.
func returnedMessageID(mp *mimeParts) string {
	if mp.hasReturned {
		if id := messageID(mp.returned.get("Message-ID")); id != "" {
			return id
		}
	}
	if mp.text != nil {
		if _, hdr, ok := splitAtReturned(mp.text); ok {
			return messageID(hdr.get("Message-ID"))
		}
	}
	return ""
}

// firstWordLower is an Action value (RFC 3464 §2.3.3) lower-cased, without a comment after it.
func firstWordLower(v string) string {
	if f := strings.Fields(v); len(f) > 0 {
		return clean(strings.ToLower(f[0]))
	}
	return ""
}

// collapseSpace joins the words of an unfolded value with single spaces, so a diagnostic folded over
// several indented lines reads as the one line the remote server sent.
func collapseSpace(v string) string {
	return clean(strings.Join(strings.Fields(v), " "))
}
