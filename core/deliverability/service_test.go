package deliverability

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/ports"
)

// testMaster is the keyring master of these tests.
var testMaster = []byte("deliverability-test-master-secret")

// refusingStore fails the test on any call: it proves that a path answers without the store. It holds
// nothing; paths that reach the store are exercised against PostgreSQL in the deploy module's integration
// tests.
type refusingStore struct{ tb testing.TB }

func (s refusingStore) refuse(method string) error {
	s.tb.Helper()
	s.tb.Errorf("store.%s called; this path must answer without the store", method)
	return errors.New("store refused")
}

func (s refusingStore) ListSuppressions(context.Context, string, ports.PageQuery) (ports.Page[ports.Suppression], error) {
	return ports.Page[ports.Suppression]{}, s.refuse("ListSuppressions")
}

func (s refusingStore) InsertSuppression(context.Context, ports.Suppression) (ports.Suppression, error) {
	return ports.Suppression{}, s.refuse("InsertSuppression")
}

func (s refusingStore) DeleteSuppression(context.Context, string, string) (bool, error) {
	return false, s.refuse("DeleteSuppression")
}

func (s refusingStore) ListBounces(context.Context, string, ports.PageQuery) (ports.BouncePage, error) {
	return ports.BouncePage{}, s.refuse("ListBounces")
}

func (s refusingStore) ListComplaints(context.Context, string, ports.PageQuery) (ports.ComplaintPage, error) {
	return ports.ComplaintPage{}, s.refuse("ListComplaints")
}

func (s refusingStore) RecipientByID(context.Context, string) (ports.RecipientRef, error) {
	return ports.RecipientRef{}, s.refuse("RecipientByID")
}

func (s refusingStore) MessageOrganization(context.Context, string) (string, error) {
	return "", s.refuse("MessageOrganization")
}

func (s refusingStore) ApplyFeedback(context.Context, string, string, func([]ports.Recipient) ports.FeedbackApplication) error {
	return s.refuse("ApplyFeedback")
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// MustService builds a Service over a refusingStore.
func MustService(tb testing.TB, cfg Config) *Service {
	tb.Helper()
	kr, err := secret.NewKeyring(testMaster)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(cfg, Deps{Store: refusingStore{tb: tb}, Keyring: kr, Clock: fixedClock{time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// MustVERPKey is the VERP key a Service built by MustService checks MACs with, derived independently.
func MustVERPKey(tb testing.TB) []byte {
	tb.Helper()
	kr, err := secret.NewKeyring(testMaster)
	if err != nil {
		tb.Fatal(err)
	}
	return kr.Derive(sending.VERPKeyPurpose)
}

func wantCode(tb testing.TB, err error, code ports.Code) *ports.Error {
	tb.Helper()
	if ports.ErrorCode(err) != code {
		tb.Fatalf("error %v: want code %s", err, code)
	}
	e, _ := ports.AsError(err)
	return e
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"empty", Config{}, false},
		{"feedback address", Config{FeedbackAddress: "fbl@bounces.postmill.local"}, false},
		{"feedback address is normalised first", Config{FeedbackAddress: "  FBL@Bounces.Postmill.Local "}, false},
		{"no domain", Config{FeedbackAddress: "fbl"}, true},
		{"bare domain", Config{FeedbackAddress: "bounces.postmill.local"}, true},
		{"single-label domain", Config{FeedbackAddress: "fbl@localhost"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewRequiresStoreAndKeyring(t *testing.T) {
	t.Parallel()
	kr, err := secret.NewKeyring(testMaster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}, Deps{Keyring: kr}); err == nil {
		t.Error("New without a store succeeded")
	}
	if _, err := New(Config{}, Deps{Store: refusingStore{tb: t}}); err == nil {
		t.Error("New without a keyring succeeded")
	}
	if _, err := New(Config{FeedbackAddress: "nope"}, Deps{Store: refusingStore{tb: t}, Keyring: kr}); err == nil {
		t.Error("New with an invalid feedback address succeeded")
	}
}

func TestIDSeq(t *testing.T) {
	t.Parallel()
	a := newIDSeq()
	b := a // a retried decide starts from the same base
	seen := map[string]bool{}
	for i := range 5 {
		id := a.next()
		if again := b.next(); again != id {
			t.Fatalf("id %d: %s then %s from the same base", i, id, again)
		}
		if seen[id] {
			t.Fatalf("id %s repeated", id)
		}
		seen[id] = true
		mustUUIDv7(t, id)
	}
	// Low 32 bits at their maximum wrap without touching the variant or timestamp.
	c := idSeq{base: a.base}
	for i := 12; i < 16; i++ {
		c.base[i] = 0xff
	}
	first, second := c.next(), c.next()
	if first == second {
		t.Fatal("wrapped ids are equal")
	}
	mustUUIDv7(t, second)
	if first[:24] != second[:24] {
		t.Errorf("wrap changed more than the low 32 bits: %s, %s", first, second)
	}
}

func TestSuppressionRoutesWithoutStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := MustService(t, Config{})

	t.Run("tenant asking for global is permission_denied", func(t *testing.T) {
		t.Parallel()
		_, err := s.CreateSuppression(ctx, "org", ports.NewSuppression{Address: "not even valid", Scope: "global"})
		e := wantCode(t, err, ports.CodePermissionDenied)
		if e.Message != msgGlobalByAdmins || e.Reason != "" {
			t.Errorf("error %+v: want plain permission_denied %q", e, msgGlobalByAdmins)
		}
	})
	t.Run("invalid create never reaches the store", func(t *testing.T) {
		t.Parallel()
		_, err := s.CreateSuppression(ctx, "org", ports.NewSuppression{Address: "x", Scope: "planet", Reason: "whim"})
		e := wantCode(t, err, ports.CodeInvalidArgument)
		want := []ports.FieldViolation{{Path: "address", Message: msgAddressForm}, {Path: "scope", Message: msgScope},
			{Path: "reason", Message: msgReason}}
		if !reflect.DeepEqual(e.Details, want) {
			t.Errorf("details %+v, want %+v", e.Details, want)
		}
	})
	t.Run("invalid global create never reaches the store", func(t *testing.T) {
		t.Parallel()
		_, err := s.CreateGlobalSuppression(ctx, ports.NewSuppression{Address: "a@@b.com"})
		wantCode(t, err, ports.CodeInvalidArgument)
	})
	t.Run("delete of a non-UUID id is false", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"", "abc", "0192f0c1-7a3b-7c00-8000-00000000000"} {
			if deleted, err := s.DeleteSuppression(ctx, "org", id); deleted || err != nil {
				t.Errorf("DeleteSuppression(%q) = %v, %v; want false, nil", id, deleted, err)
			}
			if deleted, err := s.DeleteGlobalSuppression(ctx, id); deleted || err != nil {
				t.Errorf("DeleteGlobalSuppression(%q) = %v, %v; want false, nil", id, deleted, err)
			}
		}
	})
	t.Run("limit out of range", func(t *testing.T) {
		t.Parallel()
		for _, limit := range []int{-1, 101} {
			_, err := s.ListBounces(ctx, "org", ports.PageQuery{Limit: limit})
			e := wantCode(t, err, ports.CodeInvalidArgument)
			if len(e.Details) != 1 || e.Details[0] != (ports.FieldViolation{Path: "limit", Message: msgLimit}) {
				t.Errorf("limit %d: details %+v", limit, e.Details)
			}
			_, err = s.ListComplaints(ctx, "org", ports.PageQuery{Limit: limit})
			wantCode(t, err, ports.CodeInvalidArgument)
			_, err = s.ListSuppressionsPage(ctx, "org", ports.PageQuery{Limit: limit})
			wantCode(t, err, ports.CodeInvalidArgument)
		}
	})
	t.Run("an empty organization never reaches global rows", func(t *testing.T) {
		t.Parallel()
		if _, err := s.ListSuppressions(ctx, ""); err == nil {
			t.Error("ListSuppressions with no organization succeeded")
		}
		if _, err := s.ListSuppressionsPage(ctx, "", ports.PageQuery{}); err == nil {
			t.Error("ListSuppressionsPage with no organization succeeded")
		}
		if _, err := s.CreateSuppression(ctx, "", ports.NewSuppression{Address: "a@b.com"}); err == nil {
			t.Error("CreateSuppression with no organization succeeded")
		}
		if _, err := s.DeleteSuppression(ctx, "", "0192f0c1-7a3b-7c00-8000-00000000000a"); err == nil {
			t.Error("DeleteSuppression with no organization succeeded")
		}
		if _, err := s.ListBounces(ctx, "", ports.PageQuery{}); err == nil {
			t.Error("ListBounces with no organization succeeded")
		}
		if _, err := s.ListComplaints(ctx, "", ports.PageQuery{}); err == nil {
			t.Error("ListComplaints with no organization succeeded")
		}
	})
}

func TestPageQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      ports.PageQuery
		want    int
		wantErr bool
	}{
		{ports.PageQuery{}, DefaultPageLimit, false},
		{ports.PageQuery{Limit: 1, Cursor: "c"}, 1, false},
		{ports.PageQuery{Limit: 100}, 100, false},
		{ports.PageQuery{Limit: 101}, 0, true},
		{ports.PageQuery{Limit: -5}, 0, true},
	}
	for _, tt := range tests {
		got, err := pageQuery(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("pageQuery(%+v) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && (got.Limit != tt.want || got.Cursor != tt.in.Cursor) {
			t.Errorf("pageQuery(%+v) = %+v, want limit %d and the cursor kept", tt.in, got, tt.want)
		}
	}
}

func mustUUIDv7(tb testing.TB, id string) {
	tb.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		tb.Fatalf("id %q: %v", id, err)
	}
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		tb.Fatalf("id %s: version %d variant %v, want a UUIDv7", id, u.Version(), u.Variant())
	}
}
