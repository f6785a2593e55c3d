package inbound

import (
	"net/mail"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// parseARF reads a feedback report (RFC 5965): the machine-readable message/feedback-report part (§3.1,
// fields in the header syntax of RFC 5322) and the returned message or its header (§2 item d). Fields
// taken: Feedback-Type (required, lower-cased), User-Agent, Original-Mail-From, Original-Rcpt-To (may
// repeat), Arrival-Date (RFC 5322 date; older generators call it Received-Date), the first
// Reported-Domain and Source-IP. When the report redacts or omits Original-Mail-From, the returned
// message's Return-Path (which holds the VERP return path Postmill sent with) stands in; when it omits
// Original-Rcpt-To, the returned message's To addresses do.
func parseARF(mp *mimeParts) (ports.ComplaintReport, error) {
	var fields fieldBlock
	for _, g := range readFieldGroups(mp.feedback) {
		fields = append(fields, g...)
		if len(fields) >= maxFieldsPerBlock {
			break
		}
	}
	c := ports.ComplaintReport{
		FeedbackType:   firstWordLower(fields.get("Feedback-Type")),
		UserAgent:      clean(fields.get("User-Agent")),
		ReportedDomain: clean(strings.TrimSpace(fields.get("Reported-Domain"))),
		SourceIP:       clean(strings.TrimSpace(fields.get("Source-IP"))),
	}
	if c.FeedbackType == "" {
		return ports.ComplaintReport{}, ports.Errorf(ports.CodeInvalidArgument,
			"feedback report has no Feedback-Type field (RFC 5965 section 3.1)")
	}
	c.OriginalMailFrom = clean(stripAngle(fields.get("Original-Mail-From")))
	if c.OriginalMailFrom == "" && mp.hasReturned {
		c.OriginalMailFrom = clean(stripAngle(mp.returned.get("Return-Path")))
	}
	for _, v := range fields.all("Original-Rcpt-To", maxReportRecipients) {
		if a := clean(stripAngle(v)); a != "" {
			c.OriginalRcptTo = append(c.OriginalRcptTo, a)
		}
	}
	if len(c.OriginalRcptTo) == 0 && mp.hasReturned {
		c.OriginalRcptTo = headerAddresses(mp.returned.get("To"))
	}
	date := fields.get("Arrival-Date")
	if date == "" {
		date = fields.get("Received-Date")
	}
	c.ArrivalDate = parseDate(date)
	if mp.hasReturned {
		c.OriginalMessageID = messageID(mp.returned.get("Message-ID"))
	}
	return c, nil
}

// headerAddresses returns the addresses of an address-list header field (RFC 5322 §3.4): parsed
// properly when it parses, else whatever looks like an addr-spec (providers rewrite or redact these
// headers, not always into valid syntax).
func headerAddresses(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	var out []string
	if list, err := mail.ParseAddressList(v); err == nil {
		for _, a := range list {
			if len(out) >= maxReportRecipients {
				break
			}
			out = append(out, clean(a.Address))
		}
		return out
	}
	for _, a := range addrRe.FindAllString(v, maxReportRecipients) {
		out = append(out, clean(a))
	}
	return out
}

// parseDate reads an RFC 5322 §3.3 date, also with the trailing "(UTC)"-style comment many MTAs write
// and with the obsolete zone names of §4.3 (EST, PDT, ...), which Go's parser would otherwise read as
// UTC. It is nil when the date does not parse: the date is informative, never a reason to refuse a report.
func parseDate(v string) *time.Time {
	v = strings.TrimSpace(v)
	if i := strings.LastIndexByte(v, '('); i > 0 && strings.HasSuffix(v, ")") {
		v = strings.TrimSpace(v[:i])
	}
	if v == "" {
		return nil
	}
	if sp := strings.LastIndexByte(v, ' '); sp > 0 {
		if off, ok := obsZones[strings.ToUpper(v[sp+1:])]; ok {
			v = v[:sp+1] + off
		}
	}
	t, err := mail.ParseDate(v)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

// obsZones are RFC 5322 §4.3's obsolete zone names and their offsets.
var obsZones = map[string]string{
	"UT": "+0000", "GMT": "+0000",
	"EST": "-0500", "EDT": "-0400",
	"CST": "-0600", "CDT": "-0500",
	"MST": "-0700", "MDT": "-0600",
	"PST": "-0800", "PDT": "-0700",
}
