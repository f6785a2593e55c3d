package inbound

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parsing limits. Reports arrive from anyone who can reach the MX, so every loop and every kept string is
// bounded whatever the input says; the message itself is already bounded by Config.MaxMessageBytes.
const (
	// maxReportRecipients caps the recipients taken from one report; a bounce of one Postmill delivery
	// names at most the recipients of one SMTP transaction.
	maxReportRecipients = 1000
	// maxFieldGroups caps the field groups of a delivery-status part: the per-message group and one per
	// recipient (RFC 3464 §2.1), with room for groups that name no recipient.
	maxFieldGroups = maxReportRecipients + 16
	// maxFieldsPerBlock caps the fields of one header block or field group.
	maxFieldsPerBlock = 1000
	// maxValueBytes bounds each string put into a report: RFC 5322 §2.1.1's 998-octet line is the longest
	// value a conforming generator writes on one line, and folded diagnostics are cut to a little more.
	maxValueBytes = 1000
	// maxPartBytes bounds what is read from one MIME part (a delivery-status or feedback-report part is a
	// few hundred octets; a returned message is only read for its header).
	maxPartBytes = 1 << 20
	// maxTextScan bounds how much of a human-readable bounce text the non-standard recognisers read.
	maxTextScan = 256 << 10
	// maxMIMEDepth and maxMIMEParts bound the walk through nested multiparts.
	maxMIMEDepth = 8
	maxMIMEParts = 200
)

// field is one header field or delivery-status field: the name as written and the unfolded value
// (RFC 5322 §2.2.3) with surrounding white space removed.
type field struct {
	name  string
	value string
}

// fieldBlock is an ordered list of fields whose names compare case-insensitively (RFC 5322 §1.2.2,
// RFC 3464 §2.1).
type fieldBlock []field

// get returns the first value of the field called name, or "".
func (b fieldBlock) get(name string) string {
	for _, f := range b {
		if strings.EqualFold(f.name, name) {
			return f.value
		}
	}
	return ""
}

// all returns every value of the field called name, at most limit of them.
func (b fieldBlock) all(name string, limit int) []string {
	var out []string
	for _, f := range b {
		if len(out) >= limit {
			break
		}
		if strings.EqualFold(f.name, name) {
			out = append(out, f.value)
		}
	}
	return out
}

// nextLine returns the line at the start of b without its line ending (LF or CRLF) and what follows it.
func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	return bytes.TrimSuffix(line, []byte{'\r'}), rest
}

// isBlank reports whether a line holds only white space: the separator of header blocks and field groups.
func isBlank(line []byte) bool { return len(bytes.Trim(line, " \t\r")) == 0 }

// readFields reads one block of "Name: value" lines up to the next blank line (or the end) and returns it
// with what follows the blank line. Continuation lines (starting with white space, RFC 5322 §2.2.3) are
// unfolded into the previous field. It is lenient where generators are sloppy: a line without a colon, or
// a continuation with nothing to continue, is skipped rather than ending the block.
func readFields(b []byte) (fieldBlock, []byte) {
	var (
		block fieldBlock
		cur   *strings.Builder
		name  string
	)
	flush := func() {
		if cur != nil && len(block) < maxFieldsPerBlock {
			block = append(block, field{name: name, value: strings.TrimSpace(cur.String())})
		}
		cur = nil
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		if isBlank(line) {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if cur != nil {
				writeBounded(cur, line)
			}
			continue
		}
		flush()
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validFieldName(line[:colon]) {
			continue
		}
		name = string(bytes.TrimRight(line[:colon], " \t"))
		cur = &strings.Builder{}
		writeBounded(cur, line[colon+1:])
	}
	flush()
	return block, b
}

// maxUnfoldedBytes bounds an unfolded field value while it is read; clean cuts it further once the white
// space of the folds is gone.
const maxUnfoldedBytes = 4 * maxValueBytes

// writeBounded appends p to b up to maxUnfoldedBytes in all.
func writeBounded(b *strings.Builder, p []byte) {
	if room := maxUnfoldedBytes - b.Len(); room > 0 {
		b.Write(p[:min(len(p), room)])
	}
}

// validFieldName accepts RFC 5322 §3.6.8 field names (printable US-ASCII but colon), allowing the
// trailing white space some generators put before the colon.
func validFieldName(name []byte) bool {
	name = bytes.TrimRight(name, " \t")
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		if c < 33 || c > 126 {
			return false
		}
	}
	return true
}

// readFieldGroups splits a delivery-status body (RFC 3464 §2.1) into its field groups: blocks separated
// by one or more blank lines. Leading blank lines are skipped.
func readFieldGroups(b []byte) []fieldBlock {
	var groups []fieldBlock
	for len(groups) < maxFieldGroups {
		for len(b) > 0 {
			line, rest := nextLine(b)
			if !isBlank(line) {
				break
			}
			b = rest
		}
		if len(b) == 0 {
			break
		}
		var g fieldBlock
		g, b = readFields(b)
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}

// stripTypedValue removes the type of an RFC 3464 typed value ("rfc822; a@b", "dns; mx.example",
// "smtp; 550 ...") and returns the type (lower-cased) and the value. Values without a type return "".
func stripTypedValue(v string) (typ, value string) {
	t, rest, ok := strings.Cut(v, ";")
	if !ok || !isAtom(strings.TrimSpace(t)) {
		return "", strings.TrimSpace(v)
	}
	return strings.ToLower(strings.TrimSpace(t)), strings.TrimSpace(rest)
}

// isAtom reports whether s looks like an address or MTA type: letters, digits and hyphens.
func isAtom(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// typedAddress turns an RFC 3464 §2.3.1/§2.3.2 recipient field ("rfc822; <a@b>") into the bare address.
// RFC 6533 §3 "utf-8" addresses may carry \x{HEX} escapes of non-ASCII characters in a message/
// delivery-status part; they are decoded.
func typedAddress(v string) string {
	typ, addr := stripTypedValue(v)
	addr = stripAngle(addr)
	if typ == "utf-8" {
		addr = decodeUTF8AddrXtext(addr)
	}
	return clean(addr)
}

// mtaName turns a Reporting-MTA or Remote-MTA field (RFC 3464 §2.2.2, §2.3.5) into the host name: the
// "dns;" type every MTA writes is removed, and so are a trailing comment ("(192.0.2.1, the server for
// the domain ...)") and the root dot. Any other type is kept as written.
func mtaName(v string) string {
	typ, name := stripTypedValue(v)
	if typ != "" && typ != "dns" {
		return clean(typ + "; " + name)
	}
	if i := strings.IndexByte(name, '('); i > 0 {
		name = strings.TrimSpace(name[:i])
	}
	return clean(strings.TrimSuffix(name, "."))
}

// stripAngle trims white space and one pair of angle brackets around an address.
func stripAngle(v string) string {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "<") {
		if end := strings.IndexByte(v, '>'); end > 0 {
			v = v[1:end]
		} else {
			v = v[1:]
		}
	}
	return strings.TrimSpace(strings.TrimSuffix(v, ">"))
}

// messageID returns a Message-ID (RFC 5322 §3.6.4) without its angle brackets. Identifiers written
// without brackets (some feedback generators do) are taken up to the first white space.
func messageID(v string) string {
	v = strings.TrimSpace(v)
	if start := strings.IndexByte(v, '<'); start >= 0 {
		if end := strings.IndexByte(v[start:], '>'); end > 0 {
			return clean(strings.TrimSpace(v[start+1 : start+end]))
		}
	}
	if f := strings.Fields(v); len(f) > 0 {
		return clean(strings.Trim(f[0], "<>"))
	}
	return ""
}

// decodeUTF8AddrXtext decodes RFC 6533 §3's utf-8-addr-xtext escapes (\x{HEX}, one to six hex digits
// naming a Unicode code point). Malformed escapes are left as written.
func decodeUTF8AddrXtext(s string) string {
	if !strings.Contains(s, `\x{`) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, `\x{`)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		end := strings.IndexByte(s, '}')
		if end > 3 && end <= 9 {
			if cp, err := strconv.ParseUint(s[3:end], 16, 32); err == nil && utf8.ValidRune(rune(cp)) {
				b.WriteRune(rune(cp))
				s = s[end+1:]
				continue
			}
		}
		b.WriteString(`\x{`)
		s = s[3:]
	}
}

// clean makes s safe to store: invalid UTF-8 (a Latin-1 bounce text, a hostile report) becomes U+FFFD,
// control characters (NUL above all, which PostgreSQL text refuses) become spaces, and the result is cut
// to maxValueBytes without splitting a UTF-8 sequence, so a report cannot push megabytes into one column
// nor make the core fail on every retry.
func clean(s string) string {
	if len(s) > 4*maxValueBytes {
		s = s[:4*maxValueBytes]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxValueBytes {
		return s
	}
	cut := maxValueBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// enhancedCodeRe finds RFC 3463 §2 status codes: class.subject.detail with a 1-3 digit subject and detail.
var enhancedCodeRe = regexp.MustCompile(`[245]\.[0-9]{1,3}\.[0-9]{1,3}`)

// findEnhancedCode returns the first RFC 3463 status code of class 4 or 5 in s that stands on its own (not
// part of a longer dotted number such as a version or an address), or "".
func findEnhancedCode(s string) string {
	for _, m := range enhancedCodeRe.FindAllStringIndex(s, 16) {
		start, end := m[0], m[1]
		if s[start] == '2' {
			continue
		}
		if start > 0 && (isDigit(s[start-1]) || s[start-1] == '.') {
			continue
		}
		if end < len(s) && (isDigit(s[end]) || s[end] == '.' && end+1 < len(s) && isDigit(s[end+1])) {
			continue
		}
		return s[start:end]
	}
	return ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// statusCode normalises a Status field (RFC 3464 §2.3.4): the first status code in it, without the
// comment some MTAs append ("5.0.0 (permanent failure)"). A field without a code gives "".
func statusCode(v string) string {
	v = strings.TrimSpace(v)
	m := enhancedCodeRe.FindStringIndex(v)
	if m == nil {
		return ""
	}
	start, end := m[0], m[1]
	if start > 0 && (isDigit(v[start-1]) || v[start-1] == '.') || end < len(v) && isDigit(v[end]) {
		return ""
	}
	return v[start:end]
}

// addrRe finds something shaped like an addr-spec in free text: a local part and a dotted domain ending
// in a letter or digit. It does not validate; the core decides whether an address means anything.
var addrRe = regexp.MustCompile(`[A-Za-z0-9!#$%&'*+/=?^_{|}~.-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+`)

// localPart returns the part of an address before the last "@", lower-cased.
func localPart(addr string) string {
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		return strings.ToLower(addr[:at])
	}
	return strings.ToLower(addr)
}

// domainPart returns the part of an address after the last "@".
func domainPart(addr string) string {
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		return addr[at+1:]
	}
	return ""
}

// isMailSystemAddress reports whether addr is a mail system's own mailbox (RFC 5321 §4.5.1 postmaster,
// and the MAILER-DAEMON convention bounces are sent from).
func isMailSystemAddress(addr string) bool {
	switch localPart(addr) {
	case "postmaster", "mailer-daemon", "mailerdaemon", "mail-daemon":
		return true
	}
	return false
}
