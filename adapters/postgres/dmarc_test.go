package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestDMARCReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	for _, org := range []string{a.org.ID, b.org.ID} {
		mustExec(t, s, `INSERT INTO domains (id, organization_id, name, status, dkim_selector, dkim_private_key, dkim_public_key, created_at)
			VALUES ($1, $2, 'shared.example', 'verified', 's', '\x00', 'p', now())`, newID(), org)
	}
	owners, err := s.OrganizationsOwningDomain(ctx, "shared.example")
	if err != nil || len(owners) != 2 {
		t.Fatalf("owners = %v, %v", owners, err)
	}
	end := time.Date(2026, 11, 25, 23, 59, 59, 0, time.UTC)
	r := ports.DMARCReport{
		ID: newID(), OrganizationID: a.org.ID, ReporterOrg: "google.com", ReportID: "42", Domain: "shared.example", Policy: "none",
		Begin: end.Add(-24 * time.Hour), End: end, ReceivedAt: end,
		Records: []ports.DMARCRecord{
			{SourceIP: "203.0.113.25", Count: 100, Disposition: "none", DKIMAligned: true, SPFAligned: true, DKIMResult: "pass", SPFResult: "pass"},
			{SourceIP: "198.51.100.7", Count: 4, Disposition: "reject", DKIMResult: "fail", SPFResult: "softfail"},
		},
	}
	if ok, err := s.InsertDMARCReport(ctx, r); err != nil || !ok {
		t.Fatalf("insert: %v, %v", ok, err)
	}
	// The same report mailed again is stored once.
	again := r
	again.ID = newID()
	if ok, err := s.InsertDMARCReport(ctx, again); err != nil || ok {
		t.Fatalf("second insert: %v, %v", ok, err)
	}
	sum, err := s.DMARCSummary(ctx, a.org.ID, end.Add(-48*time.Hour), "")
	if err != nil || len(sum) != 2 {
		t.Fatalf("summary = %+v, %v", sum, err)
	}
	if sum[0] != (ports.DMARCSourceSummary{Domain: "shared.example", Reporter: "google.com", SourceIP: "203.0.113.25", Messages: 100,
		DKIMAligned: 100, SPFAligned: 100, DMARCPass: 100, DKIMPass: 100, SPFPass: 100, None: 100}) {
		t.Errorf("first row = %+v", sum[0])
	}
	if sum[1].Reject != 4 || sum[1].DMARCPass != 0 {
		t.Errorf("second row = %+v", sum[1])
	}
	if sum, _ := s.DMARCSummary(ctx, a.org.ID, end.Add(time.Hour), ""); len(sum) != 0 {
		t.Errorf("outside the window: %+v", sum)
	}
	if sum, _ := s.DMARCSummary(ctx, a.org.ID, end.Add(-48*time.Hour), "other.example"); len(sum) != 0 {
		t.Errorf("another domain: %+v", sum)
	}
	// Tenancy: the other owner of the domain name sees nothing of a's copy.
	if sum, _ := s.DMARCSummary(ctx, b.org.ID, end.Add(-48*time.Hour), ""); len(sum) != 0 {
		t.Errorf("other organization sees %+v", sum)
	}
}
