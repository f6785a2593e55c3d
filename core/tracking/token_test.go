package tracking

import (
	"strings"
	"testing"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

var (
	masterA = []byte("tracking master secret A, 32 by.")
	masterB = []byte("tracking master secret B, 32 by.")
)

const (
	orgID = "0190a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"
	msgID = "0190a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7c"
	rcpID = "0190a3c4-5d6e-7f80-9a1b-2c3d4e5f6a7d"
)

// MustKeyring builds a keyring from masters, primary first.
func MustKeyring(tb testing.TB, masters ...[]byte) *secret.Keyring {
	tb.Helper()
	k, err := secret.NewKeyring(masters...)
	if err != nil {
		tb.Fatalf("NewKeyring: %v", err)
	}
	return k
}

// MustTracker builds an https Tracker over masterA with the public base URL https://postmill.test.
func MustTracker(tb testing.TB) *Tracker {
	tb.Helper()
	t, err := NewTracker(MustKeyring(tb, masterA), "")
	if err != nil {
		tb.Fatalf("NewTracker: %v", err)
	}
	t.PublicBaseURL = "https://postmill.test/"
	return t
}

// MustEncode seals tok or fails the test.
func MustEncode(tb testing.TB, t *Tracker, tok Token) string {
	tb.Helper()
	s, err := t.Encode(tok)
	if err != nil {
		tb.Fatalf("Encode(%+v): %v", tok, err)
	}
	return s
}

func openToken() Token {
	return Token{Kind: KindOpen, OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID}
}

func clickToken(i int, url string) Token {
	return Token{Kind: KindClick, OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID, LinkIndex: i,
		LinkDigest: LinkDigest(url)}
}

func TestNewTracker(t *testing.T) {
	t.Parallel()
	k := MustKeyring(t, masterA)
	tests := []struct {
		scheme  string
		want    string
		wantErr bool
	}{
		{"", "https", false},
		{"https", "https", false},
		{" HTTP ", "http", false},
		{"ftp", "", true},
		{"https://", "", true},
	}
	for _, tt := range tests {
		tr, err := NewTracker(k, tt.scheme)
		if (err != nil) != tt.wantErr {
			t.Fatalf("NewTracker(%q) err = %v, wantErr %v", tt.scheme, err, tt.wantErr)
		}
		if err == nil && tr.scheme != tt.want {
			t.Errorf("NewTracker(%q).scheme = %q, want %q", tt.scheme, tr.scheme, tt.want)
		}
	}
	if _, err := NewTracker(nil, "https"); err == nil {
		t.Error("NewTracker(nil keyring) succeeded")
	}
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	for _, tok := range []Token{
		openToken(),
		clickToken(0, "https://example.com/"),
		clickToken(7, "https://example.com/a?b=c"),
		clickToken(maxLinkIndex, "http://x.test"),
	} {
		s := MustEncode(t, tr, tok)
		want := map[byte]int{KindOpen: 115, KindClick: 123}[tok.Kind]
		if len(s) != want {
			t.Errorf("kind %c: token length %d, want %d", tok.Kind, len(s), want)
		}
		if strings.ContainsAny(s, "+/=") {
			t.Errorf("token %q is not unpadded base64url", s)
		}
		for _, id := range []string{orgID, msgID, rcpID, "0190a3c4"} {
			if strings.Contains(s, id) {
				t.Errorf("token %q carries a readable id", s)
			}
		}
		got, err := tr.Decode(s)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if got != tok {
			t.Errorf("Decode = %+v, want %+v", got, tok)
		}
	}
	// Each token has its own nonce: two copies of one link do not share a token.
	if MustEncode(t, tr, openToken()) == MustEncode(t, tr, openToken()) {
		t.Error("two encodings of one token are identical")
	}
}

func TestTokenSurvivesRotation(t *testing.T) {
	t.Parallel()
	old, err := NewTracker(MustKeyring(t, masterA), "https")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := NewTracker(MustKeyring(t, masterB, masterA), "https")
	if err != nil {
		t.Fatal(err)
	}
	tok := clickToken(3, "https://example.com/")
	if got, err := rotated.Decode(MustEncode(t, old, tok)); err != nil || got != tok {
		t.Fatalf("a token from before the rotation: %+v, %v", got, err)
	}
	// Once the old master is dropped its tokens are foreign.
	fresh, err := NewTracker(MustKeyring(t, masterB), "https")
	if err != nil {
		t.Fatal(err)
	}
	mustInvalid(t, fresh, MustEncode(t, old, tok))
}

func mustInvalid(tb testing.TB, t *Tracker, s string) {
	tb.Helper()
	tok, err := t.Decode(s)
	if ports.ErrorCode(err) != ports.CodeInvalidArgument {
		tb.Fatalf("Decode(%q) = %+v, %v; want invalid_argument", s, tok, err)
	}
}

func TestTokenTamper(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	s := MustEncode(t, tr, clickToken(1, "https://example.com/"))
	sealed, err := tokenEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	// Every bit flip of every byte of the sealed value is refused.
	for i := range sealed {
		for bit := range 8 {
			b := append([]byte(nil), sealed...)
			b[i] ^= 1 << bit
			mustInvalid(t, tr, tokenEncoding.EncodeToString(b))
		}
	}
	// So is every other character at every position of the text, including the last character's spare
	// bits, which a lenient decoder would ignore.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(s) {
		for _, c := range alphabet + "+/=.~ " {
			if byte(c) == s[i] {
				continue
			}
			mustInvalid(t, tr, s[:i]+string(c)+s[i+1:])
		}
	}
	// Every truncation and an extension.
	for i := range len(s) {
		mustInvalid(t, tr, s[:i])
	}
	mustInvalid(t, tr, s+"A")
	mustInvalid(t, tr, s+s)
	mustInvalid(t, tr, strings.Repeat("A", MaxTokenLen+1))
}

func TestTokenForeign(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	other, err := NewTracker(MustKeyring(t, masterB), "https")
	if err != nil {
		t.Fatal(err)
	}
	mustInvalid(t, tr, MustEncode(t, other, openToken()))

	// A value the same keyring sealed for another purpose is not a token.
	good := MustEncode(t, tr, openToken())
	plain, err := tr.keyring.Open(mustDecodeBase64(t, good), tokenAAD)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tr.keyring.Seal(plain, []byte("postmill webhook secret"))
	if err != nil {
		t.Fatal(err)
	}
	mustInvalid(t, tr, tokenEncoding.EncodeToString(foreign))

	// Authentic payloads that are not tokens: unknown kinds, and lengths that do not fit the kind.
	click := append([]byte{KindClick}, plain[1:]...)
	for name, p := range map[string][]byte{
		"unknown kind":        append([]byte{'x'}, plain[1:]...),
		"empty":               {},
		"open with link":      append(append([]byte(nil), plain...), 0, 1, 0, 0, 0, 0),
		"click without link":  click,
		"click short by one":  append(append([]byte(nil), click...), 0, 1, 0, 0, 0),
		"open short by one":   plain[:len(plain)-1],
		"open longer by one":  append(append([]byte(nil), plain...), 0),
		"click longer by one": append(append([]byte(nil), click...), 0, 1, 0, 0, 0, 0, 0),
	} {
		sealed, err := tr.keyring.Seal(p, tokenAAD)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Decode(tokenEncoding.EncodeToString(sealed)); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("%s: Decode err = %v, want invalid_argument", name, err)
		}
	}
	for _, s := range []string{"", "not a token", "AAAA", "%2F%2F"} {
		mustInvalid(t, tr, s)
	}
}

func mustDecodeBase64(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := tokenEncoding.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestEncodeRefuses(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	for name, tok := range map[string]Token{
		"unknown kind":        {Kind: 'x', OrganizationID: orgID, MessageID: msgID, RecipientID: rcpID},
		"organization id":     {Kind: KindOpen, OrganizationID: "org-1", MessageID: msgID, RecipientID: rcpID},
		"message id":          {Kind: KindOpen, OrganizationID: orgID, MessageID: "", RecipientID: rcpID},
		"recipient id":        {Kind: KindOpen, OrganizationID: orgID, MessageID: msgID, RecipientID: "r"},
		"negative link index": clickToken(-1, "https://x.test"),
		"link index too big":  clickToken(maxLinkIndex+1, "https://x.test"),
	} {
		if s, err := tr.Encode(tok); err == nil {
			t.Errorf("%s: Encode = %q, want an error", name, s)
		}
	}
}

func TestLinkDigest(t *testing.T) {
	t.Parallel()
	if LinkDigest("https://a.test/") == LinkDigest("https://a.test") {
		t.Error("digests of different URLs collide")
	}
	if LinkDigest("https://a.test/") != LinkDigest("https://a.test/") {
		t.Error("digest is not deterministic")
	}
}

func BenchmarkTokenSealOpen(b *testing.B) {
	tr := MustTracker(b)
	tok := clickToken(12, "https://example.com/landing?utm_source=postmill")
	b.ReportAllocs()
	for b.Loop() {
		s, err := tr.Encode(tok)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Decode(s); err != nil {
			b.Fatal(err)
		}
	}
}
