// Package porttest holds the contract suites of Postmill's driven ports (STYLE.md §8): each adapter's own
// test calls ExerciseBlobStore or ExerciseQueue against its real engine, so that every implementation of a
// port is held to the same promises — and only to the promises the port makes.
//
// The suites import only ports, testing and the standard library, so any module may use them.
package porttest

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// newID returns a UUIDv7 string (RFC 9562 §5.7): adapters may keep ids in uuid columns, so the suites use
// the same shape as the production ids rather than arbitrary strings.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	ms := uint64(time.Now().UnixMilli())
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(b[0:6], ts[2:8])
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
