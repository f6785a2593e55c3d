package postgres

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// A []string of ids is encoded as a binary uuid[]: 16 bytes per id, not a quoted text array.
func TestUUIDStrings_BinaryArray(t *testing.T) {
	ids := []string{"0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", "0190A3B4-5C6D-7E8F-9A0B-1C2D3E4F5A6C"}
	m := pgtype.NewMap()
	if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil); err == nil {
		t.Fatal("pgx's own codec encoded strings as a binary uuid[]; this codec may no longer be needed")
	}
	registerUUIDStrings(m)
	buf, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil)
	if err != nil {
		t.Fatalf("binary uuid[]: %v", err)
	}
	want := []byte{0x01, 0x90, 0xa3, 0xb4, 0x5c, 0x6d, 0x7e, 0x8f, 0x9a, 0x0b, 0x1c, 0x2d, 0x3e, 0x4f, 0x5a, 0x6b}
	if !bytes.Contains(buf, want) || bytes.Contains(buf, []byte("0190")) {
		t.Fatalf("binary uuid[] %x does not hold the id's 16 bytes", buf)
	}
	for _, bad := range []string{"", "not-a-uuid", "0190a3b45c6d7e8f9a0b1c2d3e4f5a6b", "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6g"} {
		if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, []string{bad}, nil); err == nil {
			t.Errorf("%q encoded as a binary uuid", bad)
		}
	}
}

// The encoding allocates nothing of its own beyond the buffer it appends to.
func TestUUIDStrings_NoAllocation(t *testing.T) {
	buf := make([]byte, 0, 64)
	id := "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"
	if n := testing.AllocsPerRun(100, func() {
		if _, err := (encodeUUIDString{}).Encode(id, buf[:0]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per id", n)
	}
}
