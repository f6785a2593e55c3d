package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func TestSMTPCredentials_CRUD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)

	older := mustInsertSMTPCredential(t, s, a.org.ID, baseTime)
	newer := mustInsertSMTPCredential(t, s, a.org.ID, baseTime.Add(time.Minute))

	list, err := s.ListSMTPCredentials(ctx, a.org.ID)
	if err != nil {
		t.Fatalf("ListSMTPCredentials: %v", err)
	}
	if len(list) != 2 || list[0].ID != newer.ID || list[1].ID != older.ID {
		t.Fatalf("ListSMTPCredentials = %+v, want newest first", list)
	}
	if g := list[1]; g != older {
		t.Fatalf("credential = %+v, want %+v", g, older)
	}

	got, err := s.SMTPCredentialByUsername(ctx, newer.Username)
	if err != nil {
		t.Fatalf("SMTPCredentialByUsername: %v", err)
	}
	if got != newer {
		t.Fatalf("SMTPCredentialByUsername = %+v, want %+v", got, newer)
	}

	if err := s.DeleteSMTPCredential(ctx, a.org.ID, newer.ID); err != nil {
		t.Fatalf("DeleteSMTPCredential: %v", err)
	}
	err = s.DeleteSMTPCredential(ctx, a.org.ID, newer.ID)
	if e := requireCode(t, err, ports.CodeNotFound); e.Message != "SMTP credential not found" {
		t.Fatalf("message = %q", e.Message)
	}
	requireCode(t, s.DeleteSMTPCredential(ctx, a.org.ID, "not-a-uuid"), ports.CodeNotFound)
	_, err = s.SMTPCredentialByUsername(ctx, newer.Username)
	requireCode(t, err, ports.CodeNotFound)

	list, err = s.ListSMTPCredentials(ctx, a.org.ID)
	if err != nil || len(list) != 1 || list[0].ID != older.ID {
		t.Fatalf("after delete: %+v, %v", list, err)
	}
}

func TestSMTPCredentials_Constraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)
	b := mustSignup(t, s)
	c := mustInsertSMTPCredential(t, s, a.org.ID, baseTime)

	// Usernames are unique across organizations: SMTP AUTH presents nothing else.
	dup := newSMTPCredential(t, b.org.ID, baseTime)
	dup.Username = c.Username
	requireConflict(t, s.InsertSMTPCredential(ctx, dup), "smtp_credentials_username_key", c.Username)

	orphan := newSMTPCredential(t, newID(), baseTime)
	e := requireCode(t, s.InsertSMTPCredential(ctx, orphan), ports.CodeInvalidArgument)
	if e.Constraint != "smtp_credentials_organization_id_fkey" {
		t.Fatalf("constraint = %q", e.Constraint)
	}
}
