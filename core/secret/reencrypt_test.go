package secret

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestDeriveAll(t *testing.T) {
	t.Parallel()
	rotated := MustKeyring(t, masterNew, masterOld)
	all := rotated.DeriveAll("verp")
	if len(all) != 2 {
		t.Fatalf("DeriveAll gave %d keys, want 2", len(all))
	}
	if !bytes.Equal(all[0], rotated.Derive("verp")) {
		t.Fatal("DeriveAll does not start with the primary's key")
	}
	if !bytes.Equal(all[1], MustKeyring(t, masterOld).Derive("verp")) {
		t.Fatal("DeriveAll's second key is not the old primary's")
	}
	if KeyID(all[0]) == KeyID(all[1]) || len(KeyID(all[0])) != 8 || KeyID(all[0]) != KeyID(rotated.Derive("verp")) {
		t.Fatalf("key ids %q %q", KeyID(all[0]), KeyID(all[1]))
	}
}

func TestReseal(t *testing.T) {
	t.Parallel()
	old := MustKeyring(t, masterOld)
	rotated := MustKeyring(t, masterNew, masterOld)
	onlyNew := MustKeyring(t, masterNew)

	sealedOld, err := old.Seal([]byte("seed"), []byte("user-1"))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.SealedByPrimary(sealedOld) || !old.SealedByPrimary(sealedOld) {
		t.Fatal("SealedByPrimary does not follow the key id")
	}
	out, changed, err := rotated.Reseal(sealedOld, []byte("user-1"))
	if err != nil || !changed {
		t.Fatalf("Reseal of an old value = %v, %v", changed, err)
	}
	if got, err := onlyNew.Open(out, []byte("user-1")); err != nil || string(got) != "seed" {
		t.Fatalf("the resealed value does not open under the new master alone: %q, %v", got, err)
	}
	again, changed, err := rotated.Reseal(out, []byte("user-1"))
	if err != nil || changed || !bytes.Equal(again, out) {
		t.Fatalf("Reseal of a current value = changed %v, %v", changed, err)
	}
	if _, _, err := rotated.Reseal(sealedOld, []byte("user-2")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Reseal with the wrong aad: %v", err)
	}
	if _, _, err := onlyNew.Reseal(sealedOld, []byte("user-1")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Reseal without the old master: %v", err)
	}
	// A value that claims the primary's key id but does not authenticate is not counted as current.
	forged := bytes.Clone(out)
	forged[len(forged)-1] ^= 1
	if _, _, err := rotated.Reseal(forged, []byte("user-1")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Reseal of a forged current value: %v", err)
	}
}

// memorySealed is an in-memory ports.SealedStore: one map per column.
type memorySealed struct {
	mu      sync.Mutex
	columns map[ports.SealedColumn]map[string][]byte
	// beforeReplace, when set, runs before each ReplaceSealed, to simulate a concurrent writer.
	beforeReplace func(column ports.SealedColumn, id string)
	replaces      int
}

func (m *memorySealed) SealedValues(_ context.Context, column ports.SealedColumn, afterID string, limit int) ([]ports.SealedValue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := m.columns[column]
	ids := make([]string, 0, len(rows))
	for id := range rows {
		if id > afterID {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []ports.SealedValue
	for _, id := range ids {
		if len(out) == limit {
			break
		}
		out = append(out, ports.SealedValue{ID: id, Sealed: bytes.Clone(rows[id])})
	}
	return out, nil
}

func (m *memorySealed) ReplaceSealed(_ context.Context, column ports.SealedColumn, id string, current, replacement []byte) (bool, error) {
	if m.beforeReplace != nil {
		m.beforeReplace(column, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaces++
	if !bytes.Equal(m.columns[column][id], current) {
		return false, nil
	}
	m.columns[column][id] = bytes.Clone(replacement)
	return true, nil
}

func TestReencrypt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := MustKeyring(t, masterOld)
	rotated := MustKeyring(t, masterNew, masterOld)
	store := &memorySealed{columns: map[ports.SealedColumn]map[string][]byte{}}
	plain := map[string]string{}
	// Seven values per column under the old master and two already under the new one, read three at a time,
	// so paging crosses batch boundaries.
	for ci, column := range ports.SealedColumns {
		store.columns[column] = map[string][]byte{}
		for i := range 9 {
			id := fmt.Sprintf("%d-%02d", ci, i)
			k := old
			if i%4 == 3 {
				k = rotated
			}
			sealed, err := k.Seal([]byte("secret "+id), []byte(id))
			if err != nil {
				t.Fatal(err)
			}
			store.columns[column][id] = sealed
			plain[id] = "secret " + id
		}
	}
	// A value sealed for another row (a copied ciphertext) opens nowhere.
	stray, _ := old.Seal([]byte("x"), []byte("elsewhere"))
	store.columns[ports.SealedDKIMKeys]["1-99"] = stray

	counts, err := Reencrypt(ctx, rotated, store, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		want := ReencryptCount{Column: c.Column, Resealed: 7, Current: 2}
		if c.Column == ports.SealedDKIMKeys {
			want.Failed, want.FailedIDs = 1, []string{"1-99"}
		}
		if c.Resealed != want.Resealed || c.Current != want.Current || c.Failed != want.Failed || c.Changed != 0 || !slices.Equal(c.FailedIDs, want.FailedIDs) {
			t.Errorf("%s: %+v, want %+v", c.Column, c, want)
		}
	}
	if len(counts) != len(ports.SealedColumns) {
		t.Fatalf("%d columns reported", len(counts))
	}

	// With the old master removed, every value but the stray one opens under the new one alone.
	onlyNew := MustKeyring(t, masterNew)
	for _, column := range ports.SealedColumns {
		for id, sealed := range store.columns[column] {
			if id == "1-99" {
				continue
			}
			got, err := onlyNew.Open(sealed, []byte(id))
			if err != nil || string(got) != plain[id] {
				t.Errorf("%s %s after reencrypt: %q, %v", column, id, got, err)
			}
		}
	}

	// A second run writes nothing.
	writes := store.replaces
	counts, err = Reencrypt(ctx, rotated, store, 3)
	if err != nil {
		t.Fatal(err)
	}
	if store.replaces != writes {
		t.Errorf("a second run wrote %d values", store.replaces-writes)
	}
	for _, c := range counts {
		if c.Resealed != 0 || c.Current != 9 {
			t.Errorf("second run %s: %+v", c.Column, c)
		}
	}
}

func TestReencryptLeavesConcurrentWritesAlone(t *testing.T) {
	t.Parallel()
	old := MustKeyring(t, masterOld)
	rotated := MustKeyring(t, masterNew, masterOld)
	store := &memorySealed{columns: map[ports.SealedColumn]map[string][]byte{}}
	for _, column := range ports.SealedColumns {
		store.columns[column] = map[string][]byte{}
	}
	sealed, _ := old.Seal([]byte("before"), []byte("u1"))
	store.columns[ports.SealedTOTPSeeds]["u1"] = sealed
	// The user re-enrols between the read and the write.
	fresh, _ := rotated.Seal([]byte("after"), []byte("u1"))
	store.beforeReplace = func(ports.SealedColumn, string) {
		store.mu.Lock()
		store.columns[ports.SealedTOTPSeeds]["u1"] = fresh
		store.mu.Unlock()
	}
	counts, err := Reencrypt(context.Background(), rotated, store, 10)
	if err != nil {
		t.Fatal(err)
	}
	if counts[0].Changed != 1 || counts[0].Resealed != 0 {
		t.Fatalf("counts %+v", counts[0])
	}
	if !bytes.Equal(store.columns[ports.SealedTOTPSeeds]["u1"], fresh) {
		t.Fatal("the concurrent write was overwritten")
	}
}
