package inbound

import (
	"mime"
	"regexp"
	"strings"

	"github.com/postmill/postmill/ports"
)

// Non-standard bounces are plain-text notices without a message/delivery-status part. Three recognisers
// read them, tried in this order on the first text/plain part (the whole body of a single-part message),
// up to the line that starts the returned original (see returnedPrefixMarkers):
//
//   - qmail: the text contains "This is the qmail-send program at HOST" and at least one block that
//     starts with a line "<address>:" followed by the reason lines. qmail sends these only when it has
//     given up, so every address is Action failed; Status is the code qmail appends ("(#5.1.1)"), else the
//     class of the remote reply ("Remote host said: 550 ..." gives 5.0.0), else 5.0.0.
//   - Exim: the text contains "This message was created automatically by mail delivery software" and,
//     after a line introducing the addresses ("The following address(es) failed:", "...has not yet been
//     delivered..."), blocks of a two-space-indented address line followed by deeper-indented reason
//     lines. A text saying "has not yet been delivered" is a delay warning (Action delayed, default
//     status 4.0.0); otherwise Action failed (default 5.0.0). Status is the first RFC 3463 code of the
//     reason, else the class of its SMTP reply code.
//   - generic: the message comes from a mail system (the From address is MAILER-DAEMON or postmaster, or
//     the envelope sender is null, RFC 5321 §4.5.5, and the Subject reads like a bounce: "Undelivered",
//     "Delivery Status Notification", "Returned mail", "failure notice", ...) and a line of the text holds
//     an RFC 3463 status code of class 4 or 5, or an SMTP reply code of class 4 or 5 at the start of the
//     line, after a colon or after "<<<" (a transcript). The address is the first one on that line, else
//     on the nearest of the three lines above it within its paragraph; the envelope recipients, the
//     sender and mail-system mailboxes are never taken. Status is the enhanced code, else the reply
//     code's class (5.0.0 or 4.0.0); Action is delayed when the text speaks of a delay ("not yet been
//     delivered", "will retry", "delayed"), else failed.
//
// Anything else (an auto-reply from a person, a reply, a notice in HTML only) is not a bounce.
func parseNonStandard(mp *mimeParts, env envelope) (ports.BounceReport, string, bool) {
	if len(mp.text) == 0 {
		return ports.BounceReport{}, "", false
	}
	diag, _, _ := splitAtReturned(mp.text)
	lines := textLines(diag)
	type recogniser struct {
		format string
		parse  func(mp *mimeParts, lines []string, env envelope) (ports.BounceReport, bool)
	}
	for _, r := range []recogniser{{formatQmail, parseQmail}, {formatExim, parseExim}, {formatGeneric, parseGeneric}} {
		if b, ok := r.parse(mp, lines, env); ok {
			b.OriginalMessageID = returnedMessageID(mp)
			return b, r.format, true
		}
	}
	return ports.BounceReport{}, "", false
}

// textLines splits a text into lines without their endings.
func textLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		lines = append(lines, string(line))
	}
	return lines
}

var (
	qmailIntroRe   = regexp.MustCompile(`(?i)this is the qmail-send program at ([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9])`)
	qmailAddrRe    = regexp.MustCompile(`^<([^<>\s]+@[^<>\s]+)>:\s*$`)
	qmailRemoteRe  = regexp.MustCompile(`^(?:(\S+) does not like recipient\.|Giving up on (\S+?)\.?$|Connected to (\S+) but)`)
	remoteSaidRe   = regexp.MustCompile(`(?i)(?:said|replied|response|returned was|error)\s*:\s*([45][0-5][0-9])(?:[ -]|$)`)
	replyCodeRe    = regexp.MustCompile(`(?:^|:|<<<)\s*([45][0-5][0-9])(?:[ -]|$)`)
	eximIntroRe    = regexp.MustCompile(`(?i)this message was created automatically by mail delivery software`)
	eximHostRe     = regexp.MustCompile(`host ([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]) \[`)
	eximQueueOnRe  = regexp.MustCompile(`(?i)on the queue on ([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9])`)
	eximGenerated  = regexp.MustCompile(`\(generated from ([^()\s]+@[^()\s]+)\)`)
	delayWordingRe = regexp.MustCompile(`(?i)not yet been delivered|will (?:continue to )?(?:retry|try again)|will be retried|still trying|delivery (?:has been |is )?delayed|delayed delivery`)
	bounceSubjRe   = regexp.MustCompile(`(?i)undeliver|delivery status notification|delivery (?:has )?failed|delivery failure|delivery problem|delivery incomplete|returned mail|failure notice|mail delivery (?:failed|failure|system|subsystem)|non-?delivery|could not be delivered|not delivered`)
)

// parseQmail reads qmail-send's bounce (qmail-send.c's "Hi. This is the qmail-send program" notice).
func parseQmail(mp *mimeParts, lines []string, _ envelope) (ports.BounceReport, bool) {
	var r ports.BounceReport
	for _, l := range lines {
		if m := qmailIntroRe.FindStringSubmatch(l); m != nil {
			r.ReportingMTA = clean(m[1])
			break
		}
	}
	if r.ReportingMTA == "" {
		return r, false
	}
	for i := 0; i < len(lines) && len(r.Recipients) < maxReportRecipients; i++ {
		m := qmailAddrRe.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		var reason []string
		rc := ports.DSNRecipient{FinalRecipient: clean(m[1]), Action: "failed"}
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !qmailAddrRe.MatchString(strings.TrimSpace(lines[i+1])) {
			i++
			l := strings.TrimSpace(lines[i])
			reason = append(reason, l)
			if rm := qmailRemoteRe.FindStringSubmatch(l); rm != nil && rc.RemoteMTA == "" {
				rc.RemoteMTA = clean(strings.TrimSuffix(rm[1]+rm[2]+rm[3], "."))
			}
		}
		rc.DiagnosticCode = collapseSpace(strings.Join(reason, " "))
		rc.Status = statusFromText(rc.DiagnosticCode, "5.0.0")
		r.Recipients = append(r.Recipients, rc)
	}
	return r, len(r.Recipients) > 0
}

// statusFromText is the first RFC 3463 code in a reason text, else the class of its SMTP reply code
// (RFC 3463 §3.1 classes match RFC 5321 §4.2.1's first digit), else def.
func statusFromText(s, def string) string {
	if c := findEnhancedCode(s); c != "" {
		return c
	}
	if m := remoteSaidRe.FindStringSubmatch(s); m != nil {
		return m[1][:1] + ".0.0"
	}
	if m := replyCodeRe.FindStringSubmatch(s); m != nil {
		return m[1][:1] + ".0.0"
	}
	return def
}

// parseExim reads Exim's plain-text bounce and delay warning (Exim's "Mail delivery failed: returning
// message to sender" and "Warning: message ... delayed" notices without a delivery-status part).
func parseExim(mp *mimeParts, lines []string, _ envelope) (ports.BounceReport, bool) {
	var r ports.BounceReport
	intro := -1
	for i, l := range lines {
		if eximIntroRe.MatchString(l) {
			intro = i
			break
		}
	}
	if intro < 0 {
		return r, false
	}
	delayed := delayWordingRe.MatchString(strings.Join(lines[intro:min(len(lines), intro+12)], " "))
	action, def := "failed", "5.0.0"
	if delayed {
		action, def = "delayed", "4.0.0"
	}
	// The addresses follow the first line after the introduction that ends in a colon and speaks of
	// addresses ("The following address(es) failed:", "The address to which the message has not yet
	// been delivered is:").
	start := -1
	for i := intro + 1; i < len(lines); i++ {
		l := strings.ToLower(strings.TrimSpace(lines[i]))
		if strings.HasSuffix(l, ":") && strings.Contains(l, "address") {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return r, false
	}
	for i := start; i < len(lines) && len(r.Recipients) < maxReportRecipients; i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" {
			continue
		}
		if indent(line) == 0 {
			break // the text after the address blocks
		}
		if indent(line) > 3 {
			continue // reason lines of a block whose address line was not an address (a pipe, a file)
		}
		addr := addrRe.FindString(strings.TrimSuffix(strings.TrimSpace(line), ":"))
		var reason []string
		for i+1 < len(lines) && indent(lines[i+1]) > 3 {
			i++
			reason = append(reason, strings.TrimSpace(lines[i]))
		}
		if addr == "" {
			continue
		}
		rc := ports.DSNRecipient{FinalRecipient: clean(addr), Action: action}
		text := strings.Join(reason, " ")
		if m := eximGenerated.FindStringSubmatchIndex(text); m != nil {
			rc.OriginalRecipient = clean(text[m[2]:m[3]])
			text = strings.TrimSpace(text[:m[0]] + text[m[1]:])
		}
		if m := eximHostRe.FindStringSubmatch(text); m != nil {
			rc.RemoteMTA = clean(m[1])
		}
		rc.DiagnosticCode = collapseSpace(text)
		rc.Status = statusFromText(rc.DiagnosticCode, def)
		r.Recipients = append(r.Recipients, rc)
	}
	if len(r.Recipients) == 0 {
		return r, false
	}
	for _, l := range lines[intro:] {
		if m := eximQueueOnRe.FindStringSubmatch(l); m != nil {
			r.ReportingMTA = clean(strings.TrimSuffix(m[1], "."))
			break
		}
	}
	if r.ReportingMTA == "" {
		r.ReportingMTA = mailSystemHost(mp)
	}
	return r, true
}

// indent counts the leading white space of a line, a tab counting as eight.
func indent(line string) int {
	n := 0
	for _, c := range line {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 8
		default:
			return n
		}
	}
	return n
}

// mailSystemHost is the domain of the From address when a mail system (MAILER-DAEMON, postmaster) sent
// the message: the reporting host of a plain-text bounce, as far as the message says.
func mailSystemHost(mp *mimeParts) string {
	if from := mp.fromAddress(); from != "" && isMailSystemAddress(from) {
		return clean(domainPart(from))
	}
	return ""
}

// parseGeneric reads a bounce of an unknown MTA by the rule in parseNonStandard's documentation.
func parseGeneric(mp *mimeParts, lines []string, env envelope) (ports.BounceReport, bool) {
	from := mp.fromAddress()
	subject, err := new(mime.WordDecoder).DecodeHeader(mp.header.get("Subject"))
	if err != nil {
		subject = mp.header.get("Subject")
	}
	fromSystem := from != "" && isMailSystemAddress(from)
	if !fromSystem && !(env.from == "" && bounceSubjRe.MatchString(subject)) {
		return ports.BounceReport{}, false
	}
	excluded := func(a string) bool {
		if isMailSystemAddress(a) || strings.EqualFold(a, from) || strings.EqualFold(a, env.from) {
			return true
		}
		for _, r := range env.rcpts {
			if strings.EqualFold(a, r) {
				return true
			}
		}
		return false
	}
	firstAddr := func(l string) string {
		for _, a := range addrRe.FindAllString(l, 16) {
			if !excluded(a) {
				return a
			}
		}
		return ""
	}
	delayed := delayWordingRe.MatchString(strings.Join(lines, " "))
	r := ports.BounceReport{ReportingMTA: mailSystemHost(mp)}
	seen := map[string]bool{}
	for i, l := range lines {
		if len(r.Recipients) >= maxReportRecipients {
			break
		}
		status := findEnhancedCode(l)
		if status == "" {
			if m := replyCodeRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				status = m[1][:1] + ".0.0"
			}
		}
		if status == "" {
			continue
		}
		addr := firstAddr(l)
		for j := i - 1; addr == "" && j >= 0 && j >= i-3; j-- {
			if strings.TrimSpace(lines[j]) == "" {
				break
			}
			addr = firstAddr(lines[j])
		}
		if addr == "" || seen[strings.ToLower(addr)] {
			continue
		}
		seen[strings.ToLower(addr)] = true
		action := "failed"
		if delayed {
			action = "delayed"
		}
		r.Recipients = append(r.Recipients, ports.DSNRecipient{
			FinalRecipient: clean(addr),
			Action:         action,
			Status:         status,
			DiagnosticCode: collapseSpace(l),
		})
	}
	return r, len(r.Recipients) > 0
}
