package e2e

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"net/smtp"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

const dmarcRUA = "dmarc@reports.postmill.test"

// dmarcMail wraps a report file the way the big receivers send it: multipart/mixed, the file in base64.
func dmarcMail(t *testing.T, from, ctype, filename string, file []byte) []byte {
	t.Helper()
	enc := base64.StdEncoding.EncodeToString(file)
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	return []byte(fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: Report domain: %s\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"rep\"\r\n\r\n--rep\r\nContent-Type: text/plain\r\n\r\nAggregate report.\r\n"+
		"--rep\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\n"+
		"Content-Transfer-Encoding: base64\r\n\r\n%s\r\n--rep--\r\n", from, dmarcRUA, senderDomain, ctype, filename, filename, b.String()))
}

func dmarcFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../core/dmarc/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	// The fixtures cover 2025-11-25; move them to yesterday so they stay inside every window.
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour).Unix()
	return []byte(strings.NewReplacer(
		"<begin>1764028800</begin>", fmt.Sprintf("<begin>%d</begin>", day),
		"<end>1764115199</end>", fmt.Sprintf("<end>%d</end>", day+86399),
		"<end>1764115200</end>", fmt.Sprintf("<end>%d</end>", day+86400),
	).Replace(string(b)))
}

// TestDMARCReportsMailedToTheRUA mails Google's (zip), Microsoft's (gzip) and Yahoo's (zip) aggregate reports
// to the report address over SMTP, as the receivers do, and reads the summary back: by reporter and source
// IP, with alignment and dispositions, for the organization owning the domain only; a report mailed twice
// counts once; the window is SPEC §8's.
func TestDMARCReportsMailedToTheRUA(t *testing.T) {
	w := MustMailWorld(t, func(c *app.Config) { c.DMARCRua = dmarcRUA })

	zipOf := func(name string, b []byte) []byte {
		var buf bytes.Buffer
		z := zip.NewWriter(&buf)
		f, _ := z.Create(name)
		_, _ = f.Write(b)
		_ = z.Close()
		return buf.Bytes()
	}
	var gz bytes.Buffer
	g := gzip.NewWriter(&gz)
	_, _ = g.Write(dmarcFixture(t, "microsoft.xml"))
	_ = g.Close()
	mails := []struct {
		from string
		raw  []byte
	}{
		{"noreply-dmarc-support@google.com", dmarcMail(t, "noreply-dmarc-support@google.com", "application/zip",
			"google.com!sender.example!1764028800!1764115199.zip", zipOf("google.com!sender.example!1764028800!1764115199.xml", dmarcFixture(t, "google.xml")))},
		{"dmarcreport@microsoft.com", dmarcMail(t, "dmarcreport@microsoft.com", "application/gzip",
			"enterprise.protection.outlook.com!sender.example!1764028800!1764115200.xml.gz", gz.Bytes())},
		{"dmarchelp@yahooinc.com", dmarcMail(t, "dmarchelp@yahooinc.com", "application/zip",
			"yahoo.com!sender.example!1764028800!1764115199.xml.zip", zipOf("yahoo.com!sender.example!1764028800!1764115199.xml", dmarcFixture(t, "yahoo.xml")))},
	}
	for _, m := range mails {
		if err := smtp.SendMail(w.app.InboundAddr(), nil, m.from, []string{dmarcRUA}, m.raw); err != nil {
			t.Fatalf("mailing %s's report: %v", m.from, err)
		}
	}
	// Google's report again: stored once.
	if err := smtp.SendMail(w.app.InboundAddr(), nil, mails[0].from, []string{strings.ToUpper(dmarcRUA)}, mails[0].raw); err != nil {
		t.Fatal(err)
	}

	sum := expect(t, w.get("/v1/reputation/dmarc?days=365&domain="+senderDomain, w.owner.access), 200)
	sources, _ := sum.body["sources"].([]any)
	type key struct{ reporter, ip string }
	got := map[key]map[string]any{}
	for _, s := range sources {
		row := s.(map[string]any)
		got[key{row["reporter"].(string), row["sourceIp"].(string)}] = row
	}
	if len(got) != 6 {
		t.Fatalf("summary has %d rows, want 6: %s", len(got), sum.raw)
	}
	if g := got[key{"google.com", "203.0.113.25"}]; g["messages"] != float64(120) || g["dmarcPass"] != float64(120) || g["dispositionNone"] != float64(120) {
		t.Errorf("google's own row (counted once): %v", g)
	}
	if m := got[key{"Enterprise Outlook", "203.0.113.25"}]; m["dkimAligned"] != float64(40) || m["spfAligned"] != float64(0) || m["spfPass"] != float64(40) {
		t.Errorf("microsoft's unaligned SPF: %v", m)
	}
	if m := got[key{"Enterprise Outlook", "192.0.2.99"}]; m["dispositionQuarantine"] != float64(5) || m["dmarcPass"] != float64(0) {
		t.Errorf("microsoft's quarantined spoof: %v", m)
	}
	if y := got[key{"Yahoo", "198.51.100.7"}]; y["dispositionReject"] != float64(2) {
		t.Errorf("yahoo's rejected spoof: %v", y)
	}

	// Mail to the address that holds no report is taken and dropped, not bounced.
	if err := smtp.SendMail(w.app.InboundAddr(), nil, "someone@example.org", []string{dmarcRUA},
		[]byte("From: someone@example.org\r\nSubject: hello\r\n\r\nnot a report\r\n")); err != nil {
		t.Errorf("a message without a report: %v", err)
	}

	// The window of SPEC §8, and sessions only.
	for _, q := range []string{"0", "366", "x"} {
		errorBody(t, w.get("/v1/reputation/dmarc?days="+q, w.owner.access), 400, "", "")
	}
	errorBody(t, w.get("/v1/reputation/dmarc", w.key), 401, "", "")
	if s := expect(t, w.get("/v1/reputation/dmarc?domain=other.example", w.owner.access), 200); len(s.body["sources"].([]any)) != 0 {
		t.Errorf("another domain: %s", s.raw)
	}

	// Tenancy: an organization that does not own sender.example sees nothing, even naming it.
	other := w.MustSignup("other@dmarc.example", "")
	if s := expect(t, w.get("/v1/reputation/dmarc?days=365&domain="+senderDomain, other.access), 200); len(s.body["sources"].([]any)) != 0 {
		t.Errorf("another organization sees the reports: %s", s.raw)
	}
}
