package secret

import (
	"bytes"
	"errors"
	"testing"
)

var (
	masterOld = []byte("old master secret, 32 bytes long")
	masterNew = []byte("new master secret, 32 bytes long")
)

func MustKeyring(tb testing.TB, masters ...[]byte) *Keyring {
	tb.Helper()
	k, err := NewKeyring(masters...)
	if err != nil {
		tb.Fatalf("NewKeyring: %v", err)
	}
	return k
}

func TestNewKeyring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		masters [][]byte
		wantErr bool
	}{
		{"one master", [][]byte{masterOld}, false},
		{"rotation", [][]byte{masterNew, masterOld}, false},
		{"none", nil, true},
		{"short primary", [][]byte{[]byte("short")}, true},
		{"short secondary", [][]byte{masterNew, []byte("short")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewKeyring(tt.masters...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewKeyring err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestDerive(t *testing.T) {
	t.Parallel()
	k := MustKeyring(t, masterOld)
	a, b := k.Derive("jwt-access"), k.Derive("jwt-access")
	if len(a) != 32 {
		t.Fatalf("len = %d, want 32", len(a))
	}
	if !bytes.Equal(a, b) {
		t.Fatal("Derive is not deterministic")
	}
	if bytes.Equal(a, k.Derive("other")) {
		t.Fatal("different purposes gave the same key")
	}
	if bytes.Equal(a, MustKeyring(t, masterNew, masterOld).Derive("jwt-access")) {
		t.Fatal("Derive did not follow the primary")
	}
	if !bytes.Equal(a, MustKeyring(t, masterOld, masterNew).Derive("jwt-access")) {
		t.Fatal("Derive used a secondary master")
	}
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	old := MustKeyring(t, masterOld)
	rotated := MustKeyring(t, masterNew, masterOld)
	onlyNew := MustKeyring(t, masterNew)

	sealedOld, err := old.Seal([]byte("seed"), []byte("user-1"))
	if err != nil {
		t.Fatal(err)
	}
	tampered := func(i int) []byte {
		b := bytes.Clone(sealedOld)
		b[i] ^= 1
		return b
	}

	tests := []struct {
		name    string
		keyring *Keyring
		sealed  []byte
		aad     []byte
		want    string
		wantErr bool
	}{
		{name: "round trip", keyring: old, sealed: sealedOld, aad: []byte("user-1"), want: "seed"},
		{name: "rotated keyring opens the old primary's value", keyring: rotated, sealed: sealedOld, aad: []byte("user-1"), want: "seed"},
		{name: "unknown key id", keyring: onlyNew, sealed: sealedOld, aad: []byte("user-1"), wantErr: true},
		{name: "wrong aad", keyring: old, sealed: sealedOld, aad: []byte("user-2"), wantErr: true},
		{name: "missing aad", keyring: old, sealed: sealedOld, aad: nil, wantErr: true},
		{name: "tampered version", keyring: old, sealed: tampered(0), aad: []byte("user-1"), wantErr: true},
		{name: "tampered key id", keyring: old, sealed: tampered(3), aad: []byte("user-1"), wantErr: true},
		{name: "tampered nonce", keyring: old, sealed: tampered(headerLen - 1), aad: []byte("user-1"), wantErr: true},
		{name: "tampered ciphertext", keyring: old, sealed: tampered(headerLen), aad: []byte("user-1"), wantErr: true},
		{name: "tampered tag", keyring: old, sealed: tampered(len(sealedOld) - 1), aad: []byte("user-1"), wantErr: true},
		{name: "truncated", keyring: old, sealed: sealedOld[:headerLen+3], aad: []byte("user-1"), wantErr: true},
		{name: "empty", keyring: old, sealed: nil, aad: []byte("user-1"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.keyring.Open(tt.sealed, tt.aad)
			if tt.wantErr {
				if !errors.Is(err, ErrOpen) {
					t.Fatalf("Open err = %v, want ErrOpen", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("Open = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSealLayout(t *testing.T) {
	t.Parallel()
	old := MustKeyring(t, masterOld)
	rotated := MustKeyring(t, masterNew, masterOld)

	a, err := old.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := old.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rotated.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a[0] != sealVersion {
		t.Fatalf("version byte = %d", a[0])
	}
	if len(a) != headerLen+1+16 {
		t.Fatalf("len = %d, want header + plaintext + tag", len(a))
	}
	if !bytes.Equal(a[1:1+keyIDLen], b[1:1+keyIDLen]) {
		t.Fatal("the same key produced different ids")
	}
	if bytes.Equal(a[1+keyIDLen:headerLen], b[1+keyIDLen:headerLen]) {
		t.Fatal("nonce repeated")
	}
	if bytes.Equal(a[1:1+keyIDLen], c[1:1+keyIDLen]) {
		t.Fatal("a rotated keyring sealed under the old primary")
	}
	if _, err := MustKeyring(t, masterNew).Open(c, nil); err != nil {
		t.Fatalf("new primary cannot open its own value: %v", err)
	}
}
