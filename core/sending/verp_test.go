package sending

import (
	"strings"
	"testing"

	"github.com/postmill/postmill/core/secret"
)

var (
	verpTestKey  = []byte("0123456789abcdef0123456789abcdef")
	verpOtherKey = []byte("fedcba9876543210fedcba9876543210")
)

const (
	testRecipientID = "0192f0c1-7a3b-7c00-8000-00000000000a"
	testMessageID   = "0192f0c1-7a3b-7c00-8000-0000000000ff"
)

func TestVERPRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind byte
		id   string
	}{
		{"recipient", VERPRecipient, testRecipientID},
		{"message", VERPMessage, testMessageID},
		{"upper-case id comes back canonical", VERPRecipient, strings.ToUpper(testRecipientID)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := EncodeVERP(verpTestKey, tt.kind, tt.id, "Acme.Example")
			local, domain, ok := strings.Cut(addr, "@")
			if !ok || domain != "bounce.acme.example" {
				t.Fatalf("address %q: want domain bounce.acme.example", addr)
			}
			if !strings.HasPrefix(local, "b-") || len(local) != 40 || local != strings.ToLower(local) {
				t.Fatalf("local part %q: want b- and 38 lower-case characters", local)
			}
			if strings.ContainsAny(local, "=") {
				t.Fatalf("local part %q has base32 padding", local)
			}
			kind, id, ok := DecodeVERP(verpTestKey, local)
			if !ok || kind != tt.kind || id != strings.ToLower(tt.id) {
				t.Fatalf("DecodeVERP(%q) = %q, %q, %v; want %q, %q", local, kind, id, ok, tt.kind, strings.ToLower(tt.id))
			}
			// Receivers may change the local part's case, and callers may pass the whole address.
			for _, variant := range []string{strings.ToUpper(local), strings.ToUpper(local[:10]) + local[10:], addr} {
				if kind, id, ok := DecodeVERP(verpTestKey, variant); !ok || kind != tt.kind || id != strings.ToLower(tt.id) {
					t.Errorf("DecodeVERP(%q) = %q, %q, %v", variant, kind, id, ok)
				}
			}
		})
	}
}

func TestVERPDistinguishesKindsAndIDs(t *testing.T) {
	t.Parallel()
	a := EncodeVERP(verpTestKey, VERPRecipient, testRecipientID, "acme.example")
	b := EncodeVERP(verpTestKey, VERPMessage, testRecipientID, "acme.example")
	c := EncodeVERP(verpTestKey, VERPRecipient, testMessageID, "acme.example")
	d := EncodeVERP(verpOtherKey, VERPRecipient, testRecipientID, "acme.example")
	if a == b || a == c || a == d {
		t.Fatalf("tokens collide: %q %q %q %q", a, b, c, d)
	}
	if a != EncodeVERP(verpTestKey, VERPRecipient, testRecipientID, "acme.example") {
		t.Fatal("EncodeVERP is not deterministic")
	}
}

func TestVERPRejectsTampering(t *testing.T) {
	t.Parallel()
	addr := EncodeVERP(verpTestKey, VERPRecipient, testRecipientID, "acme.example")
	local, _, _ := strings.Cut(addr, "@")
	flip := func(s string, i int) string {
		c := byte('a')
		if s[i] == 'a' {
			c = 'b'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	// The kind is the first byte: swap r for m by re-encoding the payload with the original MAC.
	otherKind := EncodeVERP(verpTestKey, VERPMessage, testRecipientID, "acme.example")
	swapped := otherKind[:2+28] + local[2+28:]
	tests := []struct {
		name  string
		local string
	}{
		{"empty", ""},
		{"plain address", "alice"},
		{"wrong prefix", "x-" + local[2:]},
		{"no prefix", local[2:]},
		{"token character changed", flip(local, 5)},
		{"id character changed", flip(local, 20)},
		{"mac character changed", flip(local, len(local)-1)},
		{"kind swapped, mac kept", swapped},
		{"truncated", local[:len(local)-1]},
		{"extended", local + "0"},
		{"mac not hex", local[:len(local)-1] + "z"},
		{"token not base32", local[:3] + "1" + local[4:]},
		{"another key", strings.Split(EncodeVERP(verpOtherKey, VERPRecipient, testRecipientID, "acme.example"), "@")[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if kind, id, ok := DecodeVERP(verpTestKey, tt.local); ok {
				t.Fatalf("DecodeVERP(%q) = %q, %q, true; want rejected", tt.local, kind, id)
			}
		})
	}
}

func TestVERPAcrossKeyRotation(t *testing.T) {
	t.Parallel()
	oldPrimary := mustVERPKeyring(t, "old master secret, 32 bytes long")
	rotated := mustVERPKeyring(t, "new master secret, 32 bytes long", "old master secret, 32 bytes long")
	onlyNew := mustVERPKeyring(t, "new master secret, 32 bytes long")

	sentBefore := EncodeVERP(oldPrimary.Derive(VERPKeyPurpose), VERPRecipient, testRecipientID, "acme.example")
	sentAfter := EncodeVERP(rotated.Derive(VERPKeyPurpose), VERPMessage, testMessageID, "acme.example")
	if sentBefore[2+28:2+28+2] == sentAfter[2+28:2+28+2] {
		t.Fatalf("the two keys' addresses name the same key id: %q %q", sentBefore, sentAfter)
	}
	all := rotated.DeriveAll(VERPKeyPurpose)
	if kind, id, ok := DecodeVERPKeys(all, sentBefore); !ok || kind != VERPRecipient || id != testRecipientID {
		t.Errorf("mail sent before the rotation: %q, %q, %v", kind, id, ok)
	}
	if kind, id, ok := DecodeVERPKeys(all, sentAfter); !ok || kind != VERPMessage || id != testMessageID {
		t.Errorf("mail sent after the rotation: %q, %q, %v", kind, id, ok)
	}
	// Once the old master is gone, its addresses are refused like any forgery.
	if _, _, ok := DecodeVERPKeys(onlyNew.DeriveAll(VERPKeyPurpose), sentBefore); ok {
		t.Error("an address under a removed key still decodes")
	}
	// The key id picks the key: a correct MAC under a key other than the one named is refused.
	local, _, _ := strings.Cut(sentBefore, "@")
	renamed := local[:2+28] + sentAfter[2+28:2+28+2] + local[2+28+2:]
	if _, _, ok := DecodeVERPKeys(all, renamed); ok {
		t.Errorf("%q decodes under a key it does not name", renamed)
	}
	// Return paths made before addresses named their key (no key id) are checked against every key.
	legacy := local[:2+28] + local[2+28+2:]
	if kind, id, ok := DecodeVERPKeys(all, strings.ToUpper(legacy)); !ok || kind != VERPRecipient || id != testRecipientID {
		t.Errorf("legacy %q: %q, %q, %v", legacy, kind, id, ok)
	}
	if _, _, ok := DecodeVERPKeys(onlyNew.DeriveAll(VERPKeyPurpose), legacy); ok {
		t.Error("a legacy address decodes under a key that did not make it")
	}
	if _, _, ok := DecodeVERPKeys(nil, sentAfter); ok {
		t.Error("decoded with no key at all")
	}
}

func mustVERPKeyring(tb testing.TB, masters ...string) *secret.Keyring {
	tb.Helper()
	bs := make([][]byte, len(masters))
	for i, m := range masters {
		bs[i] = []byte(m)
	}
	k, err := secret.NewKeyring(bs...)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func TestEncodeVERPRefusesBadInput(t *testing.T) {
	t.Parallel()
	if got := EncodeVERP(verpTestKey, 'x', testRecipientID, "acme.example"); got != "" {
		t.Errorf("unknown kind gave %q", got)
	}
	if got := EncodeVERP(verpTestKey, VERPRecipient, "not-a-uuid", "acme.example"); got != "" {
		t.Errorf("bad id gave %q", got)
	}
}

func TestVERPKeyPurpose(t *testing.T) {
	t.Parallel()
	// The inbound tier derives the same key to decode bounces: the purpose string is part of the contract.
	if VERPKeyPurpose != "verp" {
		t.Fatalf("VERPKeyPurpose = %q", VERPKeyPurpose)
	}
}
