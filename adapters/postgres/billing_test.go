package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestBillingSubscribePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)

	if id, _, err := s.SubscribedPlan(ctx, a.org.ID); err != nil || id != "" {
		t.Fatalf("SubscribedPlan before any = %q, %v; want \"\"", id, err)
	}
	org, err := s.SubscribePlan(ctx, a.org.ID, "pro", ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}, baseTime)
	if err != nil {
		t.Fatal(err)
	}
	if org.ID != a.org.ID || org.Plan != (ports.Plan{MonthlyLimit: 100000, WarmupCap: 500}) {
		t.Fatalf("SubscribePlan returned %+v", org)
	}
	got, err := s.Organization(ctx, a.org.ID)
	if err != nil || got.Plan != org.Plan {
		t.Fatalf("organization after subscribe: %+v, %v", got.Plan, err)
	}
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "pro" {
		t.Fatalf("SubscribedPlan = %q, want pro", id)
	}
	// A second subscription replaces the first.
	if _, err := s.SubscribePlan(ctx, a.org.ID, "free", ports.Plan{MonthlyLimit: 3000}, baseTime); err != nil {
		t.Fatal(err)
	}
	if id, _, _ := s.SubscribedPlan(ctx, a.org.ID); id != "free" {
		t.Fatalf("SubscribedPlan = %q, want free", id)
	}

	// Tenancy: the other organization's plan and limits are untouched.
	if id, _, _ := s.SubscribedPlan(ctx, b.org.ID); id != "" {
		t.Fatalf("other organization's plan = %q, want none", id)
	}
	if other, _ := s.Organization(ctx, b.org.ID); other.Plan != b.org.Plan {
		t.Fatalf("other organization's limits changed: %+v", other.Plan)
	}

	// An unknown organization is not_found and writes nothing.
	_, err = s.SubscribePlan(ctx, newID(), "pro", ports.Plan{}, baseTime)
	var pe *ports.Error
	if !errors.As(err, &pe) || pe.Code != ports.CodeNotFound {
		t.Fatalf("unknown organization: %v, want not_found", err)
	}
}
