package edge

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func TestDecodedLenMatchesDecoding(t *testing.T) {
	t.Parallel()
	for n := 0; n < 70; n++ {
		data := bytes.Repeat([]byte{0xfb}, n)
		std := base64.StdEncoding.EncodeToString(data)
		wrapped := std
		if len(std) > 8 {
			wrapped = std[:4] + "\r\n" + std[4:8] + "\n" + std[8:] + "\r\n"
		}
		for name, enc := range map[string]string{
			"std":      std,
			"raw std":  base64.RawStdEncoding.EncodeToString(data),
			"url":      base64.URLEncoding.EncodeToString(data),
			"raw url":  base64.RawURLEncoding.EncodeToString(data),
			"wrapped":  wrapped,
			"trailing": std + "\n",
		} {
			if got := decodedLen(enc); got != int64(n) {
				t.Errorf("%s of %d bytes: decodedLen %d", name, n, got)
			}
			out, err := decodeBase64(enc)
			if err != nil || !bytes.Equal(out, data) {
				t.Errorf("%s of %d bytes: decoded %d bytes, %v", name, n, len(out), err)
			}
		}
	}
	for _, bad := range []string{"a", "a===", "ab+-", "ab cd", "***="} {
		if _, err := decodeBase64(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	if got := decodedLen(strings.Repeat("A", 4<<20)); got != 3<<20 {
		t.Errorf("4 MiB of base64 is %d bytes", got)
	}
}
