package submission

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestSplitRecipientsFollowsTheEnvelope(t *testing.T) {
	t.Parallel()
	req, err := parseMessage(strings.NewReader("From: a@sender.example\r\nTo: undisclosed-recipients:;\r\nSubject: s\r\n\r\nx\r\n"),
		[]string{"one@rcpt.example", "two@rcpt.example", "ONE@rcpt.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(req.To) != 0 || len(req.Cc) != 0 || !slices.Equal(req.Bcc, []string{"one@rcpt.example", "two@rcpt.example"}) {
		t.Errorf("to=%q cc=%q bcc=%q", req.To, req.Cc, req.Bcc)
	}
	req, err = parseMessage(strings.NewReader("From: a@sender.example\r\nTo: x@rcpt.example, Y@rcpt.example\r\nTo: z@rcpt.example\r\nCc: x@rcpt.example\r\nSubject: s\r\n\r\nx\r\n"),
		[]string{"y@rcpt.example", "z@rcpt.example", "x@rcpt.example"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(req.To, []string{"x@rcpt.example", "Y@rcpt.example", "z@rcpt.example"}) || len(req.Cc) != 0 || len(req.Bcc) != 0 {
		t.Errorf("every To header counts and an address is placed once: to=%q cc=%q bcc=%q", req.To, req.Cc, req.Bcc)
	}
}

func TestLegacyCharsets(t *testing.T) {
	t.Parallel()
	for charset, want := range map[string]string{"iso-8859-1": "caf\u00e9 \u0080", "windows-1252": "caf\u00e9 \u20ac", "": "caf\u00e9 \u20ac"} {
		msg := "From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: text/plain; charset=" + charset + "\r\n\r\ncaf\xe9 \x80"
		if charset == "" {
			msg = strings.Replace(msg, "; charset=", "", 1)
		}
		req, err := parseMessage(strings.NewReader(msg), []string{"b@rcpt.example"})
		if err != nil || req.Text != want {
			t.Errorf("charset %q: %q %v, want %q", charset, req.Text, err, want)
		}
	}
}

func TestTooManyAttachments(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n")
	for i := 0; i <= ports.MaxAttachments; i++ {
		fmt.Fprintf(&b, "--B\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f%d\r\n\r\nx\r\n", i)
	}
	b.WriteString("--B--\r\n")
	_, err := parseMessage(strings.NewReader(b.String()), []string{"b@rcpt.example"})
	if pe, ok := ports.AsError(err); !ok || pe.Code != ports.CodeInvalidArgument || pe.Details[0].Path != "attachments" {
		t.Errorf("21 attachments: %v", err)
	}
}

func TestSinglePartHTMLAndHeaderFilter(t *testing.T) {
	t.Parallel()
	req, err := parseMessage(strings.NewReader("From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\n"+
		"X-Mailer: client 1.0\r\nx-postmill-tenant: other\r\nX-Long: folded\r\n continued\r\nContent-Type: text/html\r\n\r\n<b>hi</b>"),
		[]string{"b@rcpt.example"})
	if err != nil {
		t.Fatal(err)
	}
	if req.HTML != "<b>hi</b>" || req.Text != "" || len(req.Attachments) != 0 {
		t.Errorf("single-part html: %+v", req)
	}
	if len(req.Headers) != 2 || req.Headers["X-Mailer"] != "client 1.0" || req.Headers["X-Long"] != "folded continued" {
		t.Errorf("headers %v", req.Headers)
	}
}

// Threading and other fields a client sets reach the send as custom headers; the fields Postmill writes
// or the request carries otherwise, and trace fields, do not. A References field too long for one line
// keeps its first id and the latest ones.
func TestSubmittedHeadersKept(t *testing.T) {
	t.Parallel()
	var refs []string
	for i := range 60 {
		refs = append(refs, fmt.Sprintf("<message-%02d@client.example>", i))
	}
	req, err := parseMessage(strings.NewReader("From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\n"+
		"Message-ID: <mine@client.example>\r\nDate: Sat, 28 Nov 2026 10:00:00 +0000\r\nSender: x@sender.example\r\n"+
		"In-Reply-To: <parent@client.example>\r\nReferences: "+strings.Join(refs, "\r\n ")+"\r\n"+
		"Importance: high\r\nReceived: from somewhere\r\nAuthentication-Results: spoofed\r\nARC-Seal: x\r\n"+
		"Resent-From: r@x.example\r\nContent-Language: en\r\nX-Mailer: client\r\n\r\nbody"),
		[]string{"b@rcpt.example"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"In-Reply-To": "<parent@client.example>", "Importance": "high", "X-Mailer": "client"}
	for name, value := range want {
		if req.Headers[name] != value {
			t.Errorf("%s = %q, want %q", name, req.Headers[name], value)
		}
	}
	got := req.Headers["References"]
	if !strings.HasPrefix(got, refs[0]+" ") || !strings.HasSuffix(got, " "+refs[59]) || len("References: ")+len(got) > ports.MaxHeaderLineChars ||
		strings.Contains(got, refs[1]+" ") {
		t.Errorf("References %q: want the first id, then the latest that fit one line", got)
	}
	if len(req.Headers) != len(want)+1 {
		t.Errorf("headers %v: want only %v and References", req.Headers, want)
	}
}

func TestInlineNeedsAContentID(t *testing.T) {
	t.Parallel()
	req, err := parseMessage(strings.NewReader("From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n"+
		"--B\r\nContent-Type: text/plain\r\n\r\nbody\r\n"+
		"--B\r\nContent-Type: image/png\r\nContent-Disposition: inline; filename=a.png\r\n\r\npng\r\n"+
		"--B\r\nContent-Type: image/png\r\nContent-Disposition: inline; filename=b.png\r\nContent-ID: <b@x>\r\n\r\npng\r\n"+
		"--B\r\nContent-Type: image/png\r\nContent-Disposition: attachment; filename=c.png\r\nContent-ID: <c@x>\r\n\r\npng\r\n--B--\r\n"),
		[]string{"b@rcpt.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Attachments) != 3 || req.Attachments[0].Inline || !req.Attachments[1].Inline || req.Attachments[1].ContentID != "b@x" || req.Attachments[2].Inline {
		t.Errorf("attachments %+v", req.Attachments)
	}
}

// endlessBase64 is a base64 body that never ends.
type endlessBase64 struct{ n int64 }

func (e *endlessBase64) Read(p []byte) (int, error) {
	const line = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\r\n"
	n := 0
	for n+len(line) <= len(p) {
		n += copy(p[n:], line)
	}
	e.n += int64(n)
	return n, nil
}

// TestOversizedAttachmentIsRefusedWhileStreaming: the parser reads a message as a stream and refuses an
// attachment once it crosses SPEC §8's bound, never holding more than that bound of it.
func TestOversizedAttachmentIsRefusedWhileStreaming(t *testing.T) {
	t.Parallel()
	body := &endlessBase64{}
	head := "From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n" +
		"--B\r\nContent-Type: text/plain\r\n\r\nbody\r\n" +
		"--B\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=big.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n"
	_, err := parseMessage(io.MultiReader(strings.NewReader(head), body), []string{"b@rcpt.example"})
	pe, ok := ports.AsError(err)
	if !ok || len(pe.Details) != 1 || pe.Details[0].Path != "attachments.0.content" || pe.Details[0].Message != msgAttachmentTooLarge {
		t.Fatalf("parseMessage: %v", err)
	}
	// base64 is 4 bytes for 3; allow for the parser's buffers on top.
	if limit := int64(ports.MaxAttachmentBytes)*4/3 + 2<<20; body.n > limit {
		t.Errorf("read %d bytes of the attachment, more than %d", body.n, limit)
	}

	// The attachments together are bounded as well.
	var b strings.Builder
	b.WriteString("From: a@sender.example\r\nTo: b@rcpt.example\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n")
	chunk := strings.Repeat("x", 9<<20)
	for i := range 3 {
		fmt.Fprintf(&b, "--B\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=%d.bin\r\n\r\n%s\r\n", i, chunk)
	}
	b.WriteString("--B--\r\n")
	_, err = parseMessage(strings.NewReader(b.String()), []string{"b@rcpt.example"})
	if pe, ok := ports.AsError(err); !ok || len(pe.Details) != 1 || pe.Details[0].Path != "attachments" {
		t.Errorf("27 MiB of attachments: %v", err)
	}
}
