package sending

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// FuzzDecodeVERP reads arbitrary return-path local parts, as a bounce's envelope recipient brings them. A
// local part that decodes must name a known kind and a canonical UUID, and re-encode to itself (in lower
// case, without the "@domain" DecodeVERP ignores, and without the key id when it is an older, shorter form): a token has exactly one spelling, so a bounce can never
// be attributed to another delivery than the one whose return path it was sent to. Any id and kind that
// EncodeVERP accepts decode back to themselves, and not under another key.
func FuzzDecodeVERP(f *testing.F) {
	r := EncodeVERP(verpTestKey, VERPRecipient, testRecipientID, "acme.example")
	m := EncodeVERP(verpTestKey, VERPMessage, testMessageID, "Acme.Example")
	rLocal, _, _ := strings.Cut(r, "@")
	for _, seed := range []string{
		r, m, rLocal, strings.ToUpper(rLocal),
		strings.Split(EncodeVERP(verpOtherKey, VERPRecipient, testRecipientID, "acme.example"), "@")[0],
		rLocal[:len(verpPrefix)+verpTokenLen] + rLocal[len(verpPrefix)+verpTokenLen+2:], // without a key id
		rLocal[:len(rLocal)-1] + "0", rLocal + "@", "@" + rLocal, rLocal + "@bounce.x@y",
		"", "b-", "alice", "postmaster", "MAILER-DAEMON", "b-" + strings.Repeat("a", 36),
		"b-" + strings.Repeat("7", 28) + "00000000", "b-" + strings.Repeat("=", 36),
		"b-ahq1234567890abcdefghijklmnopqrs00000000",
	} {
		f.Add(seed, byte(VERPRecipient), []byte(uuid.MustParse(testRecipientID).String()))
	}
	f.Fuzz(func(t *testing.T, local string, kind byte, idBytes []byte) {
		if k, id, ok := DecodeVERP(verpTestKey, local); ok {
			if k != VERPRecipient && k != VERPMessage {
				t.Fatalf("DecodeVERP(%q) gave kind %q", local, k)
			}
			if u, err := uuid.Parse(id); err != nil || u.String() != id {
				t.Fatalf("DecodeVERP(%q) gave id %q, not a canonical UUID", local, id)
			}
			lp := local
			if at := strings.LastIndexByte(lp, '@'); at >= 0 {
				lp = lp[:at]
			}
			lp = strings.ToLower(lp)
			again, _, _ := strings.Cut(EncodeVERP(verpTestKey, k, id, "acme.example"), "@")
			// A return path from before a format change may lack a part today's carries after the token
			// (the key id); it must still be today's spelling with that part removed.
			tokenEnd, extra := len(verpPrefix)+verpTokenLen, len(again)-len(lp)
			if again != lp && !(extra > 0 && again[:tokenEnd]+again[tokenEnd+extra:] == lp) {
				t.Fatalf("DecodeVERP(%q) = %q, %q, which encodes to %q", local, k, id, again)
			}
		}

		// Whatever EncodeVERP makes of a kind and 16 id bytes decodes to them, in any letter case.
		var u uuid.UUID
		copy(u[:], idBytes)
		addr := EncodeVERP(verpTestKey, kind, u.String(), "acme.example")
		if kind != VERPRecipient && kind != VERPMessage {
			if addr != "" {
				t.Fatalf("EncodeVERP with kind %q gave %q", kind, addr)
			}
			return
		}
		for _, s := range []string{addr, strings.ToUpper(addr)} {
			if k, id, ok := DecodeVERP(verpTestKey, s); !ok || k != kind || id != u.String() {
				t.Fatalf("DecodeVERP(%q) = %q, %q, %v; want %q, %q", s, k, id, ok, kind, u)
			}
		}
		if _, _, ok := DecodeVERP(verpOtherKey, addr); ok {
			t.Fatalf("%q decodes under another key", addr)
		}
	})
}
