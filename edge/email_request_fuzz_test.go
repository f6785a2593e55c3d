package edge

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzDecodeBase64 checks the attachment content path of the send body on any string: Resolve refuses
// oversized attachments from decodedLen before anything is decoded, so whenever decodeBase64 accepts a
// string, decodedLen must be exactly the number of bytes it yields (an underestimate would let an attachment
// past the SPEC §8 limits, an overestimate would refuse one within them). And whatever the bytes, every
// spelling a client may send (standard or URL-safe alphabet, padded or not, wrapped in CRLF or LF lines as
// MIME does) decodes back to them, with decodedLen agreeing.
func FuzzDecodeBase64(f *testing.F) {
	for _, seed := range []string{
		"", "QQ==", "QQ", "QQ=", "QUI=", "QUJD", "-_-_", "+/+/", "+/-_", "ab+-", "a", "a===", "====", "=",
		"JVBERi0xLjQKcmVwb3J0", "iVBORw0KGgpsb2dv", "iVBO\r\nRw0K\nGgps\r\nb2dv\r\n", "QQ=\n=", "QQ\r\n==",
		"QUJD\n\n\n", "\r\n", "ab cd", "***=", "QQ==QQ==", "QUJD\x00", "//8=", "__8",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := decodedLen(s)
		if n < 0 || n > int64(len(s)) {
			t.Fatalf("decodedLen(%q) = %d", s, n)
		}
		if b, err := decodeBase64(s); err == nil && int64(len(b)) != n {
			t.Fatalf("decodeBase64(%q) gave %d bytes, decodedLen says %d", s, len(b), n)
		}

		data := []byte(s)
		std := base64.StdEncoding.EncodeToString(data)
		var wrapped strings.Builder
		for i := 0; i < len(std); i += 76 {
			wrapped.WriteString(std[i:min(i+76, len(std))])
			wrapped.WriteString([]string{"\r\n", "\n"}[i/76%2])
		}
		for _, enc := range []string{
			std,
			base64.RawStdEncoding.EncodeToString(data),
			base64.URLEncoding.EncodeToString(data),
			base64.RawURLEncoding.EncodeToString(data),
			wrapped.String(),
		} {
			got, err := decodeBase64(enc)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("decodeBase64(%q) = %q, %v; want %q", enc, got, err, data)
			}
			if n := decodedLen(enc); n != int64(len(data)) {
				t.Fatalf("decodedLen(%q) = %d, want %d", enc, n, len(data))
			}
		}
	})
}
