package account

import (
	"regexp"
	"strings"
	"testing"
)

var testPasswordParams = PasswordParams{Memory: 64, Time: 1, Threads: 1}

var phcPattern = regexp.MustCompile(`^\$argon2id\$v=19\$m=64,t=1,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestHashPasswordFormat(t *testing.T) {
	t.Parallel()
	a := hashPassword("correct horse", testPasswordParams)
	b := hashPassword("correct horse", testPasswordParams)
	if !phcPattern.MatchString(a) {
		t.Fatalf("hash %q is not in PHC form", a)
	}
	if a == b {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
}

func TestVerifyPassword(t *testing.T) {
	t.Parallel()
	stored := hashPassword("correct horse", testPasswordParams)
	otherParams := hashPassword("correct horse", PasswordParams{Memory: 128, Time: 2, Threads: 2})
	tests := []struct {
		name     string
		password string
		encoded  string
		want     bool
		wantErr  bool
	}{
		{name: "right password", password: "correct horse", encoded: stored, want: true},
		{name: "wrong password", password: "correct horsf", encoded: stored},
		{name: "empty password", password: "", encoded: stored},
		{name: "parameters are read from the hash", password: "correct horse", encoded: otherParams, want: true},
		{name: "tampered hash", password: "correct horse", encoded: stored[:len(stored)-2] + "AA"},
		{name: "argon2i", password: "x", encoded: strings.Replace(stored, "argon2id", "argon2i", 1), wantErr: true},
		{name: "old version", password: "x", encoded: strings.Replace(stored, "v=19", "v=16", 1), wantErr: true},
		{name: "unknown parameter", password: "x", encoded: strings.Replace(stored, "p=1", "q=1", 1), wantErr: true},
		{name: "memory below 8p", password: "x", encoded: strings.Replace(stored, "m=64", "m=4", 1), wantErr: true},
		{name: "huge memory", password: "x", encoded: strings.Replace(stored, "m=64", "m=4194304", 1), wantErr: true},
		{name: "bad salt", password: "x", encoded: "$argon2id$v=19$m=64,t=1,p=1$!!!$AAAAAAAAAAAAAAAAAAAAAA", wantErr: true},
		{name: "missing field", password: "x", encoded: "$argon2id$v=19$m=64,t=1,p=1$AAAAAAAAAAAAAAAAAAAAAA", wantErr: true},
		{name: "empty", password: "x", encoded: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := verifyPassword(tt.password, tt.encoded)
			if (err != nil) != tt.wantErr {
				t.Fatalf("verifyPassword err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("verifyPassword = %v, want %v", got, tt.want)
			}
		})
	}
}
