package rpc_test

import (
	"context"
	"sync"

	"github.com/postmill/postmill/ports"
)

// inboundAnswers are what the fake core answers for the inbound services, kept beside fakeCore like the
// marketing answers.
type inboundAnswers struct {
	domain   ports.InboundDomain
	domains  []ports.InboundDomain
	route    ports.InboundRoute
	routes   []ports.InboundRoute
	resolved *ports.InboundRoute
	email    ports.ReceivedEmail
	emails   []ports.ReceivedEmail
	raw      []byte
	att      ports.ReceivedAttachment
	accepted bool
	result   ports.ReceiveResult
}

var inboundByFake sync.Map // *fakeCore -> *inboundAnswers

func (f *fakeCore) in() *inboundAnswers {
	a, _ := inboundByFake.LoadOrStore(f, &inboundAnswers{})
	return a.(*inboundAnswers)
}

func (f *fakeCore) CreateInboundDomain(ctx context.Context, orgID, name string) (ports.InboundDomain, error) {
	return f.in().domain, f.record(ctx, "CreateInboundDomain", orgID, name)
}
func (f *fakeCore) ListInboundDomains(ctx context.Context, orgID string) ([]ports.InboundDomain, error) {
	return f.in().domains, f.record(ctx, "ListInboundDomains", orgID)
}
func (f *fakeCore) GetInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return f.in().domain, f.record(ctx, "GetInboundDomain", orgID, id)
}
func (f *fakeCore) VerifyInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return f.in().domain, f.record(ctx, "VerifyInboundDomain", orgID, id)
}
func (f *fakeCore) SuspendInboundDomain(ctx context.Context, orgID, id string) (ports.InboundDomain, error) {
	return f.in().domain, f.record(ctx, "SuspendInboundDomain", orgID, id)
}
func (f *fakeCore) DeleteInboundDomain(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteInboundDomain", orgID, id)
}
func (f *fakeCore) CreateRoute(ctx context.Context, orgID string, in ports.InboundRouteInput) (ports.InboundRoute, error) {
	return f.in().route, f.record(ctx, "CreateRoute", orgID, in)
}
func (f *fakeCore) UpdateRoute(ctx context.Context, orgID, id string, p ports.InboundRoutePatch) (ports.InboundRoute, error) {
	return f.in().route, f.record(ctx, "UpdateRoute", orgID, id, p)
}
func (f *fakeCore) DeleteRoute(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteRoute", orgID, id)
}
func (f *fakeCore) ListRoutes(ctx context.Context, orgID, domainID string) ([]ports.InboundRoute, error) {
	return f.in().routes, f.record(ctx, "ListRoutes", orgID, domainID)
}
func (f *fakeCore) ResolveRoute(ctx context.Context, orgID, address string) (*ports.InboundRoute, error) {
	return f.in().resolved, f.record(ctx, "ResolveRoute", orgID, address)
}
func (f *fakeCore) ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ports.ReceivedEmail, error) {
	return f.in().emails, f.record(ctx, "ListReceived", orgID, limit, offset)
}
func (f *fakeCore) GetReceived(ctx context.Context, orgID, id string) (ports.ReceivedEmail, error) {
	return f.in().email, f.record(ctx, "GetReceived", orgID, id)
}
func (f *fakeCore) ReceivedRaw(ctx context.Context, orgID, id string) ([]byte, error) {
	return f.in().raw, f.record(ctx, "ReceivedRaw", orgID, id)
}
func (f *fakeCore) ReceivedAttachment(ctx context.Context, orgID, id, attID string) (ports.ReceivedAttachment, []byte, error) {
	return f.in().att, f.in().raw, f.record(ctx, "ReceivedAttachment", orgID, id, attID)
}
func (f *fakeCore) AcceptsInboundRecipient(ctx context.Context, rcpt string) (bool, error) {
	return f.in().accepted, f.record(ctx, "AcceptsInboundRecipient", rcpt)
}
func (f *fakeCore) Receive(ctx context.Context, m ports.InboundMessage) (ports.ReceiveResult, error) {
	return f.in().result, f.record(ctx, "Receive", m)
}

// attachmentAnswer is what ReceivedAttachment's round trip compares: the attachment and its bytes.
type attachmentAnswer struct {
	A    ports.ReceivedAttachment
	Data []byte
}

func inboundRoundTrips() []roundTrip {
	dom := ports.InboundDomain{ID: "d1", OrganizationID: "org1", Name: "in.acme.test", Status: ports.InboundVerified,
		MXHost: "mx.postmill.test", MXPriority: 10, VerifiedAt: ptr(t0), LastCheckedAt: ptr(t1), CreatedAt: t0,
		DNSRecord: ports.DNSRecord{DomainID: "d1", Type: "MX", RecordType: "MX", Host: "in.acme.test", Value: "10 mx.postmill.test",
			TTL: 3600, Required: true, Verified: true, CheckedAt: ptr(t1)}}
	route := ports.InboundRoute{ID: "r1", OrganizationID: "org1", InboundDomainID: "d1", MatchType: ports.MatchPattern,
		MatchValue: "a*@in.acme.test", Action: ports.ActionWebhook, Destination: "https://h.test/x", Enabled: true, Priority: 7, CreatedAt: t0,
		PlainSecret: "whsec_00"}
	on, prio := false, 0
	input := ports.InboundRouteInput{InboundDomainID: "d1", MatchType: ports.MatchExact, MatchValue: "a@in.acme.test",
		Action: ports.ActionStore, Enabled: &on, Priority: &prio}
	patch := ports.InboundRoutePatch{Enabled: &on, Priority: &prio, Destination: ptr("")}
	// The storage key stays in the core: a stored attachment reaches the client with the placeholder key.
	att := ports.ReceivedAttachment{ID: "a1", Filename: "résumé.pdf", ContentType: "application/pdf", Size: 3, Inline: true,
		ContentID: "cid1", ScanStatus: ports.ScanClean, ScannedAt: ptr(t1), BlobKey: "inbound/part/abc"}
	attClient := att
	attClient.BlobKey = "stored"
	// So does where a derived attachment is in the raw message: it too reaches the client as downloadable.
	part := ports.ReceivedAttachment{ID: "a3", Filename: "logo.png", ContentType: "image/png", Size: 4,
		ScanStatus: ports.ScanClean, PartPath: "1.2.2", SHA256: "ab12"}
	partClient := part
	partClient.PartPath, partClient.SHA256, partClient.BlobKey = "", "", "stored"
	infected := ports.ReceivedAttachment{ID: "a2", ScanStatus: ports.ScanInfected, ScanSignature: "Eicar-Test-Signature"}
	email := ports.ReceivedEmail{ID: "e1", OrganizationID: "org1", InboundDomainID: "d1", To: "a@in.acme.test", From: "s@x.test",
		HeaderFrom: "s@x.test", HeaderFromName: "Sé", ToAddresses: []string{"a@in.acme.test"}, CcAddresses: []string{},
		Subject: "hi", MessageID: "<m@x>", InReplyTo: ptr("<p@x>"), SizeBytes: 99, SpamStatus: ports.SpamHam,
		ScanStatus: ports.ScanClean, Status: ports.ReceivedDelivered, RouteID: ptr("r1"), RouteAction: ptr("store"),
		ReceivedAt: t0, Text: "t", HTML: "<p>h</p>", Headers: map[string][]string{"Received": {"a", "b"}},
		Attachments: []ports.ReceivedAttachment{att, part, infected}, RawKey: "inbound/raw/abc", DedupeKey: "abc"}
	emailClient := email
	emailClient.RawKey, emailClient.DedupeKey = "", ""
	emailClient.Attachments = []ports.ReceivedAttachment{attClient, partClient, infected}
	listItem := ports.ReceivedEmail{ID: "e2", ToAddresses: []string{}, CcAddresses: []string{"c@x.test"}, ReceivedAt: t1,
		ForwardStatus: ptr(ports.ForwardPending)}
	msg := ports.InboundMessage{From: "s@x.test", Rcpts: []string{"a@in.acme.test"}, RemoteAddr: "192.0.2.1:4000", Raw: []byte("raw"),
		Headers: map[string][]string{"Subject": {"hi"}}, Subject: "hi", MessageID: "<m@x>", InReplyTo: "<p@x>", References: "<p@x>",
		HeaderFrom: "s@x.test", FromName: "S", To: []string{"a@in.acme.test"}, Cc: []string{"c@x.test"}, Text: "t", HTML: "h",
		Attachments: []ports.InboundPart{{Filename: "f", ContentType: "text/plain", Inline: true, ContentID: "c", Data: []byte("d"), PartPath: "2.1"}}}

	var trips []roundTrip
	add := func(name, method string, answer func(*inboundAnswers), call func(context.Context, ports.Core) (any, error), want any, args ...any) {
		trips = append(trips, roundTrip{name: name, method: method, answer: func(f *fakeCore) { answer(f.in()) }, call: call, want: want, args: args})
	}
	add("CreateInboundDomain", "CreateInboundDomain", func(a *inboundAnswers) { a.domain = dom },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Inbound.CreateInboundDomain(ctx, "org1", "in.acme.test")
		},
		dom, "org1", "in.acme.test")
	add("ListInboundDomains", "ListInboundDomains", func(a *inboundAnswers) { a.domains = []ports.InboundDomain{dom} },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Inbound.ListInboundDomains(ctx, "org1") },
		[]ports.InboundDomain{dom}, "org1")
	for _, m := range []string{"GetInboundDomain", "VerifyInboundDomain", "SuspendInboundDomain"} {
		add(m, m, func(a *inboundAnswers) { a.domain = dom }, func(ctx context.Context, c ports.Core) (any, error) {
			switch m {
			case "GetInboundDomain":
				return c.Inbound.GetInboundDomain(ctx, "org1", "d1")
			case "VerifyInboundDomain":
				return c.Inbound.VerifyInboundDomain(ctx, "org1", "d1")
			}
			return c.Inbound.SuspendInboundDomain(ctx, "org1", "d1")
		}, dom, "org1", "d1")
	}
	add("DeleteInboundDomain", "DeleteInboundDomain", func(*inboundAnswers) {},
		func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Inbound.DeleteInboundDomain(ctx, "org1", "d1")
		},
		nil, "org1", "d1")
	add("CreateRoute", "CreateRoute", func(a *inboundAnswers) { a.route = route },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Inbound.CreateRoute(ctx, "org1", input) },
		route, "org1", input)
	add("CreateRoute/defaults", "CreateRoute", func(a *inboundAnswers) { a.route = route },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Inbound.CreateRoute(ctx, "org1", ports.InboundRouteInput{MatchType: ports.MatchCatchAll})
		}, route, "org1", ports.InboundRouteInput{MatchType: ports.MatchCatchAll})
	add("UpdateRoute", "UpdateRoute", func(a *inboundAnswers) { a.route = route },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Inbound.UpdateRoute(ctx, "org1", "r1", patch)
		},
		route, "org1", "r1", patch)
	add("DeleteRoute", "DeleteRoute", func(*inboundAnswers) {},
		func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Inbound.DeleteRoute(ctx, "org1", "r1")
		},
		nil, "org1", "r1")
	add("ListRoutes", "ListRoutes", func(a *inboundAnswers) { a.routes = []ports.InboundRoute{route} },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Inbound.ListRoutes(ctx, "org1", "d1") },
		[]ports.InboundRoute{route}, "org1", "d1")
	add("ResolveRoute", "ResolveRoute", func(a *inboundAnswers) { a.resolved = &route },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Inbound.ResolveRoute(ctx, "org1", "ab@in.acme.test")
		},
		&route, "org1", "ab@in.acme.test")
	add("ResolveRoute/none", "ResolveRoute", func(a *inboundAnswers) { a.resolved = nil },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Inbound.ResolveRoute(ctx, "org1", "x@y.test")
		},
		(*ports.InboundRoute)(nil), "org1", "x@y.test")
	add("ListReceived", "ListReceived", func(a *inboundAnswers) { a.emails = []ports.ReceivedEmail{listItem} },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Inbound.ListReceived(ctx, "org1", 25, 50)
		},
		[]ports.ReceivedEmail{listItem}, "org1", 25, 50)
	add("GetReceived", "GetReceived", func(a *inboundAnswers) { a.email = email },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Inbound.GetReceived(ctx, "org1", "e1") },
		emailClient, "org1", "e1")
	add("ReceivedRaw", "ReceivedRaw", func(a *inboundAnswers) { a.raw = []byte("From: a\r\n\r\nx") },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Inbound.ReceivedRaw(ctx, "org1", "e1") },
		[]byte("From: a\r\n\r\nx"), "org1", "e1")
	add("ReceivedAttachment", "ReceivedAttachment", func(a *inboundAnswers) { a.att, a.raw = att, []byte("pdf") },
		func(ctx context.Context, c ports.Core) (any, error) {
			a, data, err := c.Inbound.ReceivedAttachment(ctx, "org1", "e1", "a1")
			return attachmentAnswer{a, data}, err
		}, attachmentAnswer{attClient, []byte("pdf")}, "org1", "e1", "a1")
	add("AcceptsInboundRecipient", "AcceptsInboundRecipient", func(a *inboundAnswers) { a.accepted = true },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Receiving.AcceptsInboundRecipient(ctx, "a@in.acme.test")
		},
		true, "a@in.acme.test")
	add("Receive", "Receive", func(a *inboundAnswers) { a.result = ports.ReceiveResult{IDs: []string{"e1", ""}} },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Receiving.Receive(ctx, msg) },
		ports.ReceiveResult{IDs: []string{"e1", ""}}, msg)
	return trips
}
