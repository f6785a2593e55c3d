package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestSuppressedAmong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	for _, sup := range []ports.Suppression{
		{OrganizationID: a.org.ID, Address: "Bounced@Example.org", Scope: ports.SuppressionScopeTenant, Reason: ports.SuppressionBounce},
		{OrganizationID: a.org.ID, Address: "blocked.example", Scope: ports.SuppressionScopeDomain, Reason: ports.SuppressionManual},
		{OrganizationID: a.org.ID, Address: "one@recipient.example", Scope: ports.SuppressionScopeRecipient, Reason: ports.SuppressionComplaint},
		{OrganizationID: "", Address: "global@example.org", Scope: ports.SuppressionScopeGlobal, Reason: ports.SuppressionInvalid},
		{OrganizationID: "", Address: "spamtrap.example", Scope: ports.SuppressionScopeGlobal, Reason: ports.SuppressionManual},
		{OrganizationID: b.org.ID, Address: "only-b@example.org", Scope: ports.SuppressionScopeTenant, Reason: ports.SuppressionBounce},
		{OrganizationID: b.org.ID, Address: "b-domain.example", Scope: ports.SuppressionScopeDomain, Reason: ports.SuppressionManual},
	} {
		if err := s.AddSuppression(ctx, sup); err != nil {
			t.Fatalf("AddSuppression(%+v): %v", sup, err)
		}
	}

	addresses := []string{
		"bounced@example.org",    // A's address suppression, stored lower-cased
		"anyone@blocked.example", // A's domain suppression
		"one@recipient.example",  // A's recipient-scope row
		"global@example.org",     // global address
		"x@spamtrap.example",     // global domain
		"only-b@example.org",     // B's: must not apply to A
		"y@b-domain.example",     // B's domain: must not apply to A
		"fine@example.org",
		"blocked.example@other.example", // the domain is the part after "@"
	}
	got, err := s.SuppressedAmong(ctx, a.org.ID, addresses)
	if err != nil {
		t.Fatalf("SuppressedAmong: %v", err)
	}
	want := map[string]bool{
		"bounced@example.org": true, "anyone@blocked.example": true, "one@recipient.example": true,
		"global@example.org": true, "x@spamtrap.example": true,
	}
	if len(got) != len(want) {
		t.Fatalf("suppressed = %v, want %v", got, want)
	}
	for addr := range want {
		if !got[addr] {
			t.Fatalf("%s not reported suppressed (got %v)", addr, got)
		}
	}

	// From B's side only B's rows and the global ones count.
	got, err = s.SuppressedAmong(ctx, b.org.ID, addresses)
	if err != nil {
		t.Fatal(err)
	}
	wantB := []string{"only-b@example.org", "y@b-domain.example", "global@example.org", "x@spamtrap.example"}
	if len(got) != len(wantB) {
		t.Fatalf("B's suppressed = %v, want %v", got, wantB)
	}
	for _, addr := range wantB {
		if !got[addr] {
			t.Fatalf("B: %s not suppressed (got %v)", addr, got)
		}
	}

	if got, err := s.SuppressedAmong(ctx, a.org.ID, nil); err != nil || len(got) != 0 {
		t.Fatalf("no addresses = %v, %v", got, err)
	}

	// Concurrent calls share one query; each address is still checked against its own call's organization,
	// and a call that fails (an organization id that is not a UUID) fails alone.
	answers := s.ReadSuppressedGroup(ctx,
		postgres.SuppressedCall{OrgID: a.org.ID, Addresses: addresses},
		postgres.SuppressedCall{OrgID: b.org.ID, Addresses: addresses},
		postgres.SuppressedCall{OrgID: a.org.ID, Addresses: []string{"fine@example.org"}},
	)
	if len(answers[0].Found) != len(want) || answers[0].Err != nil {
		t.Fatalf("A in a group = %v, %v; want %v", answers[0].Found, answers[0].Err, want)
	}
	for addr := range want {
		if !answers[0].Found[addr] {
			t.Fatalf("A in a group: %s not suppressed (got %v)", addr, answers[0].Found)
		}
	}
	if len(answers[1].Found) != len(wantB) || answers[1].Err != nil {
		t.Fatalf("B in a group = %v, %v; want %v", answers[1].Found, answers[1].Err, wantB)
	}
	for _, addr := range wantB {
		if !answers[1].Found[addr] {
			t.Fatalf("B in a group: %s not suppressed (got %v)", addr, answers[1].Found)
		}
	}
	if len(answers[2].Found) != 0 || answers[2].Err != nil {
		t.Fatalf("A's clean address in a group = %v, %v", answers[2].Found, answers[2].Err)
	}
	// A call with more addresses than a shared query takes (a bulk send's) is answered by a query of its own.
	many := make([]string, 0, 1501)
	for i := range 1500 {
		many = append(many, fmt.Sprintf("fine%d@example.org", i))
	}
	many = append(many, "x@spamtrap.example")
	if got, err := s.SuppressedAmong(ctx, a.org.ID, many); err != nil || len(got) != 1 || !got["x@spamtrap.example"] {
		t.Fatalf("1,501 addresses: %v, %v; want only the global domain's address", got, err)
	}
	bad := s.ReadSuppressedGroup(ctx,
		postgres.SuppressedCall{OrgID: "not-a-uuid", Addresses: addresses},
		postgres.SuppressedCall{OrgID: b.org.ID, Addresses: []string{"only-b@example.org", "fine@example.org"}},
	)
	if bad[0].Err == nil {
		t.Fatalf("a call with a malformed organization id answered %v, want an error", bad[0].Found)
	}
	if len(bad[1].Found) != 1 || !bad[1].Found["only-b@example.org"] || bad[1].Err != nil {
		t.Fatalf("B beside a failing call = %v, %v", bad[1].Found, bad[1].Err)
	}
}

func TestAddSuppression_Idempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)

	add := func(orgID, addr, scope string) {
		t.Helper()
		if err := s.AddSuppression(ctx, ports.Suppression{OrganizationID: orgID, Address: addr, Scope: scope, Reason: ports.SuppressionBounce}); err != nil {
			t.Fatalf("AddSuppression: %v", err)
		}
	}
	for range 3 {
		add(a.org.ID, "Repeat@Example.org", ports.SuppressionScopeTenant)
		add("", "repeat@example.org", ports.SuppressionScopeGlobal)
	}
	add(a.org.ID, "repeat@example.org", ports.SuppressionScopeRecipient) // another scope: another row
	add(b.org.ID, "repeat@example.org", ports.SuppressionScopeTenant)    // another organization: another row
	if n := countRows(t, s, `SELECT count(*) FROM suppressions WHERE address = 'repeat@example.org'`); n != 4 {
		t.Fatalf("rows = %d, want 4 (one per organization and scope)", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM suppressions WHERE organization_id IS NULL`); n != 1 {
		t.Fatalf("global rows = %d, want 1", n)
	}
	// Defaults: tenant scope, manual reason.
	if err := s.AddSuppression(ctx, ports.Suppression{OrganizationID: a.org.ID, Address: "default@example.org"}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM suppressions WHERE address = 'default@example.org' AND scope = 'tenant' AND reason = 'manual'`); n != 1 {
		t.Fatal("defaults not applied")
	}
}
