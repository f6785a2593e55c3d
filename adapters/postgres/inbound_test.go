package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func newInboundDomain(orgID, name string) ports.InboundDomain {
	return ports.InboundDomain{ID: newV7(), OrganizationID: orgID, Name: name, Status: ports.InboundPending,
		MXHost: "mx.postmill.test", MXPriority: 10, CreatedAt: baseTime}
}

// TestInboundDomainsAndRoutes: names are unique across organizations, every read and write is scoped to the
// organization, verifiedAt is kept once set, and deleting a domain deletes its routes.
func TestInboundDomainsAndRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	name := "in-" + randomHex(t, 4) + ".example.test"
	d := newInboundDomain(a.org.ID, name)
	if err := s.InsertInboundDomain(ctx, d); err != nil {
		t.Fatalf("InsertInboundDomain: %v", err)
	}
	requireConflict(t, s.InsertInboundDomain(ctx, newInboundDomain(b.org.ID, name)), "inbound_domains_name_key", name)

	if _, err := s.GetInboundDomain(ctx, b.org.ID, d.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's Get: %v, want not_found", err)
	}
	if got, _ := s.ListInboundDomains(ctx, b.org.ID); len(got) != 0 {
		t.Fatalf("other organization lists %d domains", len(got))
	}
	if _, err := s.SetInboundDomainStatus(ctx, b.org.ID, d.ID, ports.InboundSuspended); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's suspend: %v", err)
	}
	if err := s.DeleteInboundDomain(ctx, b.org.ID, d.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's delete: %v", err)
	}

	first := baseTime.Add(time.Hour)
	d.Status, d.VerifiedAt, d.LastCheckedAt = ports.InboundVerified, &first, &first
	if _, err := s.SaveInboundCheck(ctx, d); err != nil {
		t.Fatal(err)
	}
	later := first.Add(time.Hour)
	d.Status, d.VerifiedAt, d.LastCheckedAt = ports.InboundFailed, &later, &later
	got, err := s.SaveInboundCheck(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	requireTime(t, "verifiedAt", got.VerifiedAt, first)
	requireTime(t, "lastCheckedAt", got.LastCheckedAt, later)
	if byName, err := s.InboundDomainByName(ctx, name); err != nil || byName.ID != d.ID {
		t.Fatalf("InboundDomainByName = %+v, %v", byName, err)
	}

	r := ports.InboundRoute{ID: newV7(), OrganizationID: a.org.ID, InboundDomainID: d.ID, MatchType: ports.MatchCatchAll,
		Action: ports.ActionStore, Enabled: true, Priority: 100, CreatedAt: baseTime}
	if err := s.InsertRoute(ctx, r); err != nil {
		t.Fatalf("InsertRoute: %v", err)
	}
	// A route of organization b can never point at a's domain.
	rb := r
	rb.ID, rb.OrganizationID = newV7(), b.org.ID
	if err := s.InsertRoute(ctx, rb); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("route on another organization's domain: %v, want not_found", err)
	}
	if _, err := s.GetRoute(ctx, b.org.ID, r.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's GetRoute: %v", err)
	}
	if _, err := s.UpdateRoute(ctx, b.org.ID, r.ID, ports.InboundRoutePatch{}); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's UpdateRoute: %v", err)
	}
	if _, err := s.DeleteRoute(ctx, b.org.ID, r.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's DeleteRoute: %v", err)
	}
	if rs, _ := s.ListRoutes(ctx, b.org.ID, d.ID); len(rs) != 0 {
		t.Fatalf("other organization lists %d routes", len(rs))
	}
	off, prio := false, 7
	up, err := s.UpdateRoute(ctx, a.org.ID, r.ID, ports.InboundRoutePatch{Enabled: &off, Priority: &prio})
	if err != nil || up.Enabled || up.Priority != 7 || up.Destination != "" {
		t.Fatalf("UpdateRoute = %+v, %v", up, err)
	}
	if err := s.DeleteInboundDomain(ctx, a.org.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM inbound_routes WHERE inbound_domain_id = $1`, d.ID); n != 0 {
		t.Fatalf("%d routes left after the domain's deletion", n)
	}
}

// TestReceivedEmails: an email with attachments and its event is written once per recipient and message,
// read back whole, listed newest first, and invisible to another organization.
func TestReceivedEmails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	reply := "<parent@example.test>"
	e := ports.ReceivedEmail{ID: newV7(), OrganizationID: a.org.ID, InboundDomainID: newV7(), To: "x@in.example.test",
		From: "s@example.org", HeaderFrom: "s@example.org", HeaderFromName: "Sé", ToAddresses: []string{"x@in.example.test"},
		Subject: "hi", MessageID: "<m@example.org>", InReplyTo: &reply, SizeBytes: 123, SpamStatus: ports.SpamHam,
		ScanStatus: ports.ScanClean, Status: ports.ReceivedDeadLettered, ReceivedAt: baseTime, Text: "body", HTML: "<p>body</p>",
		Headers: map[string][]string{"Subject": {"hi"}, "Received": {"a", "b"}}, RawKey: "inbound/raw/k", DedupeKey: "k",
		Attachments: []ports.ReceivedAttachment{{ID: newV7(), Filename: "a.pdf", ContentType: "application/pdf", Size: 3,
			ScanStatus: ports.ScanClean, BlobKey: "inbound/part/p", ScannedAt: &baseTime},
			{ID: newV7(), Filename: "b.png", ContentType: "image/png", Size: 4, Inline: true, ContentID: "c@x",
				ScanStatus: ports.ScanClean, PartPath: "1.2.2", SHA256: "ab12", ScannedAt: &baseTime}}}
	ev := ports.Event{ID: newV7(), Type: ports.EventEmailReceived, OccurredAt: baseTime}
	ok, _, err := s.InsertReceived(ctx, e, []ports.Event{ev})
	if err != nil || !ok {
		t.Fatalf("InsertReceived = %v, %v", ok, err)
	}
	dup := e
	dup.ID = newV7()
	ok, existing, err := s.InsertReceived(ctx, dup, []ports.Event{{ID: newV7(), Type: ports.EventEmailReceived, OccurredAt: baseTime}})
	if err != nil || ok || existing != e.ID {
		t.Fatalf("duplicate InsertReceived = %v, %q, %v; want false, %q", ok, existing, err, e.ID)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE message_id = $1 AND type = 'email.received'`, e.ID); n != 1 {
		t.Fatalf("%d email.received events, want 1", n)
	}
	got, err := s.GetReceived(ctx, a.org.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "body" || got.HTML != "<p>body</p>" || len(got.Headers["Received"]) != 2 || *got.InReplyTo != reply ||
		got.References != nil || len(got.Attachments) != 2 || got.Attachments[0].BlobKey != "inbound/part/p" || got.RawKey != "inbound/raw/k" {
		t.Fatalf("GetReceived = %+v", got)
	}
	// An attachment kept as a blob of its own and one derived from the raw message both read back as written.
	if a, p := got.Attachments[0], got.Attachments[1]; a.PartPath != "" || a.SHA256 != "" || p.BlobKey != "" ||
		p.PartPath != "1.2.2" || p.SHA256 != "ab12" || !p.Inline || p.ContentID != "c@x" || !a.Downloadable() || !p.Downloadable() {
		t.Fatalf("attachments = %+v", got.Attachments)
	}
	if _, err := s.GetReceived(ctx, b.org.ID, e.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's GetReceived: %v", err)
	}
	if l, _ := s.ListReceived(ctx, b.org.ID, 25, 0); len(l) != 0 {
		t.Fatalf("other organization lists %d", len(l))
	}
	newer := e
	newer.ID, newer.DedupeKey, newer.ReceivedAt, newer.Attachments = newV7(), "k2", baseTime.Add(time.Minute), nil
	if _, _, err := s.InsertReceived(ctx, newer, nil); err != nil {
		t.Fatal(err)
	}
	l, err := s.ListReceived(ctx, a.org.ID, 25, 0)
	if err != nil || len(l) != 2 || l[0].ID != newer.ID {
		t.Fatalf("ListReceived = %d rows, %v", len(l), err)
	}
	if l, _ := s.ListReceived(ctx, a.org.ID, 1, 1); len(l) != 1 || l[0].ID != e.ID {
		t.Fatalf("offset 1 = %+v", l)
	}
	if err := s.SetForwardStatus(ctx, b.org.ID, e.ID, ports.ForwardSent); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("other organization's SetForwardStatus: %v", err)
	}
}

// TestLocalDNSPublishesInboundMX: local mode's DNS server answers an inbound domain's MX with the inbound MX
// host, so verifying it against local DNS passes.
func TestLocalDNSPublishesInboundMX(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	d := newInboundDomain(a.org.ID, "in-"+randomHex(t, 4)+".example.test")
	if err := s.InsertInboundDomain(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := s.LocalDNS().PublishedDomains(ctx, []string{d.Name, "nothing.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != d.Name || len(got[0].MX) != 1 || got[0].MX[0] != (ports.MX{Host: "mx.postmill.test", Preference: 10}) {
		t.Fatalf("published = %+v", got)
	}
}
