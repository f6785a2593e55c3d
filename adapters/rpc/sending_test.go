package rpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/postmill/postmill/adapters/rpc"
	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1/emailv1connect"
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
		RecipientIDs: []string{"rc1", "rc2"}, Attempt: 3, FirstQueuedAt: t0, NotBefore: t1,
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
	return trips
}

// TestBatchItemErrors checks that each item's error comes back as the *ports.Error a single Send would
// have returned (every code, reason, details and fields), aligned to its index, while the other items
// succeed; and that an item's unexpected error does not leak its words.
func TestBatchItemErrors(t *testing.T) {
	t.Parallel()
	codes := []ports.Code{
		ports.CodeInvalidArgument, ports.CodeNotFound, ports.CodeAlreadyExists, ports.CodeFailedPrecondition,
		ports.CodePermissionDenied, ports.CodeUnauthenticated, ports.CodeResourceExhausted,
		ports.CodePaymentRequired, ports.CodeInternal,
	}
	type item struct {
		err  error
		want *ports.Error
	}
	var items []item
	for _, code := range codes {
		items = append(items, item{fullError(code), fullError(code)})
	}
	items = append(items,
		item{nil, nil},
		item{&ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"},
			&ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"}},
		item{fmt.Errorf("send: %w", ports.MissingReference("templates_pkey")), ports.MissingReference("templates_pkey")},
		item{ports.ValidationError([]ports.FieldViolation{}...), ports.ValidationError([]ports.FieldViolation{}...)},
		item{errors.New("pq: secret connection string"), &ports.Error{Code: ports.CodeInternal, Message: "internal error"}},
		item{&ports.Error{Code: "teapot", Message: "secret teapot"}, &ports.Error{Code: ports.CodeInternal, Message: "internal error"}},
	)
	var results []ports.BatchItemResult
	for i, it := range items {
		r := ports.BatchItemResult{Index: i, Err: it.err}
		if it.err == nil {
			r.Result = ports.SendResult{ID: fmt.Sprintf("m%d", i), Status: ports.StatusQueued}
		}
		results = append(results, r)
	}
	b := setup(t, &fakeCore{batch: results})
	got, err := b.client.Core().Emails.SendBatch(context.Background(), "org1", make([]ports.SendRequest, len(items)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(items) {
		t.Fatalf("got %d results, want %d", len(got), len(items))
	}
	for i, it := range items {
		if got[i].Index != i {
			t.Errorf("item %d: index %d", i, got[i].Index)
		}
		if it.want == nil {
			if got[i].Err != nil || got[i].Result != results[i].Result {
				t.Errorf("item %d: got %+v, want success %+v", i, got[i], results[i].Result)
			}
			continue
		}
		assertSameError(t, got[i].Err, it.want)
		if strings.Contains(got[i].Err.Error(), "secret") {
			t.Errorf("item %d: err = %q leaks the implementation's words", i, got[i].Err)
		}
	}
}

// TestTemplateVariablesExact checks that numbers in template variables arrive exactly, as json.Number:
// an integer beyond 2^53 would not survive google.protobuf.Struct or a float64.
func TestTemplateVariablesExact(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req := ports.SendRequest{Template: &ports.TemplateRef{ID: "t", Variables: map[string]any{
		"big": int64(1<<60 + 1), "ratio": 0.1, "count": 3, "list": []int{1, 2},
	}}}
	if _, err := b.client.Core().Emails.Send(context.Background(), "org1", req); err != nil {
		t.Fatal(err)
	}
	calls := b.fake.recorded()
	got := calls[0].args[1].(ports.SendRequest).Template.Variables
	want := map[string]any{
		"big": json.Number("1152921504606846977"), "ratio": json.Number("0.1"), "count": json.Number("3"),
		"list": []any{json.Number("1"), json.Number("2")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("variables = %#v, want %#v", got, want)
	}
}

// TestUnencodableVariables checks that a send whose template variables are not JSON fails before the
// wire as an internal error that names the cause, and never reaches the core.
func TestUnencodableVariables(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	bad := ports.SendRequest{Template: &ports.TemplateRef{ID: "t", Variables: map[string]any{"ch": make(chan int)}}}
	_, err := b.client.Core().Emails.Send(context.Background(), "org1", bad)
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "template variables") {
		t.Errorf("Send: err = %v, want internal naming the variables", err)
	}
	_, err = b.client.Core().Emails.SendBatch(context.Background(), "org1", []ports.SendRequest{{}, bad})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("SendBatch: err = %v, want internal naming the item", err)
	}
	if calls := b.fake.recorded(); len(calls) != 0 {
		t.Errorf("implementation reached: %+v", calls)
	}
}

// capture records every response body the client reads, to inspect what crossed the wire.
type capture struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies map[string][]byte // by URL path, decompressed
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	plain := body
	if res.Header.Get("Content-Encoding") == "gzip" {
		// Connect compresses answers itself; look at what the bytes say, not at their compressed form.
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if plain, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.bodies[req.URL.Path] = plain
	c.mu.Unlock()
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// TestSecretsStayInCore checks on the wire itself that no DomainService answer carries the DKIM private
// key and no EmailService answer an attachment's storage key, while LoadOutbound carries both to the MTA.
func TestSecretsStayInCore(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{
		domain: fullDomain(), domains: []ports.Domain{fullDomain()}, message: fullMessage(),
		page: ports.EmailPage{Data: []ports.Message{fullMessage()}}, outbound: fullOutbound(),
	}
	srv := mustServe(t, fake.core(), testToken)
	cap := &capture{next: srv.Client().Transport, bodies: map[string][]byte{}}
	c := rpc.NewClient(srv.URL, testToken, &http.Client{Transport: cap}).Core()
	ctx := context.Background()

	for name, call := range map[string]func() error{
		"CreateDomain":  func() error { _, err := c.Domains.CreateDomain(ctx, "org1", "x"); return err },
		"ListDomains":   func() error { _, err := c.Domains.ListDomains(ctx, "org1"); return err },
		"GetDomain":     func() error { _, err := c.Domains.GetDomain(ctx, "org1", "d1"); return err },
		"VerifyDomain":  func() error { _, err := c.Domains.VerifyDomain(ctx, "org1", "d1"); return err },
		"SuspendDomain": func() error { _, err := c.Domains.SuspendDomain(ctx, "org1", "d1"); return err },
		"UpdateDomainTracking": func() error {
			_, err := c.Domains.UpdateDomainTracking(ctx, "org1", "d1", ports.TrackingSettings{OpenTracking: ptr(true)})
			return err
		},
		"GetEmail":    func() error { _, err := c.Emails.GetEmail(ctx, "org1", "m1"); return err },
		"CancelEmail": func() error { _, err := c.Emails.CancelEmail(ctx, "org1", "m1"); return err },
		"ListEmails":  func() error { _, err := c.Emails.ListEmails(ctx, "org1", ports.ListEmailsQuery{}); return err },
	} {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	out, err := c.Delivery.LoadOutbound(ctx, fullJob())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.DKIMPrivateKey, dkimKey) || out.Attachments[0].Key != storageKey {
		t.Errorf("LoadOutbound: key %q, storage key %q; want both as the core holds them", out.DKIMPrivateKey, out.Attachments[0].Key)
	}

	cap.mu.Lock()
	defer cap.mu.Unlock()
	if len(cap.bodies) != 10 {
		t.Fatalf("captured %d bodies, want 10", len(cap.bodies))
	}
	for path, body := range cap.bodies {
		hasKey := bytes.Contains(body, dkimKey)
		hasStorageKey := bytes.Contains(body, []byte(storageKey))
		if strings.Contains(path, "LoadOutbound") {
			if !hasKey || !hasStorageKey {
				t.Errorf("%s: DKIM key on the wire %v, storage key %v; want both", path, hasKey, hasStorageKey)
			}
			continue
		}
		if hasKey || hasStorageKey {
			t.Errorf("%s: DKIM key on the wire %v, storage key %v; want neither", path, hasKey, hasStorageKey)
		}
	}
}

// TestSchemaKeepsSecretsInCore checks the schema itself: no message of the domain or email packages may
// grow a field for a private key or an attachment's storage key, and the delivery package, where both
// travel to the MTA, has them.
func TestSchemaKeepsSecretsInCore(t *testing.T) {
	t.Parallel()
	fields := func(path string) map[protoreflect.Name]protoreflect.FullName {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out := map[protoreflect.Name]protoreflect.FullName{}
		var walk func(protoreflect.MessageDescriptors)
		walk = func(ms protoreflect.MessageDescriptors) {
			for i := range ms.Len() {
				m := ms.Get(i)
				if m.IsMapEntry() {
					continue // key and value of a map<string, string>
				}
				for j := range m.Fields().Len() {
					f := m.Fields().Get(j)
					out[f.Name()] = f.FullName()
				}
				walk(m.Messages())
			}
		}
		walk(fd.Messages())
		if len(out) == 0 {
			t.Fatalf("%s: no fields", path)
		}
		return out
	}
	for _, path := range []string{"postmill/domain/v1/domain.proto", "postmill/email/v1/email.proto"} {
		for name, full := range fields(path) {
			lower := strings.ToLower(string(name))
			if strings.Contains(lower, "private") || strings.Contains(lower, "secret") || lower == "key" || strings.Contains(lower, "storage") {
				t.Errorf("%s: field %s would carry what the core keeps", path, full)
			}
		}
	}
	delivery := fields("postmill/delivery/v1/delivery.proto")
	for _, want := range []protoreflect.FullName{
		"postmill.delivery.v1.OutboundMessage.dkim_private_key",
		"postmill.delivery.v1.OutboundAttachment.key",
	} {
		if delivery[want.Name()] != want {
			t.Errorf("delivery schema lacks %s, which the MTA needs", want)
		}
	}
}

// TestUnsendableNeverReachesCore checks that a request the client cannot put on the wire (a string that
// is not UTF-8, which proto3 forbids) fails as an internal error naming the field, and that the core
// never runs the method on an empty message instead.
func TestUnsendableNeverReachesCore(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	_, err := b.client.Core().Emails.Send(ctx, "org1", ports.SendRequest{Subject: "caf\xe9"})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "subject") {
		t.Errorf("Send: err = %v, want internal naming the subject", err)
	}
	err = b.client.Core().Delivery.ReportDelivery(ctx, ports.DeliveryReport{Job: fullJob(), Recipients: []ports.RecipientOutcome{
		{RecipientID: "rc1", Kind: ports.OutcomeBounced, Response: "550 5.1.1 unknown \xff"},
	}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "response") {
		t.Errorf("ReportDelivery: err = %v, want internal naming the response", err)
	}
	_, err = b.client.Core().Emails.Send(ctx, "org1", ports.SendRequest{Headers: map[string]string{"X-A": "\xff"}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "value") {
		t.Errorf("Send with a header: err = %v, want internal naming the map value", err)
	}
	_, err = b.client.Core().Emails.Send(ctx, "org1", ports.SendRequest{To: []string{"a@example.org", "\xffb@example.org"}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "values") {
		t.Errorf("Send with a recipient: err = %v, want internal naming the list", err)
	}
	// A call that does go out, so that an empty request sent by the failures above would be recorded.
	if err := b.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := b.fake.recorded(); len(calls) != 1 || calls[0].method != "Ping" {
		t.Errorf("implementation calls = %+v, want only Ping", calls)
	}
}

// TestLargeSend checks that a send with a 30 MiB attachment crosses the hop byte for byte, and that a
// message beyond rpc.MaxMessageBytes is refused by the client before sending and by the server before
// the core sees it.
func TestLargeSend(t *testing.T) {
	t.Parallel()
	b := setup(t, &fakeCore{sendResult: fullSendResult()})
	ctx := context.Background()

	content := make([]byte, 30<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>13)
	}
	req := ports.SendRequest{From: "a@mail.example.com", Attachments: []ports.Attachment{{Filename: "big.bin", Content: content}}}
	if _, err := b.client.Core().Emails.Send(ctx, "org1", req); err != nil {
		t.Fatalf("30 MiB send: %v", err)
	}
	calls := b.fake.recorded()
	if len(calls) != 1 {
		t.Fatalf("implementation calls = %d, want 1", len(calls))
	}
	if got := calls[0].args[1].(ports.SendRequest).Attachments[0].Content; !bytes.Equal(got, content) {
		t.Errorf("attachment arrived with %d bytes, differing from the %d sent", len(got), len(content))
	}

	huge := ports.SendRequest{Attachments: []ports.Attachment{{Content: make([]byte, rpc.MaxMessageBytes)}}}
	_, err := b.client.Core().Emails.Send(ctx, "org1", huge)
	if ports.ErrorCode(err) != ports.CodeInternal || connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("client over the limit: err = %v, want internal caused by resource_exhausted", err)
	}

	// A caller without the client's limit meets the server's.
	raw := emailv1connect.NewEmailServiceClient(b.server.Client(), b.server.URL)
	rawReq := connect.NewRequest(&emailv1.SendRequest{OrganizationId: "org1", Email: &emailv1.SendEmail{
		Attachments: &emailv1.AttachmentList{Items: []*emailv1.Attachment{{Content: make([]byte, rpc.MaxMessageBytes)}}},
	}})
	rawReq.Header().Set("Authorization", "Bearer "+testToken)
	_, err = raw.Send(ctx, rawReq)
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("server over the limit: err = %v, want resource_exhausted", err)
	}
	if calls := b.fake.recorded(); len(calls) != 1 {
		t.Errorf("implementation calls = %d, want only the 30 MiB send", len(calls))
	}
}

// boolPtrName names an optional setting in a test's name.
func boolPtrName(b *bool) string {
	if b == nil {
		return "unchanged"
	}
	return fmt.Sprint(*b)
}
