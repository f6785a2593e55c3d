package account

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/crypto/argon2"
)

// FuzzPasswordHash reads stored password hashes as a corrupted or hostile row may hold them. Parsing either
// fails with errMalformedHash or yields parameters within the bounds a login may spend, a salt and a tag of
// sane sizes, and values that survive being written back in canonical PHC form. A hash that parses verifies
// its own password, made with its parameters and salt, and refuses another; and every hash hashPassword makes
// verifies the password it was made from.
func FuzzPasswordHash(f *testing.F) {
	for _, seed := range []struct{ encoded, password string }{
		{hashPassword("correct horse", testPasswordParams), "correct horse"},
		{hashPassword("", PasswordParams{Memory: 128, Time: 2, Threads: 2}), ""},
		{"$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g", "pässwörd"},
		{"$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$t=1,p=1,m=64$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$m=64,t=1,p=1,m=128$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$m=4294967295,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$m=64,t=0,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$m=64,t=1,p=256$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=16$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$m=64,t=1,p=1$c2FsdA$aGFzaGhhc2hoYXNoaGFzaA", "x"},
		{"$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ=$aGFzaGhhc2hoYXNoaGFzaA==", "x"},
		{"$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", "bcrypt"},
		{"", ""}, {"$", "$"}, {"$$$$$", ""},
	} {
		f.Add(seed.encoded, seed.password)
	}
	f.Fuzz(func(t *testing.T, encoded, password string) {
		p, salt, key, err := parsePasswordHash(encoded)
		if err != nil {
			if !errors.Is(err, errMalformedHash) {
				t.Fatalf("parsePasswordHash(%q): %v, want errMalformedHash", encoded, err)
			}
		} else {
			if p.validate() != nil || p.Memory > maxStoredMemory || p.Time > maxStoredTime {
				t.Fatalf("parsePasswordHash(%q) accepted parameters %+v", encoded, p)
			}
			if len(salt) < 8 || len(key) < 16 || len(key) > 64 {
				t.Fatalf("parsePasswordHash(%q): %d-byte salt, %d-byte tag", encoded, len(salt), len(key))
			}
			canonical := phc(p, salt, key)
			p2, salt2, key2, err := parsePasswordHash(canonical)
			if err != nil || p2 != p || !bytes.Equal(salt2, salt) || !bytes.Equal(key2, key) {
				t.Fatalf("%q parses to %+v; written back as %q it parses to %+v, %v", encoded, p, canonical, p2, err)
			}
			// Verifying costs what the parameters say; only cheap ones are worth running here.
			if p.Memory <= 512 && p.Time <= 2 {
				if _, err := verifyPassword(password, encoded); err != nil {
					t.Fatalf("verifyPassword on %q, which parses: %v", encoded, err)
				}
				own := phc(p, salt, argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(key))))
				mustVerify(t, password, own)
			}
		}
		if len(password) <= 256 {
			mustVerify(t, password, hashPassword(password, testPasswordParams))
		}
	})
}

// phc writes an argon2id hash in the canonical PHC string form hashPassword uses.
func phc(p PasswordParams, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// mustVerify fails unless encoded verifies password and refuses a password one byte longer.
func mustVerify(tb testing.TB, password, encoded string) {
	tb.Helper()
	if ok, err := verifyPassword(password, encoded); !ok || err != nil {
		tb.Fatalf("verifyPassword(%q, %q) = %v, %v; want true", password, encoded, ok, err)
	}
	if ok, err := verifyPassword(password+"\x00", encoded); ok || err != nil {
		tb.Fatalf("verifyPassword(%q, %q) = %v, %v; want false", password+"\x00", encoded, ok, err)
	}
}
