package ports

import (
	"context"
	"time"
)

// Local mode (POSTMILL_LOCAL=true, the default of `make run`) lets someone try Postmill on a laptop: a DNS
// server inside the process publishes the records of every sending domain created on the instance, so
// verification passes against real DNS answers, and every message the MTA delivers lands in a mail catcher
// inside the process, which the edge shows at /local/mail. The types below are what those pieces say to
// each other; nothing here is used outside local mode.

// PublishedDomain is a sending domain of this instance as local mode's DNS server publishes it: its name
// and the records core/domain computed for it (SPEC §2).
type PublishedDomain struct {
	Name    string
	Records []DNSRecord
	// MX, when not empty, is what the domain's MX query answers instead of the catcher. Sending domains
	// leave it empty; inbound domains, once they exist, fill it with the inbound MX host.
	MX []MX
}

// LocalDNSStore reads what local mode's DNS server publishes. Unlike every tenant store it spans
// organizations: it is read-only and only local mode, on one developer's machine, uses it.
type LocalDNSStore interface {
	// PublishedDomains returns the sending domains of any organization whose name is one of names (lower
	// case, without the trailing dot), each with its records. Two organizations may hold the same name;
	// both are returned. Errors: internal only.
	PublishedDomains(ctx context.Context, names []string) ([]PublishedDomain, error)
}

// DKIM verification results of a caught message (RFC 8601 §2.7.1 names).
const (
	DKIMPass      = "pass"
	DKIMFail      = "fail"
	DKIMNone      = "none"      // the message carries no signature
	DKIMTempError = "temperror" // the key could not be looked up for now
	DKIMPermError = "permerror" // the signature or the key record is malformed
)

// DKIMResult is the outcome of verifying the first DKIM-Signature of a caught message against the key
// published in DNS.
type DKIMResult struct {
	Result   string // DKIMPass, DKIMFail, ...
	Domain   string // d= of the signature
	Selector string // s= of the signature
	Reason   string // why it did not pass, "" when it did
}

// CaughtMessage is the summary of one message the catcher holds.
type CaughtMessage struct {
	ID           string
	ReceivedAt   time.Time
	EnvelopeFrom string   // MAIL FROM, "" for the null reverse path
	EnvelopeTo   []string // RCPT TO
	Size         int64    // bytes of the raw message
	From         string   // the From header, decoded
	To           []string // the To header's addresses, decoded
	Subject      string   // decoded
	DKIM         DKIMResult
}

// MessageHeader is one header field of a caught message, in message order, its value decoded.
type MessageHeader struct {
	Name  string
	Value string
}

// CaughtAttachment describes one attachment or inline part of a caught message. Index is its position
// among the message's attachments, what CaughtAttachment asks for.
type CaughtAttachment struct {
	Index       int
	Filename    string
	ContentType string
	ContentID   string
	Inline      bool
	Size        int64
}

// CaughtContent is a caught message read in full: its summary, its headers, its text and HTML parts and
// the list of its attachments.
type CaughtContent struct {
	CaughtMessage
	Headers     []MessageHeader
	Text        string
	HTML        string
	Attachments []CaughtAttachment
}

// MailCatcher is local mode's mail catcher as the edge reads it. Messages are identified by opaque ids;
// an id the catcher does not hold (never held, evicted or cleared) is not_found.
type MailCatcher interface {
	// ListCaught returns every message held, newest first.
	ListCaught(ctx context.Context) ([]CaughtMessage, error)
	// Caught returns one message read in full. Errors: not_found.
	Caught(ctx context.Context, id string) (CaughtContent, error)
	// CaughtRaw returns the message as received. Errors: not_found.
	CaughtRaw(ctx context.Context, id string) ([]byte, error)
	// CaughtAttachment returns one attachment with its decoded content. Errors: not_found.
	CaughtAttachment(ctx context.Context, id string, index int) (CaughtAttachment, []byte, error)
	// ClearCaught deletes every message held.
	ClearCaught(ctx context.Context) error
}
