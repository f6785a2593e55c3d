package mta

import (
	"bufio"
	"bytes"
	"net/textproto"
	"testing"
)

// TestCrlfLinesMatchesDATA: writeContent sends what net/textproto's DotWriter does, the content sent as a
// BDAT chunk is that less the dot-stuffing and the final dot, and a canonical content is sent without a
// copy.
func TestCrlfLinesMatchesDATA(t *testing.T) {
	for _, in := range []string{
		"", "a\r\nb\r\n", "a\nb\n", "a\r\nb", "\n.dot\r\n..two\nend", "no line end",
	} {
		var data bytes.Buffer
		w := bufio.NewWriter(&data)
		if err := writeContent(w, []byte(in)); err != nil {
			t.Fatal(err)
		}
		// The DATA content is what net/textproto's DotWriter (go-smtp's, without PIPELINING) sends.
		var dot bytes.Buffer
		dw := textproto.NewWriter(bufio.NewWriter(&dot)).DotWriter()
		if _, err := dw.Write([]byte(in)); err != nil || dw.Close() != nil {
			t.Fatal(err)
		}
		// Except for no content at all, which DotWriter sends as one empty line.
		if in != "" && !bytes.Equal(data.Bytes(), dot.Bytes()) {
			t.Errorf("%q: DATA content %q, DotWriter's %q", in, data.Bytes(), dot.Bytes())
		}
		unstuffed := bytes.ReplaceAll(append([]byte("\r\n"), data.Bytes()...), []byte("\r\n."), []byte("\r\n"))[2:]
		want := bytes.TrimSuffix(unstuffed, []byte("\r\n"))
		if in == "" {
			want = nil
		}
		if got := crlfLines([]byte(in)); !bytes.Equal(got, want) {
			t.Errorf("%q: chunk %q, DATA content %q", in, got, want)
		}
	}
	canonical := []byte("Subject: x\r\n\r\nbody\r\n")
	if got := crlfLines(canonical); &got[0] != &canonical[0] {
		t.Error("a canonical content was copied")
	}
}
