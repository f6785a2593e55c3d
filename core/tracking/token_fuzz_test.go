package tracking

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// FuzzDecodeToken feeds the public tracking routes' token argument, and sealed payloads of any shape, to
// Decode. Any string either fails with invalid_argument and a zero Token or opens to a token that re-encodes
// and opens to itself. A payload sealed with the tracking associated data opens exactly when it has the
// layout of an open or click token, and then to the ids and link it holds; sealed for another purpose it
// never opens. A token made by Encode opens to the same value, also on a keyring rotated past its master,
// and no longer once one of its characters changes or it is cut short.
func FuzzDecodeToken(f *testing.F) {
	tr := MustTracker(f)
	rotated, err := NewTracker(MustKeyring(f, masterB, masterA), "")
	if err != nil {
		f.Fatal(err)
	}
	ids := func(s ...string) []byte {
		var b []byte
		for _, id := range s {
			u := uuid.MustParse(id)
			b = append(b, u[:]...)
		}
		return b
	}
	openPayloadSeed := append([]byte{KindOpen}, ids(orgID, msgID, rcpID)...)
	clickPayloadSeed := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(
		append([]byte{KindClick}, ids(orgID, msgID, rcpID)...), 7), LinkDigest("https://example.com/"))
	for _, seed := range []struct {
		token   string
		payload []byte
	}{
		{MustEncode(f, tr, openToken()), openPayloadSeed},
		{MustEncode(f, tr, clickToken(7, "https://example.com/")), clickPayloadSeed},
		{MustEncode(f, rotated, clickToken(65535, "http://x.test")), clickPayloadSeed[:len(clickPayloadSeed)-1]},
		{"", nil},
		{"AQ", []byte{KindOpen}},
		{strings.Repeat("A", 115), append([]byte{'x'}, openPayloadSeed[1:]...)},
		{strings.Repeat("_", MaxTokenLen+1), append(openPayloadSeed, 0)},
		{"AQ==", []byte("postmill tracking v1")},
		{"not a token", clickPayloadSeed[:openPayload]},
	} {
		f.Add(seed.token, seed.payload, uint16(3))
	}
	f.Fuzz(func(t *testing.T, s string, payload []byte, pos uint16) {
		if tok, err := tr.Decode(s); err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument || tok != (Token{}) {
				t.Fatalf("Decode(%q) = %+v, %v; want a zero token and invalid_argument", s, tok, err)
			}
		} else {
			checkToken(t, tok)
			mustRoundTrip(t, tr, tok)
		}

		// A sealed payload opens exactly when it has a token's layout.
		sealed, err := tr.keyring.Seal(payload, tokenAAD)
		if err != nil {
			t.Fatal(err)
		}
		wantOK := len(payload) == openPayload && payload[0] == KindOpen ||
			len(payload) == clickPayload && payload[0] == KindClick
		tok, err := tr.Decode(tokenEncoding.EncodeToString(sealed))
		if (err == nil) != wantOK {
			t.Fatalf("payload %x: Decode = %+v, %v; want ok %v", payload, tok, err, wantOK)
		}
		if err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument {
				t.Fatalf("payload %x: %v, want invalid_argument", payload, err)
			}
		} else {
			checkToken(t, tok)
			if got := packToken(t, tok); !bytes.Equal(got, payload) {
				t.Fatalf("payload %x opened to %+v, which packs to %x", payload, tok, got)
			}
			s := mustRoundTrip(t, tr, tok)
			if got, err := rotated.Decode(s); err != nil || got != tok {
				t.Fatalf("after a rotation %q opens to %+v, %v; want %+v", s, got, err, tok)
			}
			// Another character at any position, or a cut, is refused.
			i := int(pos) % len(s)
			c := byte('A')
			if s[i] == 'A' {
				c = 'B'
			}
			mustInvalid(t, tr, s[:i]+string(c)+s[i+1:])
			mustInvalid(t, tr, s[:i])
		}
		// Sealed for another purpose (no associated data, or a prefix of tracking's), it never opens.
		for _, aad := range [][]byte{nil, tokenAAD[:len(tokenAAD)-1]} {
			other, err := tr.keyring.Seal(payload, aad)
			if err != nil {
				t.Fatal(err)
			}
			mustInvalid(t, tr, tokenEncoding.EncodeToString(other))
		}
	})
}

// checkToken fails unless tok is what Decode may return: a known kind, canonical UUIDs, and link fields only
// on a click.
func checkToken(tb testing.TB, tok Token) {
	tb.Helper()
	if tok.Kind != KindOpen && tok.Kind != KindClick {
		tb.Fatalf("token %+v has an unknown kind", tok)
	}
	for _, id := range []string{tok.OrganizationID, tok.MessageID, tok.RecipientID} {
		if u, err := uuid.Parse(id); err != nil || u.String() != id {
			tb.Fatalf("token %+v: id %q is not a canonical UUID", tok, id)
		}
	}
	if tok.LinkIndex < 0 || tok.LinkIndex > maxLinkIndex || tok.Kind == KindOpen && (tok.LinkIndex != 0 || tok.LinkDigest != 0) {
		tb.Fatalf("token %+v: link fields out of place", tok)
	}
}

// mustRoundTrip encodes tok, checks that it opens to tok, and returns the encoding.
func mustRoundTrip(tb testing.TB, tr *Tracker, tok Token) string {
	tb.Helper()
	s := MustEncode(tb, tr, tok)
	if len(s) > MaxTokenLen {
		tb.Fatalf("token %+v encodes to %d characters, over MaxTokenLen", tok, len(s))
	}
	if got, err := tr.Decode(s); err != nil || got != tok {
		tb.Fatalf("Encode(%+v) = %q, which opens to %+v, %v", tok, s, got, err)
	}
	return s
}

// packToken is the payload layout of token.go written out independently: kind, the three ids, and for a
// click the link index and digest.
func packToken(tb testing.TB, tok Token) []byte {
	tb.Helper()
	p := []byte{tok.Kind}
	for _, id := range []string{tok.OrganizationID, tok.MessageID, tok.RecipientID} {
		u := uuid.MustParse(id)
		p = append(p, u[:]...)
	}
	if tok.Kind == KindClick {
		p = binary.BigEndian.AppendUint16(p, uint16(tok.LinkIndex))
		p = binary.BigEndian.AppendUint32(p, tok.LinkDigest)
	}
	return p
}
