package dmarc_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/postmill/postmill/core/dmarc"
)

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func zipped(t testing.TB, name string, b []byte) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, _ := w.Create(name)
	_, _ = f.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// reportMail wraps a report file the way the reporters send it: a short text part and the attachment in
// base64.
func reportMail(from, subject, ctype, filename string, file []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(file)
	var lines []string
	for len(enc) > 76 {
		lines, enc = append(lines, enc[:76]), enc[76:]
	}
	lines = append(lines, enc)
	return []byte(fmt.Sprintf("From: %s\r\nTo: dmarc@postmill.example\r\nSubject: %s\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nThis is an aggregate report.\r\n"+
		"--b1\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n--b1--\r\n",
		from, subject, ctype, filename, filename, strings.Join(lines, "\r\n")))
}

func fixture(t testing.TB, name string) []byte {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseReportersFormats(t *testing.T) {
	google := reportMail("noreply-dmarc-support@google.com", "Report domain: sender.example Submitter: google.com Report-ID: 4823948150375029347",
		"application/zip", "google.com!sender.example!1764028800!1764115199.zip", zipped(t, "google.com!sender.example!1764028800!1764115199.xml", fixture(t, "google.xml")))
	microsoft := reportMail("dmarcreport@microsoft.com", "Report Domain: sender.example Submitter: enterprise.protection.outlook.com Report-ID: <6f0e8c5b2a7d4e1f9b3c0a8d7e6f5a4b>",
		"application/gzip", "enterprise.protection.outlook.com!sender.example!1764028800!1764115200.xml.gz", gz(t, fixture(t, "microsoft.xml")))
	yahoo := reportMail("dmarchelp@yahooinc.com", "Report Domain: sender.example Submitter: yahoo.com Report-ID: <1764115200.481516>",
		"application/zip", "yahoo.com!sender.example!1764028800!1764115199.xml.zip", zipped(t, "yahoo.com!sender.example!1764028800!1764115199.xml", fixture(t, "yahoo.xml")))
	for name, tc := range map[string]struct {
		raw                      []byte
		org, id, policy          string
		records, first, firstIPs int64
	}{
		"google":    {google, "google.com", "4823948150375029347", "none", 2, 120, 0},
		"microsoft": {microsoft, "Enterprise Outlook", "6f0e8c5b2a7d4e1f9b3c0a8d7e6f5a4b", "quarantine", 2, 40, 0},
		"yahoo":     {yahoo, "Yahoo", "1764115200.481516", "reject", 2, 17, 0},
	} {
		t.Run(name, func(t *testing.T) {
			reps, err := dmarc.ParseMessage(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			r := reps[0]
			if len(reps) != 1 || r.ReporterOrg != tc.org || r.ReportID != tc.id || r.Domain != "sender.example" || r.Policy != tc.policy ||
				int64(len(r.Records)) != tc.records || r.Records[0].Count != tc.first || r.Begin.Unix() != 1764028800 {
				t.Fatalf("report = %+v", r)
			}
			if rec := r.Records[0]; rec.SourceIP != "203.0.113.25" || !rec.DKIMAligned || rec.DKIMResult != "pass" {
				t.Errorf("first record = %+v", rec)
			}
		})
	}
	// Microsoft's SPF authenticated for another domain: passed, not aligned.
	reps, _ := dmarc.ParseMessage(microsoft)
	if rec := reps[0].Records[0]; rec.SPFAligned || rec.SPFResult != "pass" {
		t.Errorf("unaligned SPF pass = %+v", rec)
	}
	if rec := reps[0].Records[1]; rec.Disposition != "quarantine" || rec.DKIMResult != "none" {
		t.Errorf("quarantined record = %+v", rec)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, raw := range map[string][]byte{
		"plain mail":  []byte("From: a@b.example\r\nSubject: hi\r\n\r\nhello\r\n"),
		"not xml zip": reportMail("a@b.example", "r", "application/zip", "r.zip", zipped(t, "r.txt", []byte("x"))),
		"no domain":   reportMail("a@b.example", "r", "text/xml", "r.xml", []byte(`<feedback><report_metadata><org_name>x</org_name><report_id>1</report_id></report_metadata></feedback>`)),
		"bad gzip":    reportMail("a@b.example", "r", "application/gzip", "r.xml.gz", []byte{0x1f, 0x8b, 0, 1, 2}),
	} {
		if _, err := dmarc.ParseMessage(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A gzip bomb: a little compressed data that expands past the bound is refused.
	bomb := gz(t, bytes.Repeat([]byte(" "), dmarc.MaxXMLBytes+10))
	if _, err := dmarc.ParseReport(bomb); err == nil || !strings.Contains(err.Error(), "expands past") {
		t.Errorf("gzip bomb: %v", err)
	}
}

// FuzzParseReport feeds arbitrary bytes, as XML, gzip and zip, to the report parser: it never panics and
// whatever it accepts is a report with a reporter, an id and a domain.
func FuzzParseReport(f *testing.F) {
	for _, name := range []string{"google.xml", "microsoft.xml", "yahoo.xml"} {
		b := fixture(f, name)
		f.Add(b)
		f.Add(gz(f, b))
		f.Add(zipped(f, "r.xml", b))
	}
	f.Add([]byte("PK\x03\x04"))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := dmarc.ParseReport(data)
		if err == nil && (r.ReporterOrg == "" || r.ReportID == "" || r.Domain == "") {
			t.Fatalf("accepted a report without reporter, id or domain: %+v", r)
		}
		for _, rec := range r.Records {
			if rec.Count < 0 {
				t.Fatal("negative count accepted")
			}
		}
	})
}

// FuzzParseMessage does the same for whole mails.
func FuzzParseMessage(f *testing.F) {
	f.Add(reportMail("a@b.example", "r", "application/gzip", "r.xml.gz", gz(f, fixture(f, "yahoo.xml"))))
	f.Add([]byte("From: a@b.example\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n\r\n--x--\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = dmarc.ParseMessage(raw)
	})
}
