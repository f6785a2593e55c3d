package account

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// PasswordParams are the argon2id cost parameters (RFC 9106 §3.1) for new password hashes. Each hash records
// the parameters it was made with, so raising them affects new passwords only and never locks anyone out.
type PasswordParams struct {
	// Memory is m in KiB.
	Memory uint32
	// Time is t, the number of passes.
	Time uint32
	// Threads is p, the degree of parallelism.
	Threads uint8
}

// DefaultPasswordParams is OWASP's minimum recommendation for argon2id (m=19 MiB, t=2, p=1): it costs an
// attacker with GPUs about as much as RFC 9106's second recommended option while fitting a small server.
var DefaultPasswordParams = PasswordParams{Memory: 19456, Time: 2, Threads: 1}

// Salt and tag sizes of RFC 9106 §3.1 (128-bit salt, 256-bit tag).
const (
	passwordSaltLen = 16
	passwordKeyLen  = 32
)

// Bounds on parameters read back from a stored hash, so that a corrupted or hostile row cannot make one login
// allocate gigabytes or spin for minutes.
const (
	maxStoredMemory = 1 << 21 // 2 GiB in KiB
	maxStoredTime   = 64
)

func (p PasswordParams) withDefaults() PasswordParams {
	if p.Memory == 0 {
		p.Memory = DefaultPasswordParams.Memory
	}
	if p.Time == 0 {
		p.Time = DefaultPasswordParams.Time
	}
	if p.Threads == 0 {
		p.Threads = DefaultPasswordParams.Threads
	}
	return p
}

// validate applies RFC 9106 §3.1: m must be at least 8p KiB.
func (p PasswordParams) validate() error {
	if p.Time < 1 || p.Time > maxStoredTime {
		return fmt.Errorf("argon2id time must be 1..%d, got %d", maxStoredTime, p.Time)
	}
	if p.Threads < 1 {
		return errors.New("argon2id threads must be at least 1")
	}
	if p.Memory < 8*uint32(p.Threads) || p.Memory > maxStoredMemory {
		return fmt.Errorf("argon2id memory must be 8*threads..%d KiB, got %d", maxStoredMemory, p.Memory)
	}
	return nil
}

var errMalformedHash = errors.New("malformed argon2id hash")

// hashPassword returns the argon2id hash of password in the PHC string format
// $argon2id$v=19$m=<m>,t=<t>,p=<p>$<salt>$<hash>, with unpadded standard base64 as the PHC format requires.
func hashPassword(password string, p PasswordParams) string {
	salt := randomBytes(passwordSaltLen)
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, passwordKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// verifyPassword reports whether password matches a PHC-encoded argon2id hash, comparing in constant time.
// The error is for a hash that cannot be parsed, which is a data problem rather than a wrong password.
func verifyPassword(password, encoded string) (bool, error) {
	p, salt, want, err := parsePasswordHash(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

func parsePasswordHash(encoded string) (PasswordParams, []byte, []byte, error) {
	var p PasswordParams
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, errMalformedHash
	}
	for _, kv := range strings.Split(parts[3], ",") {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return p, nil, nil, errMalformedHash
		}
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return p, nil, nil, errMalformedHash
		}
		switch name {
		case "m":
			p.Memory = uint32(n)
		case "t":
			p.Time = uint32(n)
		case "p":
			if n > 255 {
				return p, nil, nil, errMalformedHash
			}
			p.Threads = uint8(n)
		default:
			return p, nil, nil, errMalformedHash
		}
	}
	if p.validate() != nil {
		return p, nil, nil, errMalformedHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, nil, nil, errMalformedHash
	}
	key, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errMalformedHash
	}
	return p, salt, key, nil
}

// randomBytes reads n bytes from crypto/rand, which never returns an error (it aborts the program if the
// system's source fails, Go 1.24+).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
