package inbound

import (
	"bytes"
	"io"
	"slices"
	"strings"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"

	"github.com/postmill/postmill/ports"
)

// reportKind says what a message that arrived at a return path or feedback address is.
type reportKind int

const (
	// kindNone is mail that reports nothing about a delivery: an auto-reply (RFC 3834), a read receipt, a
	// reply by a person. It is accepted and dropped so that it never bounces back.
	kindNone reportKind = iota
	// kindBounce is a delivery status notification (RFC 3464) or a recognised non-standard bounce.
	kindBounce
	// kindComplaint is a feedback report (RFC 5965).
	kindComplaint
)

// Report formats, named in logs so an operator can tell which recogniser read a message.
const (
	formatDSN       = "dsn"        // RFC 3464 message/delivery-status
	formatGlobalDSN = "global-dsn" // RFC 6533 message/global-delivery-status
	formatARF       = "arf"        // RFC 5965 message/feedback-report
	formatQmail     = "qmail"      // qmail-send's plain-text bounce
	formatExim      = "exim"       // Exim's plain-text bounce or delay warning
	formatGeneric   = "generic"    // a mailer-daemon text with an address and an SMTP reply
)

// envelope is what the SMTP transaction said about a message: the reverse path ("" for the null path
// <>, RFC 5321 §4.5.5) and the accepted recipients.
type envelope struct {
	from  string
	rcpts []string
}

// report is a parsed message. Rcpt and ArrivedAt of the bounce or complaint are left for the caller, which
// sends one copy per envelope recipient.
type report struct {
	kind      reportKind
	format    string
	bounce    ports.BounceReport
	complaint ports.ComplaintReport
}

// mimeParts is what the walk through a message found: the first part of each kind a report is built from.
type mimeParts struct {
	header         fieldBlock // the message's own header
	reportType     string     // report-type of a top-level multipart/report (RFC 6522 §3), lower-cased
	deliveryStatus []byte
	globalStatus   bool // the delivery-status part is RFC 6533 message/global-delivery-status
	feedback       []byte
	returned       fieldBlock // header of the returned message (message/rfc822, text/rfc822-headers, ...)
	hasReturned    bool
	text           []byte // the first text/plain part, decoded
	parts          int
}

// parseReport reads a message that arrived at the MX listener and says what it reports. A message that
// claims to be a report (a multipart/report of a delivery-status or feedback-report type, or a part of
// those types) but cannot be read as one is an invalid_argument error; anything else that is no report is
// kindNone. The function is pure and bounded: see the limits in fields.go.
func parseReport(raw []byte, env envelope) (report, error) {
	mp, err := walkMessage(raw)
	if err != nil {
		return report{}, err
	}
	switch {
	case mp.feedback != nil:
		c, err := parseARF(mp)
		if err != nil {
			return report{}, err
		}
		return report{kind: kindComplaint, format: formatARF, complaint: c}, nil
	case mp.reportType == "feedback-report":
		return report{}, ports.Errorf(ports.CodeInvalidArgument,
			"feedback report has no message/feedback-report part (RFC 5965 section 2)")
	case mp.deliveryStatus != nil:
		b, err := parseDSN(mp)
		if err != nil {
			return report{}, err
		}
		format := formatDSN
		if mp.globalStatus {
			format = formatGlobalDSN
		}
		return report{kind: kindBounce, format: format, bounce: b}, nil
	}
	if b, format, ok := parseNonStandard(mp, env); ok {
		return report{kind: kindBounce, format: format, bounce: b}, nil
	}
	if mp.reportType == "delivery-status" || mp.reportType == "global-delivery-status" {
		return report{}, ports.Errorf(ports.CodeInvalidArgument,
			"delivery status notification has no message/delivery-status part (RFC 3464 section 2)")
	}
	return report{kind: kindNone}, nil
}

// walkMessage reads the message's header leniently and walks its MIME structure with go-message, keeping
// the parts reports are built from. Parts inside a returned message/rfc822 are not entered: a bounce of a
// feedback report is a bounce, not a complaint.
func walkMessage(raw []byte) (*mimeParts, error) {
	hdr, body := readFields(raw)
	if len(hdr) == 0 {
		return nil, ports.Errorf(ports.CodeInvalidArgument, "message has no header (RFC 5322 section 2.1)")
	}
	mp := &mimeParts{header: hdr}
	var h textproto.Header
	for _, f := range hdr {
		if len(f.name) > 0 {
			h.Add(f.name, f.value)
		}
	}
	mh := message.Header{Header: h}
	if t, params, err := mh.ContentType(); err == nil && t == "multipart/report" {
		mp.reportType = strings.ToLower(strings.TrimSpace(params["report-type"]))
	}
	// An unknown charset or transfer encoding still yields a readable entity (go-message documents it);
	// the fields reports are made of are US-ASCII or UTF-8.
	e, _ := message.New(mh, bytes.NewReader(body))
	if e != nil {
		mp.walk(e, 0)
	}
	return mp, nil
}

// walk visits one entity and, for a multipart, its parts up to maxMIMEDepth and maxMIMEParts, keeping the
// first part of each kind.
func (mp *mimeParts) walk(e *message.Entity, depth int) {
	mp.parts++
	t, _, err := e.Header.ContentType()
	if err != nil {
		// RFC 2045 §5.2: a missing or unreadable Content-Type means text/plain.
		t = "text/plain"
	}
	switch t {
	case "message/delivery-status", "message/global-delivery-status":
		if mp.deliveryStatus == nil {
			mp.deliveryStatus = readPart(e.Body, maxPartBytes)
			mp.globalStatus = t == "message/global-delivery-status"
		}
	case "message/feedback-report":
		if mp.feedback == nil {
			mp.feedback = readPart(e.Body, maxPartBytes)
		}
	case "message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers":
		if !mp.hasReturned {
			mp.returned, _ = readFields(readPart(e.Body, maxPartBytes))
			mp.hasReturned = true
		}
	case "text/plain":
		if mp.text == nil {
			mp.text = readPart(e.Body, maxTextScan)
		}
	}
	if !strings.HasPrefix(t, "multipart/") || depth >= maxMIMEDepth {
		return
	}
	mr := e.MultipartReader()
	if mr == nil {
		return
	}
	for mp.parts < maxMIMEParts {
		p, err := mr.NextPart()
		if p == nil {
			// io.EOF at the closing boundary, or a malformed multipart: keep what was found.
			return
		}
		_ = err // an unknown charset or encoding in one part still leaves it readable
		mp.walk(p, depth+1)
	}
}

// readPart reads at most limit bytes; a body that breaks off (bad base64, truncated multipart) gives what
// was read before the break.
func readPart(r io.Reader, limit int64) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, limit))
	if b == nil {
		b = []byte{}
	}
	return b
}

// fromAddress is the address of the message's From field, or "" when it has none that parses.
func (mp *mimeParts) fromAddress() string {
	from := mp.header.get("From")
	if m := addrRe.FindString(from); m != "" {
		return m
	}
	return ""
}

// Marker lines that start the copy of the original message plain-text bounces append (qmail, Exim,
// Sendmail without DSN, and many others), compared case-insensitively with the line stripped of the
// dashes and colons around it. Prefix markers may be followed by more words; exact markers must be the
// whole line, because their words also start ordinary sentences.
var (
	returnedPrefixMarkers = []string{
		"below this line is a copy of the message",
		"this is a copy of the message",
		"original message follows",
		"original message headers",
		"the header of the original message",
		"headers of the original message",
		"undelivered message headers",
	}
	returnedExactMarkers = []string{"original message", "returned message", "undelivered message"}
)

// isReturnedMarker reports whether a line of a bounce text introduces the returned original.
func isReturnedMarker(line []byte) bool {
	t := strings.ToLower(strings.Trim(strings.TrimSpace(string(line)), "-=_ *:.<>"))
	if t == "" || len(t) > 100 {
		return false
	}
	for _, m := range returnedPrefixMarkers {
		if strings.HasPrefix(t, m) {
			return true
		}
	}
	return slices.Contains(returnedExactMarkers, t)
}

// splitAtReturned returns the diagnostic part of a bounce text (before the returned original) and the
// header block of the returned original, when a marker line introduces one.
func splitAtReturned(text []byte) (diag []byte, returned fieldBlock, found bool) {
	rest := text
	for len(rest) > 0 {
		line, next := nextLine(rest)
		if isReturnedMarker(line) {
			diag = text[:len(text)-len(rest)]
			for len(next) > 0 {
				l, n := nextLine(next)
				if !isBlank(l) {
					break
				}
				next = n
			}
			returned, _ = readFields(next)
			return diag, returned, true
		}
		rest = next
	}
	return text, nil, false
}
