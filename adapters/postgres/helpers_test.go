package postgres_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// baseTime has microsecond precision, like timestamptz, so stored times compare equal to the originals.
var baseTime = time.Date(2026, 11, 21, 9, 30, 0, 123456000, time.UTC)

type account struct {
	user ports.User
	org  ports.Organization
}

func newID() string { return uuid.NewString() }

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

func hashOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// signupInput builds a user, organization and owner membership with unique email and slug.
func signupInput(tb testing.TB) (ports.User, ports.Organization, ports.Membership) {
	tb.Helper()
	tag := randomHex(tb, 6)
	u := ports.User{
		ID:           newID(),
		Email:        "user-" + tag + "@example.test",
		PasswordHash: "$argon2id$v=19$m=65536,t=1,p=2$c2FsdA$aGFzaA",
		CreatedAt:    baseTime,
	}
	org := ports.Organization{
		ID:        newID(),
		Name:      "Org " + tag,
		Slug:      "org-" + tag,
		CreatedAt: baseTime,
		Plan:      ports.Plan{MonthlyLimit: 3000},
	}
	m := ports.Membership{UserID: u.ID, OrganizationID: org.ID, Role: "owner", CreatedAt: baseTime}
	return u, org, m
}

func mustSignup(tb testing.TB, s *postgres.Store) account {
	tb.Helper()
	u, org, m := signupInput(tb)
	if err := s.CreateSignup(context.Background(), u, org, m); err != nil {
		tb.Fatalf("CreateSignup: %v", err)
	}
	return account{user: u, org: org}
}

func newAPIKey(tb testing.TB, orgID string, createdAt time.Time) ports.APIKey {
	tb.Helper()
	prefix := randomHex(tb, 8)
	return ports.APIKey{
		ID:             newID(),
		OrganizationID: orgID,
		Name:           "key " + prefix,
		Prefix:         prefix,
		TokenHash:      hashOf("svc_live_" + prefix + ".secret"),
		Scopes:         []string{ports.ScopeEmailsSend, ports.ScopeWebhooksRead},
		ScopesEnforced: true,
		CreatedAt:      createdAt,
	}
}

func mustInsertAPIKey(tb testing.TB, s *postgres.Store, orgID string, createdAt time.Time) ports.APIKey {
	tb.Helper()
	k := newAPIKey(tb, orgID, createdAt)
	if err := s.InsertAPIKey(context.Background(), k); err != nil {
		tb.Fatalf("InsertAPIKey: %v", err)
	}
	return k
}

func newSMTPCredential(tb testing.TB, orgID string, createdAt time.Time) ports.SMTPCredential {
	tb.Helper()
	return ports.SMTPCredential{
		ID:             newID(),
		OrganizationID: orgID,
		Username:       "smtp_" + randomHex(tb, 8),
		PasswordHash:   "$argon2id$v=19$m=65536,t=1,p=2$c2FsdA$cHc",
		Host:           "smtp.postmill.local",
		Port:           1587,
		CreatedAt:      createdAt,
	}
}

func mustInsertSMTPCredential(tb testing.TB, s *postgres.Store, orgID string, createdAt time.Time) ports.SMTPCredential {
	tb.Helper()
	c := newSMTPCredential(tb, orgID, createdAt)
	if err := s.InsertSMTPCredential(context.Background(), c); err != nil {
		tb.Fatalf("InsertSMTPCredential: %v", err)
	}
	return c
}

func mustExec(tb testing.TB, s *postgres.Store, sql string, args ...any) {
	tb.Helper()
	if _, err := s.Pool().Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("exec %q: %v", sql, err)
	}
}

// requireCode fails unless err carries the wanted ports code.
func requireCode(tb testing.TB, err error, want ports.Code) *ports.Error {
	tb.Helper()
	if got := ports.ErrorCode(err); got != want {
		tb.Fatalf("error code = %q (%v), want %q", got, err, want)
	}
	e, _ := ports.AsError(err)
	return e
}

// requireConflict fails unless err is already_exists naming constraint and not echoing any of values.
func requireConflict(tb testing.TB, err error, constraint string, values ...string) {
	tb.Helper()
	e := requireCode(tb, err, ports.CodeAlreadyExists)
	if e.Constraint != constraint {
		tb.Fatalf("constraint = %q, want %q", e.Constraint, constraint)
	}
	for _, v := range values {
		if strings.Contains(err.Error(), v) || strings.Contains(e.Message, v) {
			tb.Fatalf("error %q echoes the conflicting value %q", err, v)
		}
	}
}

func requireTime(tb testing.TB, name string, got *time.Time, want time.Time) {
	tb.Helper()
	if got == nil {
		tb.Fatalf("%s = nil, want %v", name, want)
	}
	if !got.Equal(want) {
		tb.Fatalf("%s = %v, want %v", name, *got, want)
	}
	if got.Location() != time.UTC {
		tb.Fatalf("%s location = %v, want UTC", name, got.Location())
	}
}

// singleConnectionStore opens a migrated store on a database of its own whose pool holds one connection, so
// that every call runs on the connection whose prepared statements a test then reads.
func singleConnectionStore(tb testing.TB) *postgres.Store {
	tb.Helper()
	ctx := context.Background()
	dsn := pgtest.URL(tb)
	if strings.Contains(dsn, "://") {
		dsn += "&pool_max_conns=1" // URL carries search_path already
	} else {
		dsn += " pool_max_conns=1"
	}
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	if err := postgres.Migrate(ctx, s.Pool()); err != nil {
		tb.Fatal(err)
	}
	return s
}
