package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func newV7() string { return uuid.Must(uuid.NewV7()).String() }

// newDomain builds a pending domain with the five records of SPEC §2 in generation order.
func newDomain(tb testing.TB, orgID, name string, createdAt time.Time) ports.Domain {
	tb.Helper()
	id := newV7()
	selector := "pm" + randomHex(tb, 5)
	rec := func(typ, host, value string, required bool) ports.DNSRecord {
		return ports.DNSRecord{ID: newV7(), DomainID: id, Type: typ, Host: host, Value: value, TTL: 3600, Required: required}
	}
	return ports.Domain{
		ID:             id,
		OrganizationID: orgID,
		Name:           name,
		Status:         ports.DomainPending,
		DKIMSelector:   selector,
		DKIMPrivateKey: []byte("sealed-" + randomHex(tb, 8)),
		DKIMPublicKey:  "MIIBIjANBgkqh" + randomHex(tb, 8),
		CreatedAt:      createdAt,
		Records: []ports.DNSRecord{
			rec(ports.RecordSPF, name, "v=spf1 include:spf.postmill.test ~all", true),
			rec(ports.RecordDKIM, selector+"._domainkey."+name, "v=DKIM1; k=rsa; p=MIIB", true),
			rec(ports.RecordDMARC, "_dmarc."+name, "v=DMARC1; p=quarantine; rua=mailto:dmarc@postmill.test; fo=1", false),
			rec(ports.RecordReturnPath, "bounce."+name, "bounce.postmill.test", true),
			rec(ports.RecordTracking, "track."+name, "track.postmill.test", false),
		},
	}
}

func domainCreated(d ports.Domain) ports.Event {
	return ports.Event{ID: newV7(), OrganizationID: d.OrganizationID, Type: ports.EventDomainCreated, DomainID: d.ID, OccurredAt: d.CreatedAt}
}

// mustDomain inserts a verified domain, ready to send from.
func mustDomain(tb testing.TB, s *postgres.Store, orgID string) ports.Domain {
	tb.Helper()
	d := newDomain(tb, orgID, "mail-"+randomHex(tb, 4)+".example.test", baseTime)
	d.Status = ports.DomainVerified
	if err := s.InsertDomain(context.Background(), d, domainCreated(d)); err != nil {
		tb.Fatalf("InsertDomain: %v", err)
	}
	return d
}

func countRows(tb testing.TB, s *postgres.Store, sql string, args ...any) int {
	tb.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("count %q: %v", sql, err)
	}
	return n
}

func TestDomain_InsertGetList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	older := newDomain(t, a.org.ID, "older.example.test", baseTime)
	older.Region = "eu-west-1"
	newer := newDomain(t, a.org.ID, "newer.example.test", baseTime.Add(time.Hour))
	for _, d := range []ports.Domain{older, newer} {
		if err := s.InsertDomain(ctx, d, domainCreated(d)); err != nil {
			t.Fatalf("InsertDomain(%s): %v", d.Name, err)
		}
	}

	got, err := s.GetDomain(ctx, a.org.ID, older.ID)
	if err != nil {
		t.Fatalf("GetDomain: %v", err)
	}
	if got.Name != older.Name || got.Status != ports.DomainPending || got.Region != "eu-west-1" ||
		got.DKIMSelector != older.DKIMSelector || string(got.DKIMPrivateKey) != string(older.DKIMPrivateKey) ||
		got.DKIMPublicKey != older.DKIMPublicKey || got.VerifiedAt != nil || got.OrganizationID != a.org.ID {
		t.Fatalf("GetDomain = %+v", got)
	}
	requireTime(t, "CreatedAt", &got.CreatedAt, baseTime)
	if len(got.Records) != 5 {
		t.Fatalf("records = %d, want 5", len(got.Records))
	}
	for i, r := range got.Records {
		want := older.Records[i]
		if r.ID != want.ID || r.Type != want.Type || r.Host != want.Host || r.Value != want.Value || r.TTL != 3600 ||
			r.Required != want.Required || r.Verified || r.CheckedAt != nil || r.DomainID != older.ID {
			t.Fatalf("record %d = %+v, want %+v (generation order kept)", i, r, want)
		}
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE domain_id = $1 AND type = 'domain.created'`, older.ID); n != 1 {
		t.Fatalf("domain.created events = %d, want 1", n)
	}

	// The default region applies when none is given.
	if got, _ := s.GetDomain(ctx, a.org.ID, newer.ID); got.Region != "us-east-1" {
		t.Fatalf("default region = %q", got.Region)
	}

	list, err := dataOf(s.ListDomains(ctx, a.org.ID, ports.Unpaged()))
	if err != nil || len(list) != 2 || list[0].ID != newer.ID || list[1].ID != older.ID {
		t.Fatalf("ListDomains = %+v (%v), want newer then older", list, err)
	}
	if list[0].Records != nil {
		t.Fatalf("ListDomains carries records: %+v", list[0].Records)
	}

	byName, err := s.DomainByName(ctx, a.org.ID, "newer.example.test")
	if err != nil || byName.ID != newer.ID || byName.Records != nil {
		t.Fatalf("DomainByName = %+v (%v)", byName, err)
	}

	// The name is unique per organization, not across organizations.
	dup := newDomain(t, a.org.ID, older.Name, baseTime)
	requireConflict(t, s.InsertDomain(ctx, dup, domainCreated(dup)), "domains_org_name_key", older.Name)
	if n := countRows(t, s, `SELECT count(*) FROM dns_records WHERE domain_id = $1`, dup.ID); n != 0 {
		t.Fatalf("a refused domain left %d records", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE domain_id = $1`, dup.ID); n != 0 {
		t.Fatalf("a refused domain left %d events", n)
	}
	other := newDomain(t, b.org.ID, older.Name, baseTime)
	if err := s.InsertDomain(ctx, other, domainCreated(other)); err != nil {
		t.Fatalf("same name in another organization: %v", err)
	}

	for _, id := range []string{newV7(), "not-a-uuid"} {
		_, err := s.GetDomain(ctx, a.org.ID, id)
		if e := requireCode(t, err, ports.CodeNotFound); e.Message != "domain not found" {
			t.Fatalf("message = %q", e.Message)
		}
	}
	_, err = s.DomainByName(ctx, a.org.ID, "missing.example.test")
	requireCode(t, err, ports.CodeNotFound)
}

func TestDomain_SaveVerification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	d := newDomain(t, a.org.ID, "verify.example.test", baseTime)
	if err := s.InsertDomain(ctx, d, domainCreated(d)); err != nil {
		t.Fatal(err)
	}

	// First run: everything but DMARC resolves.
	first := baseTime.Add(time.Minute)
	d.Status = ports.DomainVerified
	d.VerifiedAt = &first
	for i := range d.Records {
		d.Records[i].Verified = d.Records[i].Type != ports.RecordDMARC
		d.Records[i].CheckedAt = &first
	}
	verified := ports.Event{ID: newV7(), OrganizationID: a.org.ID, Type: ports.EventDomainVerified, DomainID: d.ID, OccurredAt: first}
	if err := s.SaveVerification(ctx, d, []ports.Event{verified}); err != nil {
		t.Fatalf("SaveVerification: %v", err)
	}
	got, err := s.GetDomain(ctx, a.org.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ports.DomainVerified {
		t.Fatalf("status = %q", got.Status)
	}
	requireTime(t, "VerifiedAt", got.VerifiedAt, first)
	for _, r := range got.Records {
		if r.Verified != (r.Type != ports.RecordDMARC) {
			t.Fatalf("record %s verified = %v", r.Type, r.Verified)
		}
		requireTime(t, "CheckedAt", r.CheckedAt, first)
	}

	// A later failing run updates the records but never moves verifiedAt; a record the run did not check
	// keeps its previous check time.
	second := first.Add(time.Hour)
	d.VerifiedAt = &second
	for i := range d.Records {
		d.Records[i].Verified = false
		d.Records[i].CheckedAt = &second
	}
	d.Records[4].CheckedAt = nil
	failed := ports.Event{ID: newV7(), OrganizationID: a.org.ID, Type: ports.EventDomainFailed, DomainID: d.ID, OccurredAt: second}
	if err := s.SaveVerification(ctx, d, []ports.Event{failed}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetDomain(ctx, a.org.ID, d.ID)
	requireTime(t, "VerifiedAt after a later run", got.VerifiedAt, first)
	for i, r := range got.Records {
		want := second
		if i == 4 {
			want = first
		}
		if r.Verified {
			t.Fatalf("record %s still verified", r.Type)
		}
		requireTime(t, "CheckedAt "+r.Type, r.CheckedAt, want)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE domain_id = $1 AND type IN ('domain.verified', 'domain.failed')`, d.ID); n != 2 {
		t.Fatalf("verification events = %d, want 2", n)
	}

	// A suspend that lands while a run is under way: the run's "failed" does not undo it, a run that finds
	// every required record does (SPEC §3).
	if _, err := s.SetDomainStatus(ctx, a.org.ID, d.ID, ports.DomainSuspended); err != nil {
		t.Fatal(err)
	}
	d.Status = ports.DomainFailed
	if err := s.SaveVerification(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.GetDomain(ctx, a.org.ID, d.ID); got.Status != ports.DomainSuspended {
		t.Fatalf("a failing run moved a suspended domain to %q", got.Status)
	}
	d.Status = ports.DomainVerified
	if err := s.SaveVerification(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.GetDomain(ctx, a.org.ID, d.ID); got.Status != ports.DomainVerified {
		t.Fatalf("a verifying run left the domain %q", got.Status)
	}

	// Unknown domain: not_found and nothing written.
	ghost := d
	ghost.ID = newV7()
	lost := ports.Event{ID: newV7(), OrganizationID: a.org.ID, Type: ports.EventDomainFailed, DomainID: ghost.ID, OccurredAt: second}
	requireCode(t, s.SaveVerification(ctx, ghost, []ports.Event{lost}), ports.CodeNotFound)
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE id = $1`, lost.ID); n != 0 {
		t.Fatal("SaveVerification of an unknown domain wrote its event")
	}
}

func TestDomain_SetDomainStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	d := mustDomain(t, s, a.org.ID)

	got, err := s.SetDomainStatus(ctx, a.org.ID, d.ID, ports.DomainSuspended)
	if err != nil {
		t.Fatalf("SetDomainStatus: %v", err)
	}
	if got.Status != ports.DomainSuspended || got.ID != d.ID || len(got.Records) != 5 {
		t.Fatalf("SetDomainStatus = %+v", got)
	}
	if reread, _ := s.DomainByName(ctx, a.org.ID, d.Name); reread.Status != ports.DomainSuspended {
		t.Fatalf("status after suspend = %q", reread.Status)
	}
	for _, id := range []string{newV7(), "not-a-uuid"} {
		_, err := s.SetDomainStatus(ctx, a.org.ID, id, ports.DomainSuspended)
		requireCode(t, err, ports.CodeNotFound)
	}
}

// TestCrossOrganization_Domains: organization B can neither see nor change A's domains, and its answers are
// those for a domain that does not exist.
func TestCrossOrganization_Domains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	d := mustDomain(t, s, a.org.ID)

	if list, err := dataOf(s.ListDomains(ctx, b.org.ID, ports.Unpaged())); err != nil || len(list) != 0 {
		t.Fatalf("B lists %d domains (%v), want none", len(list), err)
	}
	_, err := s.GetDomain(ctx, b.org.ID, d.ID)
	requireCode(t, err, ports.CodeNotFound)
	_, err = s.DomainByName(ctx, b.org.ID, d.Name)
	requireCode(t, err, ports.CodeNotFound)
	_, err = s.SetDomainStatus(ctx, b.org.ID, d.ID, ports.DomainSuspended)
	requireCode(t, err, ports.CodeNotFound)
	if held, taken, err := s.DomainsHeld(ctx, a.org.ID, d.Name); err != nil || held != 1 || !taken {
		t.Fatalf("A holds %d domains, %s taken %v (%v); want 1, true", held, d.Name, taken, err)
	}
	if held, taken, err := s.DomainsHeld(ctx, a.org.ID, "other."+d.Name); err != nil || held != 1 || taken {
		t.Fatalf("A holds %d, another name taken %v (%v); want 1, false", held, taken, err)
	}
	if held, taken, err := s.DomainsHeld(ctx, b.org.ID, d.Name); err != nil || held != 0 || taken {
		t.Fatalf("B holds %d domains, A's name taken %v (%v); want 0, false", held, taken, err)
	}

	asB := d
	asB.OrganizationID = b.org.ID
	asB.Status = ports.DomainFailed
	for i := range asB.Records {
		asB.Records[i].Verified = false
	}
	requireCode(t, s.SaveVerification(ctx, asB, nil), ports.CodeNotFound)

	got, err := s.GetDomain(ctx, a.org.ID, d.ID)
	if err != nil || got.Status != ports.DomainVerified {
		t.Fatalf("A's domain after B's attempts: %+v (%v)", got, err)
	}
}
