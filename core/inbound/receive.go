package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/ports"
)

// accepting reports whether mail for the domain is taken at RCPT.
func accepting(d ports.InboundDomain) bool { return d.Status == ports.InboundVerified }

// domainOf splits the domain off an address and lower-cases it.
func domainOf(addr string) string {
	_, host, ok := strings.Cut(strings.ToLower(strings.TrimSpace(addr)), "@")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(host, ".")
}

// AcceptsInboundRecipient implements ports.ReceiveService: only verified (hence not suspended) inbound
// domains take mail.
func (s *Service) AcceptsInboundRecipient(ctx context.Context, rcpt string) (bool, error) {
	host := domainOf(rcpt)
	if host == "" {
		return false, nil
	}
	d, found, err := s.domainByName(ctx, host)
	if err != nil || !found {
		return false, err
	}
	return accepting(d), nil
}

// blobKey names an object by its content, so a retried message or a repeated attachment is stored once.
func blobKey(kind string, data []byte) (key, sum string) {
	sum = sha256Hex(data)
	return "inbound/" + kind + "/" + sum, sum
}

func sha256Hex(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// Receive implements ports.ReceiveService: the raw message goes to the blob store (it is the record: a
// clean attachment is kept as its part path and checksum, and its bytes are derived from the raw message
// when they are needed, see attachmentBytes), then each recipient at an accepting inbound domain gets one
// received email, routed, with its email.received event, in one transaction per recipient. Only then does
// the tier answer 250. A part without a path (a tier that does not send one) or a Service without
// MessageParts keeps the attachment as an object of its own, as before.
func (s *Service) Receive(ctx context.Context, m ports.InboundMessage) (ports.ReceiveResult, error) {
	m = storable(m)
	res := ports.ReceiveResult{IDs: make([]string, len(m.Rcpts))}
	rawKey, sum := blobKey("raw", m.Raw)
	now := s.now()
	atts := make([]ports.ReceivedAttachment, len(m.Attachments))
	scan := ports.ScanClean
	for i, p := range m.Attachments {
		a := ports.ReceivedAttachment{Filename: p.Filename, ContentType: p.ContentType, Size: int64(len(p.Data)),
			Inline: p.Inline, ContentID: p.ContentID, ScannedAt: &now, SHA256: sha256Hex(p.Data)}
		v, err := s.deps.Scanner.Scan(ctx, p.Filename, p.ContentType, p.Data)
		switch {
		case err != nil:
			a.ScanStatus = ports.ScanFailed
			if scan == ports.ScanClean {
				scan = ports.ScanFailed
			}
			s.deps.Logger.WarnContext(ctx, "inbound attachment scan failed", slog.String("error", err.Error()))
		case !v.Clean:
			a.ScanStatus, a.ScanSignature = ports.ScanInfected, v.Signature
			scan = ports.ScanInfected
		default:
			a.ScanStatus = ports.ScanClean
			if p.PartPath != "" && s.deps.Parts != nil {
				a.PartPath = p.PartPath
			} else {
				a.BlobKey, _ = blobKey("part", p.Data)
			}
		}
		atts[i] = a
	}
	// The raw message (and any attachment kept as an object of its own) are written at once: each write
	// waits for its own sync to disk (or S3's answer), and the message is durable only when all of them are.
	errs := make([]error, len(atts)+1)
	var wg sync.WaitGroup
	put := func(i int, key string, data []byte, contentType string) {
		defer wg.Done()
		errs[i] = s.deps.Blobs.Put(ctx, key, data, contentType)
	}
	wg.Add(1)
	go put(0, rawKey, m.Raw, "message/rfc822")
	for i, a := range atts {
		if a.BlobKey != "" {
			wg.Add(1)
			go put(i+1, a.BlobKey, m.Attachments[i].Data, a.ContentType)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, fmt.Errorf("inbound: keeping the message: %w", err)
		}
	}
	spam, err := s.deps.Spam.Check(ctx, m.Raw)
	if err != nil || spam.Status == "" {
		// A spam checker that fails does not lose mail: the message is kept and marked ham, as without one.
		spam = ports.SpamVerdict{Status: ports.SpamHam}
	}
	for i, rcpt := range m.Rcpts {
		host := domainOf(rcpt)
		d, found, err := s.domainByName(ctx, host)
		if err != nil {
			return res, err
		}
		if !found || !accepting(d) {
			continue
		}
		e := s.received(m, d, strings.ToLower(rcpt), rawKey, sum, spam.Status, scan, atts, now)
		c, err := s.compiledRoutes(ctx, d)
		if err != nil {
			return res, err
		}
		route := c.match(e.To)
		switch {
		case route == nil:
			e.Status = ports.ReceivedDeadLettered
		default:
			rid, act := route.ID, route.Action
			e.RouteID, e.RouteAction = &rid, &act
			switch {
			case spam.Status == ports.SpamSpam || scan != ports.ScanClean:
				e.Status = ports.ReceivedQuarantined
			case route.Action == ports.ActionStore:
				e.Status = ports.ReceivedDelivered
			default:
				e.Status = ports.ReceivedPending
			}
			if route.Action == ports.ActionForwardEmail {
				fs := ports.ForwardPending
				e.ForwardStatus = &fs
			}
		}
		ev := ports.Event{ID: id.New(), OrganizationID: d.OrganizationID, Type: ports.EventEmailReceived,
			MessageID: e.ID, OccurredAt: now}
		if route != nil && route.Action != ports.ActionStore && e.Status == ports.ReceivedPending {
			e.ActionEventID, e.ActionDue = ev.ID, &now
		}
		inserted, existing, err := s.deps.Store.InsertReceived(ctx, e, []ports.Event{ev})
		if err != nil {
			return res, err
		}
		if !inserted {
			res.IDs[i] = existing
			continue
		}
		res.IDs[i] = e.ID
		s.deps.Logger.InfoContext(ctx, "inbound mail received", slog.String("id", e.ID), slog.String("status", e.Status),
			slog.String("organization_id", d.OrganizationID))
	}
	return res, nil
}

// received builds one recipient's received email.
func (s *Service) received(m ports.InboundMessage, d ports.InboundDomain, rcpt, rawKey, sum, spam, scan string,
	atts []ports.ReceivedAttachment, now time.Time) ports.ReceivedEmail {
	e := ports.ReceivedEmail{
		ID: id.New(), OrganizationID: d.OrganizationID, InboundDomainID: d.ID, To: rcpt, From: m.From,
		HeaderFrom: m.HeaderFrom, HeaderFromName: m.FromName, ToAddresses: nonNil(m.To), CcAddresses: nonNil(m.Cc),
		Subject: m.Subject, MessageID: m.MessageID, SizeBytes: int64(len(m.Raw)), SpamStatus: spam, ScanStatus: scan,
		ReceivedAt: now, Text: m.Text, HTML: m.HTML, Headers: m.Headers, RawKey: rawKey, DedupeKey: sum,
	}
	if m.InReplyTo != "" {
		v := m.InReplyTo
		e.InReplyTo = &v
	}
	if m.References != "" {
		v := m.References
		e.References = &v
	}
	e.Attachments = make([]ports.ReceivedAttachment, len(atts))
	for i, a := range atts {
		a.ID = id.New()
		e.Attachments[i] = a
	}
	return e
}

// storable returns m with every text value fit to be kept and shown: valid UTF-8 (U+FFFD for the rest), no
// NUL (PostgreSQL text and jsonb refuse it), and values taken from headers on one line, with CR, LF and
// the other C0 controls but TAB as spaces, so a decoded subject or name cannot add a header line to a
// forward (RFC 5322 §2.2). The inbound tier hands over clean values already (it also reads raw 8-bit
// headers as Latin-1); the core does not rely on a peer for what it stores. Raw and attachment bytes are
// left as they are.
func storable(m ports.InboundMessage) ports.InboundMessage {
	m.From, m.RemoteAddr = oneLine(m.From), oneLine(m.RemoteAddr)
	m.Subject, m.MessageID, m.InReplyTo, m.References = oneLine(m.Subject), oneLine(m.MessageID), oneLine(m.InReplyTo), oneLine(m.References)
	m.HeaderFrom, m.FromName = oneLine(m.HeaderFrom), oneLine(m.FromName)
	m.Rcpts, m.To, m.Cc = oneLines(m.Rcpts), oneLines(m.To), oneLines(m.Cc)
	m.Text, m.HTML = bodyText(m.Text), bodyText(m.HTML)
	if m.Headers != nil {
		h := make(map[string][]string, len(m.Headers))
		for k, vs := range m.Headers {
			k = oneLine(k)
			h[k] = append(h[k], oneLines(vs)...)
		}
		m.Headers = h
	}
	if m.Attachments != nil {
		atts := make([]ports.InboundPart, len(m.Attachments))
		for i, a := range m.Attachments {
			a.Filename, a.ContentType, a.ContentID = oneLine(a.Filename), oneLine(a.ContentType), oneLine(a.ContentID)
			atts[i] = a
		}
		m.Attachments = atts
	}
	return m
}

// oneLine makes a header value valid UTF-8 on one line (see storable).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

func oneLines(l []string) []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = oneLine(s)
	}
	return out
}

// bodyText makes a body valid UTF-8 without NUL; its line breaks stay.
func bodyText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
