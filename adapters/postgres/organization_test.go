package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestOrganization_PauseAndPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	got, err := s.SetOrganizationPaused(ctx, a.org.ID, true)
	if err != nil {
		t.Fatalf("SetOrganizationPaused: %v", err)
	}
	if !got.Paused || got.ID != a.org.ID || got.Slug != a.org.Slug {
		t.Fatalf("SetOrganizationPaused returned %+v", got)
	}
	requireTime(t, "CreatedAt", &got.CreatedAt, baseTime)
	if reread, _ := s.Organization(ctx, a.org.ID); !reread.Paused {
		t.Fatal("pause not persisted")
	}

	plan := ports.Plan{MonthlyLimit: 50000, WarmupCap: 200}
	got, err = s.SetOrganizationPlan(ctx, a.org.ID, plan)
	if err != nil {
		t.Fatalf("SetOrganizationPlan: %v", err)
	}
	if got.Plan != plan || !got.Paused {
		t.Fatalf("SetOrganizationPlan returned %+v", got)
	}

	got, err = s.SetOrganizationPaused(ctx, a.org.ID, false)
	if err != nil || got.Paused || got.Plan != plan {
		t.Fatalf("resume: %+v, %v", got, err)
	}

	// Organization B is untouched by A's changes.
	other, err := s.Organization(ctx, b.org.ID)
	if err != nil {
		t.Fatal(err)
	}
	if other.Paused || other.Plan != b.org.Plan || other.ID != b.org.ID || other.Name != b.org.Name {
		t.Fatalf("organization B = %+v, want unchanged %+v", other, b.org)
	}

	for _, id := range []string{newID(), "not-a-uuid"} {
		_, err := s.Organization(ctx, id)
		if e := requireCode(t, err, ports.CodeNotFound); e.Message != "organization not found" {
			t.Fatalf("message = %q", e.Message)
		}
		_, err = s.SetOrganizationPaused(ctx, id, true)
		requireCode(t, err, ports.CodeNotFound)
		_, err = s.SetOrganizationPlan(ctx, id, plan)
		requireCode(t, err, ports.CodeNotFound)
	}
}

func TestListOrganizations_NewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)

	var want []string
	for _, offset := range []time.Duration{time.Hour, 3 * time.Hour, 2 * time.Hour} {
		u, org, m := signupInput(t)
		org.CreatedAt = baseTime.Add(offset)
		if err := s.CreateSignup(ctx, u, org, m); err != nil {
			t.Fatal(err)
		}
		want = append(want, org.ID)
	}
	want = []string{want[1], want[2], want[0]}

	got, err := s.ListOrganizations(ctx)
	if err != nil {
		t.Fatalf("ListOrganizations: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListOrganizations returned %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i] {
			t.Fatalf("organization %d = %s, want %s (newest first)", i, got[i].ID, want[i])
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	period := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

	v, err := s.Usage(ctx, a.org.ID, "emails_sent", period)
	if err != nil || v != 0 {
		t.Fatalf("Usage with no meter = %d, %v; want 0", v, err)
	}

	mustExec(t, s, `INSERT INTO usage_meters (organization_id, metric, period_start, value) VALUES ($1, 'emails_sent', '2026-11-01', 42)`, a.org.ID)

	cases := []struct {
		name   string
		org    string
		metric string
		start  time.Time
		want   int64
	}{
		{"metered period", a.org.ID, "emails_sent", period, 42},
		{"date as written in its own zone", a.org.ID, "emails_sent", time.Date(2026, 11, 1, 0, 0, 0, 0, time.FixedZone("plus5", 5*3600)), 42},
		{"other metric", a.org.ID, "emails_received", period, 0},
		{"previous period", a.org.ID, "emails_sent", period.AddDate(0, -1, 0), 0},
		{"other organization", b.org.ID, "emails_sent", period, 0},
		{"unknown organization", newID(), "emails_sent", period, 0},
		{"malformed organization id", "not-a-uuid", "emails_sent", period, 0},
	}
	for _, tc := range cases {
		v, err := s.Usage(ctx, tc.org, tc.metric, tc.start)
		if err != nil || v != tc.want {
			t.Errorf("%s: Usage = %d, %v; want %d", tc.name, v, err, tc.want)
		}
	}
}
