package id

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNewIsUUIDv7(t *testing.T) {
	t.Parallel()
	before := time.Now().Add(-time.Millisecond)
	s := New()
	after := time.Now().Add(time.Millisecond)
	u, err := uuid.Parse(s)
	if err != nil {
		t.Fatalf("New() = %q: %v", s, err)
	}
	if u.String() != s {
		t.Errorf("New() = %q, not in canonical form %q", s, u.String())
	}
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Errorf("New() = %q: version %d variant %v, want 7 and RFC 4122", s, u.Version(), u.Variant())
	}
	at := time.Unix(u.Time().UnixTime())
	if at.Before(before.Truncate(time.Millisecond)) || at.After(after) {
		t.Errorf("New() carries time %v, want between %v and %v", at, before, after)
	}
	if v := NewUUID(); v.Version() != 7 || v.Variant() != uuid.RFC4122 {
		t.Errorf("NewUUID() = %v: version %d variant %v, want 7 and RFC 4122", v, v.Version(), v.Variant())
	}
}

// Ids drawn one after another in a process are distinct and sort in the order they were made, which the
// stores rely on for index locality and for ordering rows created in one call.
func TestNewSortsByCreation(t *testing.T) {
	t.Parallel()
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = New()
	}
	if !slices.IsSorted(ids) {
		t.Fatal("successive ids do not sort in creation order")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatal("New returned the same id twice")
	}
}
