package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// scanAll feeds body to a scanner in chunks of several sizes, so that no boundary (inside an escape, between
// a key and its colon) changes the verdict, and returns the violations (the same for every chunk size, or
// the test fails). TestScannerChunkBoundaries splits small bodies at every byte.
func scanAll(t *testing.T, batch bool, body string) []ports.FieldViolation {
	t.Helper()
	var first []ports.FieldViolation
	for i, chunk := range []int{len(body) + 1, 13, 4093} {
		s := newSizeScanner(batch)
		for i := 0; i < len(body); i += chunk {
			s.feed([]byte(body[i:min(i+chunk, len(body))]))
		}
		if i == 0 {
			first = s.violations
		} else if !slices.Equal(s.violations, first) {
			t.Fatalf("chunks of %d: %v, in one piece: %v", chunk, s.violations, first)
		}
	}
	return first
}

// TestScannerChunkBoundaries splits a small body at every pair of positions: the path and the count come
// out the same however the bytes arrive.
func TestScannerChunkBoundaries(t *testing.T) {
	t.Parallel()
	// Up to the end of the html value, so that the scanner is still inside it at the end.
	body := `{"x":[1,{"y":"z"}], "emails":[{"ht\u006dl" : "a\"b\\c\/d\n\u00e9\ud83d\ude00`
	want := int64(len("a\"b\\c/d\né😀"))
	for i := 0; i <= len(body); i++ {
		for j := i; j <= len(body); j++ {
			s := newSizeScanner(true)
			for _, part := range []string{body[:i], body[i:j], body[j:]} {
				s.feed([]byte(part))
			}
			if s.role != roleBodyPart || s.n != want || s.path != "emails.0.html" {
				t.Fatalf("split at %d and %d: counted %d at %q, want %d at emails.0.html", i, j, s.n, s.path, want)
			}
		}
	}
}

// TestScannerCountsLikeDecodedLen: the decoded size the scanner takes from a JSON string, escapes included,
// is decodedLen of the decoded string, on both sides of each bound.
func TestScannerCountsLikeDecodedLen(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	groups := strings.Repeat("QUJD", 10*mib/3) // 10 MiB less one byte, decoded
	for _, tc := range []struct {
		name string
		json string // the JSON string's text, escapes as sent
		over bool
	}{
		{"exactly 10 MiB", groups + "QQ==", false},
		{"10 MiB and a byte", groups + "QUI=", true},
		{"padding and escaped line breaks do not count", groups + `\r\nQQ==\n`, false},
		{"escaped slashes count as one character", strings.ReplaceAll(groups, "D", `\/`) + "QQ==", false},
		{"escaped slashes past the bound", strings.ReplaceAll(groups, "D", `\/`) + "QUI=", true},
		{"an escaped pad character", groups + `QQ=\u003d`, false},
		{"an escaped letter", groups + `Q\u0055I=`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var content string
			if err := json.Unmarshal([]byte(`"`+tc.json+`"`), &content); err != nil {
				t.Fatal(err)
			}
			if (decodedLen(content) > ports.MaxAttachmentBytes) != tc.over {
				t.Fatalf("decodedLen %d disagrees with the case", decodedLen(content))
			}
			s := newSizeScanner(false)
			s.feed([]byte(`{"attachments":[{"filename":"a","content":"` + tc.json + `"}]}`))
			want := []ports.FieldViolation(nil)
			if tc.over {
				want = []ports.FieldViolation{{Path: "attachments.0.content", Message: msgAttachmentOver}}
			}
			if !slices.Equal(s.violations, want) {
				t.Fatalf("violations %v, want %v", s.violations, want)
			}
		})
	}
	// Escapes of every kind, counted one by one.
	s := newSizeScanner(false)
	s.feed([]byte(`{"html":"a\"b\\c\/d\n\u00e9\ud83d\ude00`))
	if s.n != int64(len("a\"b\\c/d\né😀")) {
		t.Fatalf("counted %d bytes, want %d", s.n, len("a\"b\\c/d\né😀"))
	}
}

func TestScannerPathsAndTotals(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	nine := strings.Repeat("A", 12*mib) // 9 MiB decoded
	att := func(content string) string { return `{"filename":"f","contentType":"x/y","content":"` + content + `"}` }
	three := `[` + att(nine) + `,` + att(nine) + `,` + att(nine) + `]`
	big := strings.Repeat("h", 5*mib+1)

	for _, tc := range []struct {
		name  string
		batch bool
		body  string
		want  []ports.FieldViolation
	}{
		{"the attachment crossing the total is named", false,
			`{"from":"a@b.c","attachments":` + three + `}`,
			[]ports.FieldViolation{{Path: "attachments.2.content", Message: msgAttachmentsSum}}},
		{"html and text over 5 MiB, keys in any order, with escapes in keys", false,
			`{"text" : "` + big + `", "subject":"s", "ht\u006dl":"` + big + `"}`,
			[]ports.FieldViolation{{Path: "text", Message: msgBodyPartOver}, {Path: "html", Message: msgBodyPartOver}}},
		{"exactly 5 MiB is fine", false, `{"html":"` + big[1:] + `"}`, nil},
		{"the same names deeper measure nothing", false,
			`{"template":{"id":"x","variables":{"html":"` + big + `","attachments":` + three + `}},"metadata":{"text":"` + big + `"}}`,
			nil},
		{"content of another field measures nothing", false, `{"attachments":[{"filename":"` + big + big + big + `"}]}`, nil},
		{"batch items are summed apart and named by index", true,
			`{"emails":[{"attachments":[` + att(nine) + `,` + att(nine) + `]},{"html":"x","attachments":` + three + `}]}`,
			[]ports.FieldViolation{{Path: "emails.1.attachments.2.content", Message: msgAttachmentsSum}}},
		{"a single send's shape inside a batch measures nothing", true, `{"html":"` + big + `"}`, nil},
		{"deep nesting is counted, not kept", false,
			`{"metadata":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `,"html":"` + big + `"}`,
			[]ports.FieldViolation{{Path: "html", Message: msgBodyPartOver}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := scanAll(t, tc.batch, tc.body); !slices.Equal(got, tc.want) {
				t.Fatalf("violations %v, want %v", got, tc.want)
			}
		})
	}
}

// countingReader is a body that says how much was read from it.
type countingReader struct {
	r    io.Reader
	read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}

// TestGuardReadsOnOnlyPastTheBound: within the bound the guard is a plain reader; past it, it stops as soon
// as a violation is known, or after reading the bound again, and hands over the byte that makes huma
// answer 413 when none is found.
func TestGuardReadsOnOnlyPastTheBound(t *testing.T) {
	t.Parallel()
	readAll := func(g *bodyGuard, max int64) (int64, error) {
		return io.Copy(io.Discard, io.LimitReader(g, max+1))
	}
	exact := `{"html":"` + strings.Repeat("h", 90) + `"}`
	g := &bodyGuard{body: strings.NewReader(exact), limit: int64(len(exact)), drain: 1000, scan: newSizeScanner(false)}
	if n, err := readAll(g, g.limit); n != int64(len(exact)) || err != nil {
		t.Fatalf("a body of exactly the bound: %d bytes, %v", n, err)
	}

	// Over the bound with a violation early: nothing beyond the byte past the bound is read.
	over := `{"html":"` + strings.Repeat("h", 5<<20+10) + `","padding":"` + strings.Repeat("p", 2<<20) + `"}`
	src := &countingReader{r: strings.NewReader(over)}
	g = &bodyGuard{body: src, limit: 6 << 20, drain: 6 << 20, scan: newSizeScanner(false)}
	n, err := readAll(g, g.limit)
	var pe *ports.Error
	if !errors.As(err, &pe) || pe.Details[0].Path != "html" || n != g.limit || src.read != g.limit+1 {
		t.Fatalf("read %d (body %d), err %v", n, src.read, err)
	}

	// Over the bound without a violation: the drain stops at its bound and huma gets one byte too many.
	padded := `{"padding":"` + strings.Repeat("p", 4000) + `"}`
	src = &countingReader{r: strings.NewReader(padded)}
	g = &bodyGuard{body: src, limit: 1000, drain: 500, scan: newSizeScanner(false)}
	if n, err := readAll(g, g.limit); n != 1001 || err != nil {
		t.Fatalf("an oversized body without a violation: %d bytes, %v", n, err)
	}
	if src.read != 1001+500 {
		t.Fatalf("read %d bytes of the body, want the bound, one byte and the drain", src.read)
	}

	// Sizes are decided from base64 length: content that is not base64 is measured, never decoded.
	bad := `{"attachments":[{"content":"` + strings.Repeat("!", 14<<20) + `"}]}`
	g = &bodyGuard{body: bytes.NewReader([]byte(bad)), limit: 1 << 20, drain: 20 << 20, scan: newSizeScanner(false)}
	if _, err := readAll(g, g.limit); !errors.As(err, &pe) || pe.Details[0] != (ports.FieldViolation{Path: "attachments.0.content", Message: msgAttachmentOver}) {
		t.Fatalf("oversized invalid base64: %v", err)
	}
}
