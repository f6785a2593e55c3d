package inbound

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestPartsNested: in a message nesting multipart/alternative, multipart/related and message/rfc822 parts
// (walked into, kept whole, single-part), every attachment gets its IMAP section number and Extract gives
// back exactly the bytes the parser decoded at that number.
func TestPartsNested(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "received-nested-related-rfc822.eml"))
	if err != nil {
		t.Fatal(err)
	}
	m := parseMail(raw, "", nil)
	want := []struct{ path, name, ctype, prefix string }{
		{"1.2.2", "logo.png", "image/png", "\x00\x01\x02"},
		{"2.1", "", "text/plain", "The contract is attached."},
		{"2.2", "contract.pdf", "application/pdf", "%PDF-1.4"},
		{"3", "kept-whole.eml", "message/rfc822", "From: Finn <finn@example.org>"},
		{"4", "numbers.csv", "text/csv", "a,b,c\n1,2,3\nété,x,y"},
		{"5.1", "single.bin", "application/octet-stream", "single part body"},
	}
	if len(m.Attachments) != len(want) {
		t.Fatalf("%d attachments, want %d", len(m.Attachments), len(want))
	}
	for i, w := range want {
		a := m.Attachments[i]
		if a.PartPath != w.path || a.Filename != w.name || a.ContentType != w.ctype || !strings.HasPrefix(string(a.Data), w.prefix) {
			t.Errorf("attachment %d = %s %q %s %q, want %+v", i, a.PartPath, a.Filename, a.ContentType, a.Data, w)
		}
		got, err := Parts{}.Extract(context.Background(), raw, a.PartPath)
		if err != nil || !bytes.Equal(got, a.Data) {
			t.Errorf("Extract(%s) = %q, %v; want %q", a.PartPath, got, err, a.Data)
		}
	}
	for _, p := range []string{"", "1", "1.1", "1.2.1", "2", "5", "6", "1.2.2.1", "x"} {
		if _, err := (Parts{}).Extract(context.Background(), raw, p); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Errorf("Extract(%q) error %v, want not_found (bodies and containers are not attachments)", p, err)
		}
	}
}

// TestPartsFixtures: for every received fixture, each attachment the parser found is extracted byte for
// byte from the raw message by its part path; a single-part message's body is part 1.
func TestPartsFixtures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "received-*.eml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	single := []byte("Subject: a file\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n")
	raws := map[string][]byte{"single": single}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raws[filepath.Base(f)] = raw
	}
	for name, raw := range raws {
		m := parseMail(raw, "", nil)
		for _, a := range m.Attachments {
			got, err := Parts{}.Extract(context.Background(), raw, a.PartPath)
			if err != nil || !bytes.Equal(got, a.Data) {
				t.Errorf("%s: Extract(%s) = %d bytes, %v; want %d bytes", name, a.PartPath, len(got), err, len(a.Data))
			}
		}
		if name == "single" && (len(m.Attachments) != 1 || m.Attachments[0].PartPath != "1" || string(m.Attachments[0].Data) != "%PDF-1.4\n") {
			t.Errorf("single-part message: %+v", m.Attachments)
		}
	}
}
