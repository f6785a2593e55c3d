package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postmill/postmill/ports"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	const secret = "alice@example.test"
	cases := []struct {
		name       string
		in         error
		code       ports.Code
		constraint string
	}{
		{"no rows", pgx.ErrNoRows, ports.CodeNotFound, ""},
		{"wrapped no rows", fmt.Errorf("scan: %w", pgx.ErrNoRows), ports.CodeNotFound, ""},
		{"unique violation", &pgconn.PgError{Code: "23505", ConstraintName: "users_email_key",
			Message: "duplicate key value violates unique constraint", Detail: "Key (email)=(" + secret + ") already exists."},
			ports.CodeAlreadyExists, "users_email_key"},
		{"foreign key violation", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23503", ConstraintName: "api_keys_organization_id_fkey",
			Detail: "Key (organization_id)=(" + secret + ") is not present."}), ports.CodeInvalidArgument, "api_keys_organization_id_fkey"},
		{"invalid uuid text", &pgconn.PgError{Code: "22P02", Message: `invalid input syntax for type uuid: "` + secret + `"`},
			ports.CodeNotFound, ""},
		{"not null violation", &pgconn.PgError{Code: "23502", Message: "null value"}, ports.CodeInternal, ""},
		{"connection", errors.New("connection refused"), ports.CodeInternal, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := interpretError(tc.in)
			if got := ports.ErrorCode(err); got != tc.code {
				t.Fatalf("code = %q (%v), want %q", got, err, tc.code)
			}
			if e, ok := ports.AsError(err); ok {
				if e.Constraint != tc.constraint {
					t.Fatalf("constraint = %q, want %q", e.Constraint, tc.constraint)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q echoes a value", err)
				}
			} else if !errors.Is(err, tc.in) {
				t.Fatalf("internal error %v does not wrap the driver error", err)
			}
		})
	}
	if interpretError(nil) != nil {
		t.Fatal("interpretError(nil) != nil")
	}
}

func TestInterpretErrorFor(t *testing.T) {
	t.Parallel()
	err := interpretErrorFor("API key", pgx.ErrNoRows)
	if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeNotFound || e.Message != "API key not found" {
		t.Fatalf("interpretErrorFor = %v", err)
	}
	conflict := interpretErrorFor("API key", &pgconn.PgError{Code: "23505", ConstraintName: "api_keys_prefix_key"})
	if e, _ := ports.AsError(conflict); e == nil || e.Code != ports.CodeAlreadyExists || e.Constraint != "api_keys_prefix_key" {
		t.Fatalf("interpretErrorFor(conflict) = %v", conflict)
	}
	if interpretErrorFor("API key", nil) != nil {
		t.Fatal("interpretErrorFor(nil) != nil")
	}
}
