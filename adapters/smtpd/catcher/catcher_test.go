package catcher_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net/netip"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/adapters/smtpd/catcher"
	"github.com/postmill/postmill/ports"
)

// fakeResolver serves TXT records from a map; a name listed in temp fails temporarily.
type fakeResolver struct {
	mu   sync.Mutex
	txt  map[string][]string
	temp map[string]bool
}

func (f *fakeResolver) LookupTXT(_ context.Context, name string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.temp[name] {
		return nil, &ports.DNSError{Kind: ports.DNSTemporary, Name: name}
	}
	if v, ok := f.txt[name]; ok {
		return v, nil
	}
	return nil, &ports.DNSError{Kind: ports.DNSNotFound, Name: name}
}
func (f *fakeResolver) LookupCNAME(context.Context, string) (string, error) { return "", nil }
func (f *fakeResolver) LookupMX(context.Context, string) ([]ports.MX, error) {
	return nil, nil
}
func (f *fakeResolver) LookupIP(context.Context, string) ([]netip.Addr, error) { return nil, nil }

type bundle struct {
	c    *catcher.Catcher
	addr string
	dir  string
	res  *fakeResolver
	key  *rsa.PrivateKey
	ctx  context.Context
}

func start(t *testing.T, mutate func(*catcher.Config)) *bundle {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	res := &fakeResolver{
		txt:  map[string][]string{"pm1._domainkey.acme.test": {"v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(pub)}},
		temp: map[string]bool{"pmtemp._domainkey.acme.test": true},
	}
	b := &bundle{dir: t.TempDir(), res: res, key: key, ctx: context.Background()}
	b.c, b.addr = mustServe(t, b.dir, res, mutate)
	return b
}

func mustServe(t *testing.T, dir string, res ports.Resolver, mutate func(*catcher.Config)) (*catcher.Catcher, string) {
	t.Helper()
	cfg := catcher.Config{Config: smtpd.Config{Addr: "127.0.0.1:0"}, Dir: dir}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := catcher.New(cfg, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := c.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c, addr.String()
}

// send delivers msg over SMTP, as the MTA would.
func (b *bundle) send(t *testing.T, from string, to []string, msg []byte) error {
	t.Helper()
	return smtp.SendMail(b.addr, nil, from, to, msg)
}

// signed signs msg with the bundle's key under selector.
func (b *bundle) signed(t *testing.T, selector string, msg string) []byte {
	t.Helper()
	var out bytes.Buffer
	err := dkim.Sign(&out, strings.NewReader(strings.ReplaceAll(msg, "\n", "\r\n")), &dkim.SignOptions{
		Domain: "acme.test", Selector: selector, Signer: b.key,
		HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

const multipartMessage = `From: Ada <ada@acme.test>
To: Bob <bob@rcpt.test>, carol@rcpt.test
Subject: =?utf-8?q?Hello_=E2=9C=93?=
Date: Sat, 21 Nov 2026 10:00:00 +0000
Message-ID: <m1@acme.test>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

plain body
--alt
Content-Type: text/html; charset=utf-8

<p>html <b>body</b></p>
--alt--
--outer
Content-Type: text/plain; name="notes.txt"
Content-Disposition: attachment; filename="notes.txt"
Content-Transfer-Encoding: base64

aGVsbG8gYXR0YWNobWVudA==
--outer--
`

func TestCatcherKeepsAndReadsMessages(t *testing.T) {
	t.Parallel()
	b := start(t, nil)
	raw := b.signed(t, "pm1", multipartMessage)
	if err := b.send(t, "b-1@bounce.acme.test", []string{"bob@rcpt.test", "carol@rcpt.test"}, raw); err != nil {
		t.Fatal(err)
	}
	list, err := b.c.ListCaught(b.ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	m := list[0]
	if m.Subject != "Hello ✓" || m.From != `"Ada" <ada@acme.test>` || len(m.To) != 2 || m.To[1] != "carol@rcpt.test" ||
		m.EnvelopeFrom != "b-1@bounce.acme.test" || len(m.EnvelopeTo) != 2 || m.Size != int64(len(raw)) {
		t.Errorf("summary = %+v", m)
	}
	if m.DKIM.Result != ports.DKIMPass || m.DKIM.Domain != "acme.test" || m.DKIM.Selector != "pm1" {
		t.Errorf("DKIM = %+v, want pass for acme.test/pm1", m.DKIM)
	}

	full, err := b.c.Caught(b.ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(full.Text) != "plain body" || !strings.Contains(full.HTML, "<b>body</b>") {
		t.Errorf("text %q html %q", full.Text, full.HTML)
	}
	if len(full.Attachments) != 1 || full.Attachments[0].Filename != "notes.txt" || full.Attachments[0].Size != 16 ||
		full.Attachments[0].Inline {
		t.Fatalf("attachments = %+v", full.Attachments)
	}
	var sawSubject bool
	for _, h := range full.Headers {
		sawSubject = sawSubject || (h.Name == "Subject" && h.Value == "Hello ✓")
	}
	if !sawSubject {
		t.Errorf("headers lack the decoded Subject: %+v", full.Headers)
	}
	a, body, err := b.c.CaughtAttachment(b.ctx, m.ID, 0)
	if err != nil || string(body) != "hello attachment" || a.ContentType != "text/plain" {
		t.Fatalf("attachment = %+v %q %v", a, body, err)
	}
	if _, _, err := b.c.CaughtAttachment(b.ctx, m.ID, 1); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("a second attachment: %v", err)
	}
	got, err := b.c.CaughtRaw(b.ctx, m.ID)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("raw differs from what was sent (%d vs %d bytes): %v", len(got), len(raw), err)
	}
	for _, bad := range []string{"../../etc/passwd", "", strings.Repeat("0", 24), m.ID + "x"} {
		if _, err := b.c.Caught(b.ctx, bad); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Errorf("Caught(%q) = %v, want not_found", bad, err)
		}
	}
}

// TestCatcherDKIMResults: a changed message fails, an unpublished selector and a temporary DNS failure
// are told apart, and an unsigned message has no result.
func TestCatcherDKIMResults(t *testing.T) {
	t.Parallel()
	b := start(t, nil)
	tampered := bytes.Replace(b.signed(t, "pm1", multipartMessage), []byte("plain body"), []byte("plain b0dy"), 1)
	cases := []struct {
		name string
		raw  []byte
		want string
	}{
		{"tampered", tampered, ports.DKIMFail},
		{"unpublished", b.signed(t, "pmnone", multipartMessage), ports.DKIMPermError},
		{"temporary", b.signed(t, "pmtemp", multipartMessage), ports.DKIMTempError},
		{"unsigned", []byte(strings.ReplaceAll(multipartMessage, "\n", "\r\n")), ports.DKIMNone},
	}
	for _, c := range cases {
		if err := b.send(t, "a@acme.test", []string{"x@rcpt.test"}, c.raw); err != nil {
			t.Fatal(err)
		}
		list, _ := b.c.ListCaught(b.ctx)
		got := list[0].DKIM
		if got.Result != c.want || (c.want != ports.DKIMPass && got.Reason == "") {
			t.Errorf("%s: DKIM = %+v, want %s with a reason", c.name, got, c.want)
		}
	}
}

// TestCatcherBoundsAndRestart: only the newest Max messages are kept (the files of the others are gone), an
// oversized message is refused, and a restart on the same directory finds what was kept, without what a
// crash left half written.
func TestCatcherBoundsAndRestart(t *testing.T) {
	t.Parallel()
	b := start(t, func(c *catcher.Config) { c.Max = 3; c.MaxMessageBytes = 4096 })
	for i := range 5 {
		msg := "From: a@acme.test\r\nTo: x@rcpt.test\r\nSubject: n" + string(rune('0'+i)) + "\r\n\r\nbody\r\n"
		if err := b.send(t, "a@acme.test", []string{"x@rcpt.test"}, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	big := "Subject: big\r\n\r\n" + strings.Repeat(strings.Repeat("x", 70)+"\r\n", 80)
	if err := b.send(t, "a@acme.test", []string{"x@rcpt.test"}, []byte(big)); err == nil || !strings.Contains(err.Error(), "552") {
		t.Fatalf("oversized message: %v, want 552", err)
	}
	list, _ := b.c.ListCaught(b.ctx)
	var subjects []string
	for _, m := range list {
		subjects = append(subjects, m.Subject)
	}
	if strings.Join(subjects, ",") != "n4,n3,n2" {
		t.Fatalf("kept %v, want the newest three, newest first", subjects)
	}
	files, _ := filepath.Glob(filepath.Join(b.dir, "*"))
	if len(files) != 6 {
		t.Fatalf("%d files in the directory, want 3 messages and 3 summaries: %v", len(files), files)
	}

	// A crash left a message without a summary and a temporary file; a restart removes both.
	_ = os.WriteFile(filepath.Join(b.dir, "0000000000000001deadbeef.eml"), []byte("x"), 0o600)
	_ = os.WriteFile(filepath.Join(b.dir, ".tmp-123"), []byte("x"), 0o600)
	again, _ := mustServe(t, b.dir, b.res, func(c *catcher.Config) { c.Max = 3 })
	list2, _ := again.ListCaught(b.ctx)
	if len(list2) != 3 || list2[0].ID != list[0].ID || list2[0].Subject != "n4" {
		t.Fatalf("after a restart: %+v", list2)
	}
	if files, _ := filepath.Glob(filepath.Join(b.dir, "*")); len(files) != 6 {
		t.Fatalf("leftovers of a crash were kept: %v", files)
	}

	if err := again.ClearCaught(b.ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := again.ListCaught(b.ctx); len(list) != 0 {
		t.Fatalf("after clearing: %+v", list)
	}
	if files, _ := filepath.Glob(filepath.Join(b.dir, "*")); len(files) != 0 {
		t.Fatalf("files left after clearing: %v", files)
	}
}
