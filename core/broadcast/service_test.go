package broadcast

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/core/marketing"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

const (
	orgA  = "00000000-0000-7000-8000-00000000000a"
	orgB  = "00000000-0000-7000-8000-00000000000b"
	topic = "00000000-0000-7000-8000-0000000000f1"
)

var now = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

type fixture struct {
	svc      *Service
	store    *fakeStore
	audience *fakeAudience
	emails   *fakeEmails
	keyring  *secret.Keyring
}

func newFixture(t *testing.T, contacts int) *fixture {
	t.Helper()
	k, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: newFakeStore(), audience: &fakeAudience{topic: topic, unsubscribed: map[string]string{}},
		emails: newFakeEmails(), keyring: k}
	for i := 1; i <= contacts; i++ {
		c := ports.AudienceContact{ID: contactID(i), Email: strings.Replace(contactID(i), "-", "", -1) + "@example.test",
			FirstName: "Ann", Properties: map[string]any{"plan": "pro"}}
		f.audience.contacts = append(f.audience.contacts, c)
		f.store.contacts[c.ID] = c.Email
	}
	f.svc, err = New(Config{BaseURL: "https://mail.example.test/", BatchSize: 7, Concurrency: 4},
		Deps{Store: f.store, Audience: f.audience, Domains: fakeDomains{}, Emails: f.emails, Keyring: k, Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) create(t *testing.T) ports.Broadcast {
	t.Helper()
	b, err := f.svc.CreateBroadcast(context.Background(), orgA, ports.NewBroadcast{
		Name: "November", Subject: "Hi {{ contact.firstName }}", From: "news@acme.test",
		HTML: "<p>Plan {{ contact.properties.plan }}</p>", TopicID: topic,
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return b
}

func TestCreate_Validation(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	cases := []struct {
		name string
		nb   ports.NewBroadcast
		path string
	}{
		{"no content", ports.NewBroadcast{Name: "n", Subject: "s", From: "a@acme.test"}, ""},
		{"both audiences", ports.NewBroadcast{Name: "n", Subject: "s", From: "a@acme.test", Text: "t", TopicID: topic, SegmentID: topic}, ""},
		{"subject CRLF", ports.NewBroadcast{Name: "n", Subject: "a\r\nBcc: x", From: "a@acme.test", Text: "t"}, "subject"},
		{"long name", ports.NewBroadcast{Name: strings.Repeat("n", 201), Subject: "s", From: "a@acme.test", Text: "t"}, "name"},
		{"bad from", ports.NewBroadcast{Name: "n", Subject: "s", From: "nope", Text: "t"}, "from"},
	}
	for _, c := range cases {
		_, err := f.svc.CreateBroadcast(ctx, orgA, c.nb)
		e, ok := ports.AsError(err)
		if !ok || e.Code != ports.CodeInvalidArgument || len(e.Details) == 0 || e.Details[0].Path != c.path {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	_, err := f.svc.CreateBroadcast(ctx, orgA, ports.NewBroadcast{Name: "n", Subject: "s", From: "a@pending.test", Text: "t"})
	if ports.ErrorMessage(err) != "domain pending.test is not verified" {
		t.Errorf("unverified domain: %v", err)
	}
	// Another organization's topic is a missing reference, not a way to probe it.
	_, err = f.svc.CreateBroadcast(ctx, orgB, ports.NewBroadcast{Name: "n", Subject: "s", From: "a@acme.test", Text: "t", TopicID: topic})
	if ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Errorf("foreign domain/topic: %v", err)
	}
	if len(f.store.broadcasts) != 0 {
		t.Fatalf("a refused create wrote %d broadcasts", len(f.store.broadcasts))
	}
}

func TestStates(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	b := f.create(t)
	if _, err := f.svc.CancelBroadcast(ctx, orgA, b.ID); ports.ErrorCode(err) != ports.CodeFailedPrecondition {
		t.Fatalf("cancel draft: %v", err)
	}
	if _, err := f.svc.ScheduleBroadcast(ctx, orgA, b.ID, now.Add(-time.Minute)); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("schedule in the past: %v", err)
	}
	s, err := f.svc.ScheduleBroadcast(ctx, orgA, b.ID, now.Add(time.Hour))
	if err != nil || s.Status != ports.BroadcastScheduled {
		t.Fatalf("schedule: %+v %v", s, err)
	}
	// A scheduled broadcast's time moves only into the future, as …/schedule takes it.
	past := now.Add(-time.Minute)
	if _, err := f.svc.UpdateBroadcast(ctx, orgA, b.ID, ports.BroadcastPatch{ScheduledAt: &past}); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("PATCH scheduledAt into the past: %v", err)
	}
	later := now.Add(2 * time.Hour)
	if m, err := f.svc.UpdateBroadcast(ctx, orgA, b.ID, ports.BroadcastPatch{ScheduledAt: &later}); err != nil || !m.ScheduledAt.Equal(later) || m.Status != ports.BroadcastScheduled {
		t.Fatalf("PATCH scheduledAt later: %+v %v", m, err)
	}
	// Clearing the time of a scheduled broadcast returns it to draft.
	d, err := f.svc.UpdateBroadcast(ctx, orgA, b.ID, ports.BroadcastPatch{ClearScheduledAt: true})
	if err != nil || d.Status != ports.BroadcastDraft || d.ScheduledAt != nil {
		t.Fatalf("clear scheduledAt: %+v %v", d, err)
	}
	if _, err := f.svc.ScheduleBroadcast(ctx, orgA, b.ID, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.CancelBroadcast(ctx, orgA, b.ID)
	if err != nil || c.Status != ports.BroadcastCanceled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); ports.ErrorCode(err) != ports.CodeFailedPrecondition {
		t.Fatalf("send canceled: %v", err)
	}
	// Without an audience a draft cannot be sent.
	b2 := f.create(t)
	if _, err := f.svc.UpdateBroadcast(ctx, orgA, b2.ID, ports.BroadcastPatch{ClearTopic: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SendBroadcast(ctx, orgA, b2.ID); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("send without audience: %v", err)
	}
	// Tenancy: another organization reaches none of them.
	if _, err := f.svc.GetBroadcast(ctx, orgB, b2.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign get: %v", err)
	}
	if _, err := f.svc.SendBroadcast(ctx, orgB, b2.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign send: %v", err)
	}
}

func TestListBroadcasts_Page(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	for range 3 {
		f.create(t)
	}
	all, err := f.svc.ListBroadcasts(ctx, orgA, 0, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("default page: %d %v", len(all), err)
	}
	page, err := f.svc.ListBroadcasts(ctx, orgA, 1, 1)
	if err != nil || len(page) != 1 || page[0].ID != all[1].ID {
		t.Fatalf("limit 1 offset 1: %+v %v", page, err)
	}
	for _, c := range []struct {
		limit, offset int
		path          string
	}{{101, 0, "limit"}, {-1, 0, "limit"}, {25, -1, "offset"}} {
		_, err := f.svc.ListBroadcasts(ctx, orgA, c.limit, c.offset)
		if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeInvalidArgument || len(e.Details) != 1 || e.Details[0].Path != c.path {
			t.Errorf("limit %d offset %d: %v", c.limit, c.offset, err)
		}
	}
	if other, err := f.svc.ListBroadcasts(ctx, orgB, 0, 0); err != nil || len(other) != 0 {
		t.Fatalf("another organization lists %d: %v", len(other), err)
	}
}

func TestExpander_OneMessagePerContactAcrossRestarts(t *testing.T) {
	f := newFixture(t, 30)
	ctx := context.Background()
	b := f.create(t)
	f.emails.suppressed[f.audience.contacts[4].Email] = true
	// The send path fails after 11 messages, as if the process died mid-batch: the second batch is not
	// recorded, and its first messages are already written.
	f.emails.failAfter = 11
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.ExpandOnce(ctx); err == nil {
		t.Fatal("the failing send path was not reported")
	}
	mid, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	// The first batch (7 contacts) is recorded; of the second, only the contacts before the first refused
	// send, whichever of the concurrent sends that was.
	if mid.Status != ports.BroadcastSending || mid.Cursor < contactID(7) || mid.Cursor >= contactID(14) {
		t.Fatalf("after the failure: status %s cursor %s", mid.Status, mid.Cursor)
	}
	f.emails.failAfter = -1
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	done, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	if done.Status != ports.BroadcastSent {
		t.Fatalf("status = %s", done.Status)
	}
	if n := len(f.emails.byKey); n != 29 {
		t.Fatalf("%d messages, want one per unsuppressed contact (29)", n)
	}
	rs := f.store.recipients[b.ID]
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.ContactID] {
			t.Fatalf("contact %s recorded twice", r.ContactID)
		}
		seen[r.ContactID] = true
	}
	if len(rs) != 30 || rs[4].Status != ports.BroadcastRecipientSuppressed || rs[4].MessageID != "" {
		t.Fatalf("recipients = %d, fifth = %+v", len(rs), rs[4])
	}
	// Content rendered per contact, with RFC 8058 headers carrying a token that opens to this contact.
	var req ports.SendRequest
	for _, r := range f.emails.requests {
		if r.To[0] == f.audience.contacts[0].Email {
			req = r
		}
	}
	if req.Subject != "Hi Ann" || req.HTML != "<p>Plan pro</p>" || req.Headers["List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" {
		t.Fatalf("request = %+v", req)
	}
	lu := req.Headers["List-Unsubscribe"]
	if !hasPrefix(lu, "<https://mail.example.test/p/u/") || !strings.HasSuffix(lu, ">") {
		t.Fatalf("List-Unsubscribe = %q", lu)
	}
	tok, err := marketing.OpenPublicToken(f.keyring, marketing.PurposeUnsubscribe, strings.TrimSuffix(strings.TrimPrefix(lu, "<https://mail.example.test/p/u/"), ">"))
	if err != nil || tok.OrganizationID != orgA || tok.BroadcastID != b.ID || tok.TopicID != topic || tok.ContactID != contactID(1) {
		t.Fatalf("token = %+v, %v", tok, err)
	}
}

func TestExpander_WarmupCapPausesUntilTomorrow(t *testing.T) {
	f := newFixture(t, 10)
	f.svc.cfg.Concurrency = 1 // so exactly the first three contacts fit under the cap
	ctx := context.Background()
	b := f.create(t)
	f.emails.capLeft = 3
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	p, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	tomorrow := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	if p.Status != ports.BroadcastSending || p.PausedUntil == nil || !p.PausedUntil.Equal(tomorrow) || p.Cursor != contactID(3) {
		t.Fatalf("paused = %+v", p)
	}
	// Paused: the next poll today does nothing.
	if err := f.svc.ExpandOnce(ctx); err != nil || len(f.emails.byKey) != 3 {
		t.Fatalf("paused broadcast sent: %d, %v", len(f.emails.byKey), err)
	}
	// Tomorrow it resumes after the last recorded contact.
	f.emails.capLeft = -1
	f.svc.deps.Clock = fixedClock{tomorrow.Add(time.Minute)}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if done, _ := f.store.GetBroadcast(ctx, orgA, b.ID); done.Status != ports.BroadcastSent || len(f.emails.byKey) != 10 {
		t.Fatalf("resumed = %+v, %d messages", done, len(f.emails.byKey))
	}
}

func TestUnsubscribe_PreviewChangesNothingAndTokensAreScoped(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	tok, err := marketing.SealPublicToken(f.keyring, marketing.PurposeUnsubscribe, marketing.PublicToken{
		OrganizationID: orgA, ContactID: contactID(1), TopicID: topic, BroadcastID: contactID(99), IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.svc.PreviewUnsubscribe(ctx, tok)
	if err != nil || v.TopicName != "News" || !strings.Contains(v.MaskedEmail, "•••@example.test") {
		t.Fatalf("preview = %+v, %v", v, err)
	}
	if len(f.audience.unsubscribed) != 0 {
		t.Fatal("preview unsubscribed")
	}
	if _, err := f.svc.Unsubscribe(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.audience.unsubscribed[contactID(1)]; !ok || got != topic || !f.store.unsubs[contactID(99)+"/"+contactID(1)] {
		t.Fatalf("unsubscribe did not reach the topic: %v", f.audience.unsubscribed)
	}
	// A confirm token, a tampered token and a token for another organization's contact all say the same.
	confirm, _ := marketing.SealPublicToken(f.keyring, marketing.PurposeConfirm, marketing.PublicToken{OrganizationID: orgA, ContactID: contactID(2), IssuedAt: now})
	foreign, _ := marketing.SealPublicToken(f.keyring, marketing.PurposeUnsubscribe, marketing.PublicToken{OrganizationID: orgB, ContactID: contactID(2), IssuedAt: now})
	for _, bad := range []string{confirm, foreign, tok[:len(tok)-2] + "AA", "", "x"} {
		if _, err := f.svc.Unsubscribe(ctx, bad); ports.ErrorMessage(err) != msgInvalidToken {
			t.Errorf("token %q: %v", bad, err)
		}
	}
	if _, ok := f.audience.unsubscribed[contactID(2)]; ok {
		t.Fatal("a bad token unsubscribed someone")
	}
}
