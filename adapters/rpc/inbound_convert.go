package rpc

import (
	"encoding/json"

	"github.com/postmill/postmill/ports"

	inboundv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/inbound/v1"
)

// Conversions of the inbound area. Headers cross as a JSON object. Where an attachment's bytes are (its
// storage key, or its part path and checksum in the raw message) stays in the core: it crosses as
// downloadable, and the client side stands a placeholder key in for it so that
// ReceivedAttachment.Downloadable answers the same on both sides. An inbound part's path crosses from the
// inbound tier to the core, which records it.

// storedMarker is the placeholder storage key a client-side attachment carries when the core has the bytes.
const storedMarker = "stored"

func headersToProto(h map[string][]string) []byte {
	if h == nil {
		return nil
	}
	b, _ := json.Marshal(h)
	return b
}

func headersFromProto(b []byte) map[string][]string {
	if b == nil {
		return nil
	}
	h := map[string][]string{}
	_ = json.Unmarshal(b, &h)
	return h
}

func optStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func inboundDomainToProto(d ports.InboundDomain) *inboundv1.InboundDomain {
	r := d.DNSRecord
	return &inboundv1.InboundDomain{Id: d.ID, OrganizationId: d.OrganizationID, Name: d.Name, Status: string(d.Status),
		MxHost: d.MXHost, MxPriority: int64(d.MXPriority), VerifiedAt: timePtrToProto(d.VerifiedAt),
		LastCheckedAt: timePtrToProto(d.LastCheckedAt), CreatedAt: timeToProto(d.CreatedAt),
		DnsRecord: &inboundv1.InboundRecord{DomainId: r.DomainID, Type: r.Type, RecordType: r.RecordType, Host: r.Host,
			Value: r.Value, Ttl: int64(r.TTL), Required: r.Required, Verified: r.Verified, CheckedAt: timePtrToProto(r.CheckedAt)}}
}

func inboundDomainFromProto(d *inboundv1.InboundDomain) ports.InboundDomain {
	r := d.GetDnsRecord()
	return ports.InboundDomain{ID: d.GetId(), OrganizationID: d.GetOrganizationId(), Name: d.GetName(),
		Status: ports.InboundDomainStatus(d.GetStatus()), MXHost: d.GetMxHost(), MXPriority: int(d.GetMxPriority()),
		VerifiedAt: timePtrFromProto(d.GetVerifiedAt()), LastCheckedAt: timePtrFromProto(d.GetLastCheckedAt()),
		CreatedAt: timeFromProto(d.GetCreatedAt()),
		DNSRecord: ports.DNSRecord{DomainID: r.GetDomainId(), Type: r.GetType(), RecordType: r.GetRecordType(), Host: r.GetHost(),
			Value: r.GetValue(), TTL: int(r.GetTtl()), Required: r.GetRequired(), Verified: r.GetVerified(),
			CheckedAt: timePtrFromProto(r.GetCheckedAt())}}
}

func inboundDomainsToProto(ds []ports.InboundDomain) []*inboundv1.InboundDomain {
	out := make([]*inboundv1.InboundDomain, 0, len(ds))
	for _, d := range ds {
		out = append(out, inboundDomainToProto(d))
	}
	return out
}

func inboundDomainsFromProto(l []*inboundv1.InboundDomain) []ports.InboundDomain {
	out := make([]ports.InboundDomain, 0, len(l))
	for _, d := range l {
		out = append(out, inboundDomainFromProto(d))
	}
	return out
}

func routeToProto(r ports.InboundRoute) *inboundv1.InboundRoute {
	return &inboundv1.InboundRoute{Id: r.ID, OrganizationId: r.OrganizationID, InboundDomainId: r.InboundDomainID,
		MatchType: r.MatchType, MatchValue: r.MatchValue, Action: r.Action, Destination: r.Destination, Enabled: r.Enabled,
		Priority: int64(r.Priority), CreatedAt: timeToProto(r.CreatedAt), PlainSecret: r.PlainSecret}
}

func routeFromProto(r *inboundv1.InboundRoute) ports.InboundRoute {
	return ports.InboundRoute{ID: r.GetId(), OrganizationID: r.GetOrganizationId(), InboundDomainID: r.GetInboundDomainId(),
		MatchType: r.GetMatchType(), MatchValue: r.GetMatchValue(), Action: r.GetAction(), Destination: r.GetDestination(),
		Enabled: r.GetEnabled(), Priority: int(r.GetPriority()), CreatedAt: timeFromProto(r.GetCreatedAt()),
		PlainSecret: r.GetPlainSecret()}
}

func routesToProto(rs []ports.InboundRoute) []*inboundv1.InboundRoute {
	out := make([]*inboundv1.InboundRoute, 0, len(rs))
	for _, r := range rs {
		out = append(out, routeToProto(r))
	}
	return out
}

func routesFromProto(l []*inboundv1.InboundRoute) []ports.InboundRoute {
	out := make([]ports.InboundRoute, 0, len(l))
	for _, r := range l {
		out = append(out, routeFromProto(r))
	}
	return out
}

func attachmentToProto(a ports.ReceivedAttachment) *inboundv1.ReceivedAttachment {
	return &inboundv1.ReceivedAttachment{Id: a.ID, Filename: a.Filename, ContentType: a.ContentType, Size: a.Size,
		Inline: a.Inline, ContentId: a.ContentID, ScanStatus: a.ScanStatus, ScanSignature: a.ScanSignature,
		ScannedAt: timePtrToProto(a.ScannedAt), Downloadable: a.Downloadable()}
}

func attachmentFromProto(a *inboundv1.ReceivedAttachment) ports.ReceivedAttachment {
	out := ports.ReceivedAttachment{ID: a.GetId(), Filename: a.GetFilename(), ContentType: a.GetContentType(),
		Size: a.GetSize(), Inline: a.GetInline(), ContentID: a.GetContentId(), ScanStatus: a.GetScanStatus(),
		ScanSignature: a.GetScanSignature(), ScannedAt: timePtrFromProto(a.GetScannedAt())}
	if a.GetDownloadable() {
		out.BlobKey = storedMarker
	}
	return out
}

func receivedToProto(e ports.ReceivedEmail) *inboundv1.ReceivedEmail {
	out := &inboundv1.ReceivedEmail{Id: e.ID, OrganizationId: e.OrganizationID, InboundDomainId: e.InboundDomainID,
		To: e.To, From: e.From, HeaderFrom: e.HeaderFrom, HeaderFromName: e.HeaderFromName, ToAddresses: e.ToAddresses,
		CcAddresses: e.CcAddresses, Subject: e.Subject, MessageId: e.MessageID, InReplyTo: optStr(e.InReplyTo),
		References: optStr(e.References), SizeBytes: e.SizeBytes, SpamStatus: e.SpamStatus, ScanStatus: e.ScanStatus,
		Status: e.Status, RouteId: optStr(e.RouteID), RouteAction: optStr(e.RouteAction),
		ForwardStatus: optStr(e.ForwardStatus), ReceivedAt: timeToProto(e.ReceivedAt), Text: e.Text, Html: e.HTML,
		Headers: headersToProto(e.Headers), HasAttachments: e.Attachments != nil}
	for _, a := range e.Attachments {
		out.Attachments = append(out.Attachments, attachmentToProto(a))
	}
	return out
}

func receivedFromProto(e *inboundv1.ReceivedEmail) ports.ReceivedEmail {
	out := ports.ReceivedEmail{ID: e.GetId(), OrganizationID: e.GetOrganizationId(), InboundDomainID: e.GetInboundDomainId(),
		To: e.GetTo(), From: e.GetFrom(), HeaderFrom: e.GetHeaderFrom(), HeaderFromName: e.GetHeaderFromName(),
		ToAddresses: nonNilAddrs(e.GetToAddresses()), CcAddresses: nonNilAddrs(e.GetCcAddresses()), Subject: e.GetSubject(),
		MessageID: e.GetMessageId(), InReplyTo: optStr(e.InReplyTo), References: optStr(e.References),
		SizeBytes: e.GetSizeBytes(), SpamStatus: e.GetSpamStatus(), ScanStatus: e.GetScanStatus(), Status: e.GetStatus(),
		RouteID: optStr(e.RouteId), RouteAction: optStr(e.RouteAction), ForwardStatus: optStr(e.ForwardStatus),
		ReceivedAt: timeFromProto(e.GetReceivedAt()), Text: e.GetText(), HTML: e.GetHtml(), Headers: headersFromProto(e.GetHeaders())}
	if e.GetHasAttachments() {
		out.Attachments = make([]ports.ReceivedAttachment, 0, len(e.GetAttachments()))
		for _, a := range e.GetAttachments() {
			out.Attachments = append(out.Attachments, attachmentFromProto(a))
		}
	}
	return out
}

// nonNil keeps address lists as the store returns them: never nil.
func nonNilAddrs(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func inboundMessageToProto(m ports.InboundMessage) *inboundv1.InboundMessage {
	out := &inboundv1.InboundMessage{From: m.From, Rcpts: m.Rcpts, RemoteAddr: m.RemoteAddr, Raw: m.Raw,
		Headers: headersToProto(m.Headers), Subject: m.Subject, MessageId: m.MessageID, InReplyTo: m.InReplyTo,
		References: m.References, HeaderFrom: m.HeaderFrom, FromName: m.FromName, To: m.To, Cc: m.Cc, Text: m.Text, Html: m.HTML}
	for _, p := range m.Attachments {
		out.Attachments = append(out.Attachments, &inboundv1.InboundPart{Filename: p.Filename, ContentType: p.ContentType,
			Inline: p.Inline, ContentId: p.ContentID, Data: p.Data, PartPath: p.PartPath})
	}
	return out
}

func inboundMessageFromProto(m *inboundv1.InboundMessage) ports.InboundMessage {
	out := ports.InboundMessage{From: m.GetFrom(), Rcpts: m.GetRcpts(), RemoteAddr: m.GetRemoteAddr(), Raw: m.GetRaw(),
		Headers: headersFromProto(m.GetHeaders()), Subject: m.GetSubject(), MessageID: m.GetMessageId(),
		InReplyTo: m.GetInReplyTo(), References: m.GetReferences(), HeaderFrom: m.GetHeaderFrom(), FromName: m.GetFromName(),
		To: m.GetTo(), Cc: m.GetCc(), Text: m.GetText(), HTML: m.GetHtml()}
	for _, p := range m.GetAttachments() {
		out.Attachments = append(out.Attachments, ports.InboundPart{Filename: p.GetFilename(), ContentType: p.GetContentType(),
			Inline: p.GetInline(), ContentID: p.GetContentId(), Data: p.GetData(), PartPath: p.GetPartPath()})
	}
	return out
}
