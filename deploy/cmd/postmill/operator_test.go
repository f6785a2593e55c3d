package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

var (
	operatorNow = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	oldMaster   = []byte("operator test master secret, the old one")
	newMaster   = []byte("operator test master secret, the new one")
)

func mustKeyring(tb testing.TB, masters ...[]byte) *secret.Keyring {
	tb.Helper()
	k, err := secret.NewKeyring(masters...)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// mustUser signs up a user with email and returns its user and organization ids.
func mustUser(tb testing.TB, st *postgres.Store, email string) (string, string) {
	tb.Helper()
	u := ports.User{ID: uuid.NewString(), Email: email, PasswordHash: "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", CreatedAt: operatorNow}
	org := ports.Organization{ID: uuid.NewString(), Name: email, Slug: "org-" + u.ID[:8], CreatedAt: operatorNow}
	m := ports.Membership{UserID: u.ID, OrganizationID: org.ID, Role: "owner", CreatedAt: operatorNow}
	if err := st.CreateSignup(context.Background(), u, org, m); err != nil {
		tb.Fatal(err)
	}
	return u.ID, org.ID
}

func TestAdminGrantRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t)
	id, _ := mustUser(t, st, "ops@example.com")
	var out bytes.Buffer
	if err := setAdmin(ctx, st.Accounts, true, " OPS@Example.com ", &out); err != nil {
		t.Fatal(err)
	}
	if u, _ := st.UserByID(ctx, id); !u.IsAdmin {
		t.Fatal("grant did not make the user an admin")
	}
	if err := setAdmin(ctx, st.Accounts, false, "ops@example.com", &out); err != nil {
		t.Fatal(err)
	}
	if u, _ := st.UserByID(ctx, id); u.IsAdmin {
		t.Fatal("revoke left the user an admin")
	}
	if got := out.String(); got != "platform admin granted to ops@example.com\nplatform admin withdrawn from ops@example.com\n" {
		t.Errorf("output %q", got)
	}
	if err := setAdmin(ctx, st.Accounts, true, "nobody@example.com", &out); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Errorf("unknown email: %v", err)
	}
	if err := runAdmin(app.Config{}, []string{"promote", "x@example.com"}, &out); err == nil {
		t.Error("an unknown subcommand was accepted")
	}
	if err := runAdmin(app.Config{}, []string{"grant", "x@example.com"}, &out); err == nil || !strings.Contains(err.Error(), "POSTMILL_DATABASE_URL") {
		t.Errorf("grant without a database: %v", err)
	}
}

// sealedRow is one stored secret the test checks after re-encryption.
type sealedRow struct {
	column ports.SealedColumn
	id     string
	plain  string
}

func TestSecretsReencryptAfterRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t)
	old := mustKeyring(t, oldMaster)
	rotated := mustKeyring(t, newMaster, oldMaster)
	seal := func(k *secret.Keyring, plain, id string) []byte {
		b, err := k.Seal([]byte(plain), []byte(id))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	var rows []sealedRow
	for i, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		userID, orgID := mustUser(t, st, email)
		// Two of everything sealed under the old master, one of each already under the new one.
		k := old
		if i == 2 {
			k = rotated
		}
		if err := st.SetUserTOTP(ctx, userID, seal(k, "seed "+email, userID), true); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, sealedRow{ports.SealedTOTPSeeds, userID, "seed " + email})

		d := ports.Domain{ID: uuid.NewString(), OrganizationID: orgID, Name: "mail.example" + string(rune('a'+i)) + ".test",
			Status: ports.DomainPending, DKIMSelector: "pm" + string(rune('a'+i)), DKIMPublicKey: "MIIB", CreatedAt: operatorNow}
		d.DKIMPrivateKey = seal(k, "dkim "+email, d.ID)
		if err := st.InsertDomain(ctx, d, ports.Event{ID: uuid.NewString(), OrganizationID: orgID, Type: ports.EventDomainCreated, DomainID: d.ID, OccurredAt: operatorNow}); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, sealedRow{ports.SealedDKIMKeys, d.ID, "dkim " + email})

		e := ports.WebhookEndpoint{ID: uuid.NewString(), OrganizationID: orgID, URL: "https://hooks.example.test/" + email,
			Enabled: true, EventTypes: []string{ports.EventEmailDelivered}, CreatedAt: operatorNow}
		e.Secret = seal(k, "whsec "+email, e.ID)
		if err := st.InsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, sealedRow{ports.SealedWebhookSecrets, e.ID, "whsec " + email})
	}

	var out bytes.Buffer
	if err := reencrypt(ctx, rotated, st.Secrets, 2, &out); err != nil {
		t.Fatalf("reencrypt: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(ports.SealedColumns) {
		t.Fatalf("report:\n%s", out.String())
	}
	for i, column := range ports.SealedColumns {
		if f := strings.Fields(lines[i]); len(f) != 5 || f[0] != string(column) || strings.Join(f[1:], " ") != "resealed=2 current=1 changed=0 failed=0" {
			t.Errorf("report line %q, want %s resealed=2 current=1 changed=0 failed=0", lines[i], column)
		}
	}

	// With the old master removed, every secret opens under the new one alone.
	onlyNew := mustKeyring(t, newMaster)
	for _, r := range rows {
		values, err := st.SealedValues(ctx, r.column, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range values {
			if v.ID != r.id {
				continue
			}
			found = true
			plain, err := onlyNew.Open(v.Sealed, []byte(v.ID))
			if err != nil || string(plain) != r.plain {
				t.Errorf("%s %s after reencrypt: %q, %v", r.column, r.id, plain, err)
			}
		}
		if !found {
			t.Errorf("%s %s is gone", r.column, r.id)
		}
	}

	// A second run finds nothing to do.
	out.Reset()
	if err := reencrypt(ctx, rotated, st.Secrets, 2, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "resealed=0 current=3 changed=0 failed=0") != len(ports.SealedColumns) {
		t.Errorf("second run:\n%s", out.String())
	}

	// Run with a keyring that lacks the master that sealed a value: counted, reported and an error.
	stranger := mustKeyring(t, []byte("operator test master secret, unrelated"))
	out.Reset()
	if err := reencrypt(ctx, stranger, st.Secrets, 2, &out); err == nil || !strings.Contains(out.String(), "failed=3 failed_ids=") {
		t.Errorf("a keyring without the sealing master: %v\n%s", err, out.String())
	}
}
