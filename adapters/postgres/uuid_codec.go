package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The store passes ids as Go strings. pgx's uuid codec encodes only its own UUID types in the binary
// format, so a uuid[] parameter built from a []string (every array-driven statement: the send path's
// inserts, leases, acks, outcome writes) failed the binary attempt and went as a quoted text array, which
// pgx builds with an allocation per element and PostgreSQL parses back character by character. The codec
// registered here encodes a canonical id string as its 16 bytes. A string that is not one still fails the
// binary attempt, and pgx sends it as text as before, so PostgreSQL answers it with the same error.
type stringUUIDCodec struct{ pgtype.UUIDCodec }

func (c stringUUIDCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(string); ok && format == pgtype.BinaryFormatCode {
		return encodeUUIDString{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

type encodeUUIDString struct{}

var errNotUUID = errors.New("postgres: not a canonical uuid")

// Encode appends the 16 bytes of a uuid written as 36 characters, 8-4-4-4-12 hexadecimal digits.
func (encodeUUIDString) Encode(value any, buf []byte) ([]byte, error) {
	s := value.(string)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return nil, errNotUUID
	}
	for i := 0; i < len(s); i += 2 {
		if s[i] == '-' {
			i--
			continue
		}
		hi, lo := unhex(s[i]), unhex(s[i+1])
		if hi > 15 || lo > 15 {
			return nil, errNotUUID
		}
		buf = append(buf, hi<<4|lo)
	}
	return buf, nil
}

// unhex is the value of a hexadecimal digit, or 255.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// registerTypes is the pool's AfterConnect: registerUUIDStrings on the connection's type map.
func registerTypes(_ context.Context, conn *pgx.Conn) error {
	registerUUIDStrings(conn.TypeMap())
	return nil
}

// registerUUIDStrings replaces the uuid type, and the uuid[] type built on it, in m.
func registerUUIDStrings(m *pgtype.Map) {
	uuid := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: stringUUIDCodec{}}
	m.RegisterType(uuid)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: uuid}})
}
