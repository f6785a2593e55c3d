package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/postmill/postmill/ports"
)

// Secret material as the core holds it. Distinctive bytes, so that a test can look for them on the wire.
var (
	dkimKey    = []byte("\x30\x82\x04\xbe-PKCS8-DER-dkim-private-key-material-\x00\x01\x02\xff")
	storageKey = "att/org1/0190b9a2-0000-7000-8000-000000000001/0190b9a2-secret-storage-key"
)

// fullDomain sets every field of a domain and its records, the private key included; the records are
// verified and carry a problem all the same, which no real run produces, so that every field crosses.
func fullDomain() ports.Domain {
	return ports.Domain{
		ID: "d1", OrganizationID: "org1", Name: "mail.example.com", Status: ports.DomainVerified,
		Region: "eu-west-1", DKIMSelector: "pmabcdefghij", DKIMPrivateKey: dkimKey,
		DKIMPublicKey: "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA", VerifiedAt: ptr(t1), CreatedAt: t0,
		OpenTracking: true, ClickTracking: true,
		Records: []ports.DNSRecord{
			{
				ID: "r1", DomainID: "d1", Type: ports.RecordDKIM, RecordType: ports.RRTypeTXT,
				Host: "pmabcdefghij._domainkey.mail.example.com", Value: "v=DKIM1; k=rsa; p=MIIB", TTL: 3600,
				Required: true, Verified: true, CheckedAt: ptr(t1),
				Found:   []string{"v=DKIM1; k=rsa; p=OLD", "v=spf1 -all"},
				Problem: "no TXT record at the name equals the expected value",
			},
			{
				ID: "r2", DomainID: "d1", Type: ports.RecordTracking, RecordType: ports.RRTypeCNAME,
				Host: "track.mail.example.com", Value: "track.postmill.local", TTL: 300, Required: true,
				Verified: true, CheckedAt: ptr(t2), Found: []string{"track.postmill.local."},
				Problem: "ünïcödé problem",
			},
		},
	}
}

// withoutPrivateKey is a domain as the client receives it: the key stays in the core.
func withoutPrivateKey(d ports.Domain) ports.Domain {
	d.DKIMPrivateKey = nil
	return d
}

// fullSendRequest sets every field of a send. Template variables hold only the types a JSON decoder
// produces with UseNumber, so that the implementation receives exactly this value.
func fullSendRequest() ports.SendRequest {
	return ports.SendRequest{
		From: "Ada <ada@mail.example.com>", To: []string{"b@example.org", "c@example.org"}, Cc: []string{"d@example.org"},
		Bcc: []string{"e@example.org"}, Subject: "Über the wire ✓", HTML: "<p>Hi</p>", Text: "Hi", ReplyTo: "r@example.com",
		Template: &ports.TemplateRef{ID: "tmpl1", Variables: map[string]any{
			"name": "Ada", "big": json.Number("18446744073709551617"), "ratio": json.Number("1.5"), "vip": true,
			"items": []any{"a", json.Number("2"), nil}, "nested": map[string]any{"k": "v"},
		}},
		Attachments: []ports.Attachment{{
			Filename: "invoice.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.7\x00\xff"),
			Inline: true, ContentID: "logo@postmill",
		}},
		Headers:        map[string]string{"X-Campaign": "spring", "List-Unsubscribe": "<https://u.example/1>"},
		Tags:           map[string]string{"category": "billing"},
		Metadata:       json.RawMessage(`{"orderId": 12345678901234567890, "note":"kept  byte for byte"}`),
		Sandbox:        true,
		ScheduledAt:    ptr(t2),
		IdempotencyKey: "idem-1",
	}
}

// emptySendRequest has every list and map non-nil and empty, and every optional value absent.
func emptySendRequest() ports.SendRequest {
	return ports.SendRequest{
		To: []string{}, Cc: []string{}, Bcc: []string{},
		Template:    &ports.TemplateRef{Variables: map[string]any{}},
		Attachments: []ports.Attachment{{Content: []byte{}}, {}},
		Headers:     map[string]string{}, Tags: map[string]string{}, Metadata: json.RawMessage{},
	}
}

func fullSendResult() ports.SendResult {
	return ports.SendResult{ID: "m1", Status: ports.StatusQueued, Deduped: true}
}

// batchError is a per-item error with every field set; Fields hold json.Number so that it compares
// with reflect.DeepEqual after the hop.
func batchError() *ports.Error {
	return &ports.Error{
		Code: ports.CodePaymentRequired, Message: "Plan limit reached for emails_sent", Reason: "plan_limit_exceeded",
		Details:    []ports.FieldViolation{{Path: "to.0", Message: "invalid"}},
		Constraint: "usage_pkey", RetryAfterSeconds: 9,
		Fields: map[string]any{"metric": "emails_sent", "limit": json.Number("1152921504606846977")},
	}
}

func fullBatchItem() ports.BatchItemResult {
	return ports.BatchItemResult{Index: 7, Result: fullSendResult(), Err: batchError()}
}

// fullMessage sets every field of a message, its recipients, attachments (storage key included) and
// timeline.
func fullMessage() ports.Message {
	return ports.Message{
		ID: "m1", OrganizationID: "org1", DomainID: "d1", Status: ports.StatusDeliveryDelayed,
		From: "ada@mail.example.com", Subject: "Hi", HTML: "<p>Hi</p>", Text: "Hi", ReplyTo: "r@example.com",
		Headers: map[string]string{"X-A": "1"}, Tags: map[string]string{"t": "v"},
		Metadata: json.RawMessage(`{"a":[1,2.50,"x"]}`), Sandbox: true, ScheduledAt: ptr(t1),
		IdempotencyKey: "idem-1", CreatedAt: t0,
		Recipients: []ports.Recipient{
			{ID: "rc1", Type: ports.RecipientTo, Address: "b@example.org", Name: "Bea", Status: ports.StatusDelivered},
			{ID: "rc2", Type: ports.RecipientBcc, Address: "e@example.org", Name: "Eve", Status: ports.StatusDeliveryDelayed},
		},
		Attachments: []ports.StoredAttachment{{
			ID: "a1", Filename: "invoice.pdf", ContentType: "application/pdf", Size: 10 << 20, Inline: true,
			ContentID: "logo@postmill", Key: storageKey,
		}},
		Events: []ports.Event{{
			ID: "e1", OrganizationID: "org1", Type: ports.EventEmailDelivered, MessageID: "m1", RecipientID: "rc1",
			DomainID: "d1", ProviderResponse: ptr("250 2.0.0 Ok: queued as 1234"), OccurredAt: t1,
			// No delivered event has a URL; every field is set so that each one is seen to cross.
			URL: "https://example.org/pricing?utm=1&x=ä", LinkID: "3", BounceClass: ports.BounceClassRateLimited,
		}},
	}
}

// withoutStorageKeys is a message as the edge receives it: attachment keys stay in the core.
func withoutStorageKeys(m ports.Message) ports.Message {
	if m.Attachments != nil {
		atts := make([]ports.StoredAttachment, len(m.Attachments))
		copy(atts, m.Attachments)
		for i := range atts {
			atts[i].Key = ""
		}
		m.Attachments = atts
	}
	return m
}

func fullJob() ports.DeliveryJob {
	return ports.DeliveryJob{
		ID: "j1", OrganizationID: "org1", MessageID: "m1", Domain: "example.org",
		RecipientIDs: []string{"rc1", "rc2"}, Attempt: 3, FirstQueuedAt: t0, NotBefore: t1, Bulk: true,
	}
}

// fullOutbound sets every field of an outbound message, the DKIM private key and storage keys included:
// the MTA needs both.
func fullOutbound() ports.OutboundMessage {
	m := fullMessage()
	return ports.OutboundMessage{
		Job: fullJob(), MessageID: "m1", OrganizationID: "org1", From: "Ada <ada@mail.example.com>",
		ReplyTo: "r@example.com", Subject: "Hi", HTML: "<p>Hi</p>", Text: "Hi",
		Headers: map[string]string{"X-A": "1"}, To: []string{"b@example.org"}, Cc: []string{"c@example.org"},
		Recipients: m.Recipients, Attachments: m.Attachments, CreatedAt: t0,
		DKIMDomain: "mail.example.com", DKIMSelector: "pmabcdefghij", DKIMPrivateKey: dkimKey,
		ReturnPath: "b-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa01234567@bounce.mail.example.com", MessageIDHeader: "m1@mail.example.com",
	}
}

func fullReport() ports.DeliveryReport {
	return ports.DeliveryReport{
		Job: fullJob(), Handed: true, At: t2,
		Recipients: []ports.RecipientOutcome{
			{RecipientID: "rc1", Kind: ports.OutcomeDelivered, Response: "250 2.0.0 Ok: queued as 1234"},
			{RecipientID: "rc2", Kind: ports.OutcomeDeferred, Response: "451 4.7.1 Try again later"},
		},
	}
}

// TestSendingFixturesComplete fails when a ports type of the sending API grows a field that the full
// fixtures (and so the round trips that use them) leave unset.
func TestSendingFixturesComplete(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		fullDomain(), fullSendRequest(), fullSendResult(), fullBatchItem(), fullMessage(), fullJob(),
		fullOutbound(), fullReport(), ports.ListEmailsQuery{Limit: 100, Cursor: "c", Status: ports.StatusBounced},
		ports.EmailPage{Data: []ports.Message{fullMessage()}, NextCursor: "next"},
		ports.Principal{Kind: ports.PrincipalSMTP, OrganizationID: "org1", UserID: "u", IsAdmin: true, APIKeyID: "k",
			Scopes: []string{"emails:send"}, ScopesEnforced: true, TwoFactor: true},
	} {
		mustSetEveryField(t, v)
	}
}

func sendingRoundTrips() []roundTrip {
	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }

	smtpPrincipal := ports.Principal{
		Kind: ports.PrincipalSMTP, OrganizationID: "org1", UserID: "u", IsAdmin: true, APIKeyID: "k",
		Scopes: []string{"emails:send"}, ScopesEnforced: true,
	}
	add(roundTrip{
		name:   "AuthenticateSMTP",
		answer: func(f *fakeCore) { f.principal = smtpPrincipal },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Auth.AuthenticateSMTP(ctx, "pm_abc", "pässword with spaces")
		},
		want:   smtpPrincipal,
		method: "AuthenticateSMTP",
		args:   []any{"pm_abc", "pässword with spaces"},
	})

	// Domains: every field; no records (as listed) and empty records; unset times.
	bareDomain := ports.Domain{ID: "d2", Status: ports.DomainPending}
	emptyRecords := ports.Domain{ID: "d3", DKIMPrivateKey: []byte{}, Records: []ports.DNSRecord{{ID: "r9"}}}
	emptyRecords.Records = emptyRecords.Records[:0]
	uncheckedRecord := ports.Domain{ID: "d4", Records: []ports.DNSRecord{{ID: "r1", Type: ports.RecordSPF}}}
	for name, d := range map[string]ports.Domain{
		"full": fullDomain(), "bare": bareDomain, "empty records": emptyRecords, "unchecked record": uncheckedRecord,
	} {
		add(roundTrip{
			name:   "CreateDomain/" + name,
			answer: func(f *fakeCore) { f.domain = d },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Domains.CreateDomain(ctx, "org1", " Mail.Example.COM ")
			},
			want:   withoutPrivateKey(d),
			method: "CreateDomain",
			args:   []any{"org1", " Mail.Example.COM "},
		})
	}
	for _, m := range []struct {
		method string
		call   func(c ports.Core) func(context.Context, string, string) (ports.Domain, error)
	}{
		{"GetDomain", func(c ports.Core) func(context.Context, string, string) (ports.Domain, error) {
			return c.Domains.GetDomain
		}},
		{"VerifyDomain", func(c ports.Core) func(context.Context, string, string) (ports.Domain, error) {
			return c.Domains.VerifyDomain
		}},
		{"SuspendDomain", func(c ports.Core) func(context.Context, string, string) (ports.Domain, error) {
			return c.Domains.SuspendDomain
		}},
	} {
		add(roundTrip{
			name:   m.method,
			answer: func(f *fakeCore) { f.domain = fullDomain() },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return m.call(c)(ctx, "org1", "d1")
			},
			want:   withoutPrivateKey(fullDomain()),
			method: m.method,
			args:   []any{"org1", "d1"},
		})
	}
	// Tracking settings: each of the two may be left as it is (nil), turned on or turned off, and the
	// implementation must receive exactly that.
	for _, open := range []*bool{nil, ptr(true), ptr(false)} {
		for _, click := range []*bool{nil, ptr(true), ptr(false)} {
			settings := ports.TrackingSettings{OpenTracking: open, ClickTracking: click}
			answer := fullDomain()
			answer.OpenTracking, answer.ClickTracking = open != nil && *open, click != nil && *click
			add(roundTrip{
				name:   fmt.Sprintf("UpdateDomainTracking/open %s, click %s", boolPtrName(open), boolPtrName(click)),
				answer: func(f *fakeCore) { f.domain = answer },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					return c.Domains.UpdateDomainTracking(ctx, "org1", "d1", settings)
				},
				want:   withoutPrivateKey(answer),
				method: "UpdateDomainTracking",
				args:   []any{"org1", "d1", settings},
			})
		}
	}
	for name, domains := range map[string][]ports.Domain{
		"set":   {fullDomain(), bareDomain, emptyRecords},
		"empty": {},
		"nil":   nil,
	} {
		want := []ports.Domain(nil)
		if domains != nil {
			want = []ports.Domain{}
			for _, d := range domains {
				want = append(want, withoutPrivateKey(d))
			}
		}
		add(roundTrip{
			name:   "ListDomains/" + name,
			answer: func(f *fakeCore) { f.domains = domains },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Domains.ListDomains(ctx, "org1")
			},
			want:   want,
			method: "ListDomains",
			args:   []any{"org1"},
		})
		page := ports.Page[ports.Domain]{Data: domains, NextCursor: "next"}
		q := ports.PageQuery{Limit: 100, Cursor: "c1"}
		add(roundTrip{
			name:   "ListDomainsPage/" + name,
			answer: func(f *fakeCore) { f.domainPage = page },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Domains.ListDomainsPage(ctx, "org1", q)
			},
			want:   ports.Page[ports.Domain]{Data: want, NextCursor: "next"},
			method: "ListDomainsPage",
			args:   []any{"org1", q},
		})
	}

	// Sends: every field; every list, map and byte slice nil; all of them empty; a template without
	// variables.
	for name, req := range map[string]ports.SendRequest{
		"full":                       fullSendRequest(),
		"zero":                       {},
		"empty":                      emptySendRequest(),
		"template without variables": {Template: &ports.TemplateRef{ID: "welcome"}},
		"null metadata":              {Metadata: json.RawMessage("null")},
	} {
		add(roundTrip{
			name:   "Send/" + name,
			answer: func(f *fakeCore) { f.sendResult = fullSendResult() },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Emails.Send(ctx, "org1", req)
			},
			want:   fullSendResult(),
			method: "Send",
			args:   []any{"org1", req},
		})
	}
	add(roundTrip{
		name:   "Send/zero result",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Emails.Send(ctx, "", ports.SendRequest{})
		},
		want:   ports.SendResult{},
		method: "Send",
		args:   []any{"", ports.SendRequest{}},
	})
	for name, reqs := range map[string][]ports.SendRequest{
		"set":   {fullSendRequest(), {}, emptySendRequest()},
		"empty": {},
		"nil":   nil,
	} {
		for resultsName, results := range map[string][]ports.BatchItemResult{
			"results": {{Index: 0, Result: fullSendResult()}, {Index: 1, Err: batchError()}, fullBatchItem(), {}},
			"empty":   {},
			"nil":     nil,
		} {
			add(roundTrip{
				name:   "SendBatch/" + name + " requests, " + resultsName + " results",
				answer: func(f *fakeCore) { f.batch = results },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					return c.Emails.SendBatch(ctx, "org1", reqs)
				},
				want:   results,
				method: "SendBatch",
				args:   []any{"org1", reqs},
			})
		}
	}

	// Messages: every field; nothing set; every list and map empty.
	emptyMessage := ports.Message{
		ID: "m2", Headers: map[string]string{}, Tags: map[string]string{}, Metadata: json.RawMessage{},
		Recipients: []ports.Recipient{}, Attachments: []ports.StoredAttachment{}, Events: []ports.Event{},
	}
	emptyEvent := ports.Message{ID: "m3", Events: []ports.Event{
		{ID: "e1", ProviderResponse: ptr("")}, {ID: "e2"},
	}}
	for name, m := range map[string]ports.Message{
		"full": fullMessage(), "zero": {}, "empty": emptyMessage, "provider responses": emptyEvent,
	} {
		add(roundTrip{
			name:   "GetEmail/" + name,
			answer: func(f *fakeCore) { f.message = m },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Emails.GetEmail(ctx, "org1", "m1")
			},
			want:   withoutStorageKeys(m),
			method: "GetEmail",
			args:   []any{"org1", "m1"},
		})
	}
	add(roundTrip{
		name:   "CancelEmail",
		answer: func(f *fakeCore) { f.message = fullMessage() },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Emails.CancelEmail(ctx, "org1", "m1")
		},
		want:   withoutStorageKeys(fullMessage()),
		method: "CancelEmail",
		args:   []any{"org1", "m1"},
	})
	query := ports.ListEmailsQuery{Limit: 100, Cursor: "opaque==", Status: ports.StatusBounced}
	for name, page := range map[string]ports.EmailPage{
		"set":   {Data: []ports.Message{fullMessage(), emptyMessage, {}}, NextCursor: "next=="},
		"empty": {Data: []ports.Message{}},
		"nil":   {},
	} {
		want := page
		if page.Data != nil {
			want.Data = []ports.Message{}
			for _, m := range page.Data {
				want.Data = append(want.Data, withoutStorageKeys(m))
			}
		}
		add(roundTrip{
			name:   "ListEmails/" + name,
			answer: func(f *fakeCore) { f.page = page },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Emails.ListEmails(ctx, "org1", query)
			},
			want:   want,
			method: "ListEmails",
			args:   []any{"org1", query},
		})
	}
	add(roundTrip{
		name:   "ListEmails/zero query",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Emails.ListEmails(ctx, "org1", ports.ListEmailsQuery{})
		},
		want:   ports.EmailPage{},
		method: "ListEmails",
		args:   []any{"org1", ports.ListEmailsQuery{}},
	})

	// Delivery: every field, the DKIM key and storage keys included; nothing set; everything empty.
	emptyJob := ports.DeliveryJob{ID: "j2", RecipientIDs: []string{}}
	emptyOutbound := ports.OutboundMessage{
		Job: emptyJob, Headers: map[string]string{}, To: []string{}, Cc: []string{},
		Recipients: []ports.Recipient{}, Attachments: []ports.StoredAttachment{}, DKIMPrivateKey: []byte{},
	}
	for name, tc := range map[string]struct {
		job ports.DeliveryJob
		out ports.OutboundMessage
	}{
		"full":  {fullJob(), fullOutbound()},
		"zero":  {ports.DeliveryJob{}, ports.OutboundMessage{}},
		"empty": {emptyJob, emptyOutbound},
	} {
		add(roundTrip{
			name:   "LoadOutbound/" + name,
			answer: func(f *fakeCore) { f.outbound = tc.out },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Delivery.LoadOutbound(ctx, tc.job)
			},
			want:   tc.out,
			method: "LoadOutbound",
			args:   []any{tc.job},
		})
	}
	for name, r := range map[string]ports.DeliveryReport{
		"full":  fullReport(),
		"zero":  {},
		"empty": {Job: emptyJob, Recipients: []ports.RecipientOutcome{}},
	} {
		add(roundTrip{
			name:   "ReportDelivery/" + name,
			answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return nil, c.Delivery.ReportDelivery(ctx, r)
			},
			want:   nil,
			method: "ReportDelivery",
			args:   []any{r},
		})
	}
	jobs := []ports.DeliveryJob{fullJob(), {}, emptyJob}
	add(roundTrip{
		name:   "LoadOutbounds",
		answer: func(f *fakeCore) { f.outbound = fullOutbound() },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.DeliveryBatch.LoadOutbounds(ctx, jobs)
		},
		want:   []ports.OutboundResult{{Message: fullOutbound()}, {Message: fullOutbound()}, {Message: fullOutbound()}},
		method: "LoadOutbounds",
		args:   []any{jobs},
	})
	reports := []ports.DeliveryReport{fullReport(), {}, {Job: emptyJob, Recipients: []ports.RecipientOutcome{}}}
	add(roundTrip{
		name:   "ReportDeliveries",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.DeliveryBatch.ReportDeliveries(ctx, reports)
		},
		want:   []error{nil, nil, nil},
		method: "ReportDeliveries",
		args:   []any{reports},
	})
	return trips
}
