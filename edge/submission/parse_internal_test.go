package submission

import (
	"fmt"
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
