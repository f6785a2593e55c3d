package mta_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// node is a parsed MIME entity for assertions.
type node struct {
	Type     string
	Params   map[string]string
	Header   message.Header
	Body     []byte
	Children []node
}

func parseEntity(tb testing.TB, e *message.Entity) node {
	tb.Helper()
	t, params, _ := e.Header.ContentType()
	n := node{Type: t, Params: params, Header: e.Header}
	if mr := e.MultipartReader(); mr != nil {
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				tb.Fatal(err)
			}
			n.Children = append(n.Children, parseEntity(tb, p))
		}
		return n
	}
	body, err := io.ReadAll(e.Body)
	if err != nil {
		tb.Fatal(err)
	}
	n.Body = body
	return n
}

func parseMessage(tb testing.TB, data []byte) node {
	tb.Helper()
	e, err := message.Read(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	return parseEntity(tb, e)
}

func oneEnvelope(tb testing.TB, ts *testServer) envelope {
	tb.Helper()
	envs := ts.Envelopes()
	if len(envs) != 1 {
		tb.Fatalf("server received %d transactions, want 1", len(envs))
	}
	return envs[0]
}

func TestDeliversFullMessageIntact(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{DataReply: smtpErr(250, "2.0.0", "Ok: queued as 4F2A")})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test", Preference: 10}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	out := outbound(t, "rcpt.test", "to:Ann <ann@rcpt.test>", "cc:carl@rcpt.test", "bcc:hidden@rcpt.test")
	out.To = []string{"Ann <ann@rcpt.test>", "other@elsewhere.test"}
	out.Subject = "Grüße — café ☕"
	out.ReplyTo = "support@acme.test"
	out.HTML = `<p>Hello <img src="cid:logo@acme"></p>`
	out.Text = "Hello there.\nSecond line."
	out.Headers = map[string]string{
		"X-Campaign":            "spring-2026",
		"List-Unsubscribe":      "<https://acme.test/u/1>",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		"Bcc":                   "leak@rcpt.test", // reserved: never emitted
	}
	pdf := bytes.Repeat([]byte("%PDF-1.7 binary \x00\x01\x02\xff "), 200)
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	_ = h.Blobs.Put(context.Background(), "att/org-1/m/a1", pdf, "application/pdf")
	_ = h.Blobs.Put(context.Background(), "att/org-1/m/a2", png, "image/png")
	out.Attachments = []ports.StoredAttachment{
		{ID: "a1", Filename: "report 2026.pdf", ContentType: "application/pdf", Size: int64(len(pdf)), Key: "att/org-1/m/a1"},
		{ID: "a2", Filename: "logo.png", ContentType: "image/png", Size: int64(len(png)), Inline: true, ContentID: "logo@acme", Key: "att/org-1/m/a2"},
	}

	rep, st := h.Send(out)
	if !st.Ack || !rep.Handed {
		t.Fatalf("ack=%v handed=%v, want both", st.Ack, rep.Handed)
	}
	want := "delivered|250 2.0.0 Ok: queued as 4F2A"
	for id, got := range outcomes(rep) {
		if got != want {
			t.Errorf("recipient %s: %q, want %q", id, got, want)
		}
	}

	env := oneEnvelope(t, ts)
	if env.From != out.ReturnPath {
		t.Errorf("MAIL FROM %q, want %q", env.From, out.ReturnPath)
	}
	if want := []string{"ann@rcpt.test", "carl@rcpt.test", "hidden@rcpt.test"}; !slices.Equal(env.Rcpts, want) {
		t.Errorf("RCPT TO %v, want %v", env.Rcpts, want)
	}
	if env.Helo != "mta.postmill.test" {
		t.Errorf("EHLO %q", env.Helo)
	}
	if !bytes.Contains(env.Data, []byte("\r\n\r\n")) || bytes.Contains(bytes.ReplaceAll(env.Data, []byte("\r\n"), nil), []byte("\n")) {
		t.Error("message lines are not all CRLF-terminated")
	}
	for _, line := range bytes.Split(env.Data, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("line of %d bytes exceeds RFC 5322 §2.1.1", len(line))
		}
	}
	if bytes.Contains(bytes.ToLower(env.Data), []byte("hidden@")) || bytes.Contains(bytes.ToLower(env.Data), []byte("leak@")) {
		t.Error("a Bcc address appears in the message")
	}

	root := parseMessage(t, env.Data)
	mh := mail.Header{Header: root.Header}
	if got := mh.Get("Bcc"); got != "" {
		t.Errorf("Bcc header %q", got)
	}
	checkAddrs := func(field string, want ...string) {
		t.Helper()
		list, err := mh.AddressList(field)
		if err != nil {
			t.Fatalf("%s: %v", field, err)
		}
		var got []string
		for _, a := range list {
			got = append(got, a.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", field, got, want)
		}
	}
	checkAddrs("From", `"Acme News" <news@acme.test>`)
	checkAddrs("To", `"Ann" <ann@rcpt.test>`, "<other@elsewhere.test>")
	checkAddrs("Cc", "<carl@rcpt.test>")
	checkAddrs("Reply-To", "<support@acme.test>")
	if raw := mh.Get("Subject"); !strings.HasPrefix(raw, "=?utf-8?") {
		t.Errorf("Subject not RFC 2047 encoded: %q", raw)
	}
	if s, _ := mh.Subject(); s != out.Subject {
		t.Errorf("Subject %q, want %q", s, out.Subject)
	}
	if id, _ := mh.MessageID(); id != out.MessageIDHeader {
		t.Errorf("Message-ID %q, want %q", id, out.MessageIDHeader)
	}
	if d, _ := mh.Date(); !d.Equal(out.CreatedAt) {
		t.Errorf("Date %v, want %v", d, out.CreatedAt)
	}
	for k, v := range map[string]string{"X-Campaign": "spring-2026", "List-Unsubscribe": "<https://acme.test/u/1>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click", "MIME-Version": "1.0"} {
		if got := mh.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}

	// multipart/mixed [ multipart/related [ multipart/alternative [text, html], inline png ], pdf ]
	if root.Type != "multipart/mixed" || len(root.Children) != 2 {
		t.Fatalf("root %s with %d parts", root.Type, len(root.Children))
	}
	related, att := root.Children[0], root.Children[1]
	if related.Type != "multipart/related" || len(related.Children) != 2 {
		t.Fatalf("first part %s with %d parts", related.Type, len(related.Children))
	}
	alt, inline := related.Children[0], related.Children[1]
	if alt.Type != "multipart/alternative" || len(alt.Children) != 2 {
		t.Fatalf("body %s with %d parts", alt.Type, len(alt.Children))
	}
	text, html := alt.Children[0], alt.Children[1]
	if text.Type != "text/plain" || string(text.Body) != "Hello there.\r\nSecond line." {
		t.Errorf("text part %s %q", text.Type, text.Body)
	}
	if html.Type != "text/html" || string(html.Body) != out.HTML {
		t.Errorf("html part %s %q", html.Type, html.Body)
	}
	if inline.Type != "image/png" || !bytes.Equal(inline.Body, png) || inline.Header.Get("Content-Id") != "<logo@acme>" {
		t.Errorf("inline part %s id %q, body intact %v", inline.Type, inline.Header.Get("Content-Id"), bytes.Equal(inline.Body, png))
	}
	if disp, _, _ := inline.Header.ContentDisposition(); disp != "inline" {
		t.Errorf("inline disposition %q", disp)
	}
	if att.Type != "application/pdf" || !bytes.Equal(att.Body, pdf) {
		t.Errorf("attachment %s, body intact %v", att.Type, bytes.Equal(att.Body, pdf))
	}
	disp, params, _ := att.Header.ContentDisposition()
	if disp != "attachment" || params["filename"] != "report 2026.pdf" || att.Header.Get("Content-Transfer-Encoding") != "base64" {
		t.Errorf("attachment disposition %q %v, encoding %q", disp, params, att.Header.Get("Content-Transfer-Encoding"))
	}
}

func TestSinglePartBodyWhenOnePartAndNoAttachments(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	out := outbound(t, "rcpt.test", "ann@rcpt.test")
	out.Text, out.HTML = "", "<b>only html</b>"
	h.Send(out)
	root := parseMessage(t, oneEnvelope(t, ts).Data)
	if root.Type != "text/html" || root.Params["charset"] != "utf-8" || string(root.Body) != out.HTML+"\r\n" {
		t.Errorf("got %s %v %q, want one text/html part", root.Type, root.Params, root.Body)
	}
}

func TestDKIMSignatureVerifies(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	out := outbound(t, "rcpt.test", "ann@rcpt.test", "cc:carl@rcpt.test")
	out.HTML = "<p>Hi   there</p>"
	out.ReplyTo = "help@acme.test"
	out.Headers = map[string]string{"List-Unsubscribe": "<mailto:u@acme.test>"}
	h.Send(out)
	data := oneEnvelope(t, ts).Data

	txt := dkimTXT(t)
	var asked []string
	opts := &dkim.VerifyOptions{LookupTXT: func(name string) ([]string, error) {
		asked = append(asked, name)
		if name == "pm0123456789._domainkey.acme.test" {
			return []string{txt}, nil
		}
		return nil, errors.New("no such record")
	}}
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(data), opts)
	if err != nil || len(verifs) != 1 {
		t.Fatalf("verify: %v, %d signatures", err, len(verifs))
	}
	v := verifs[0]
	if v.Err != nil || v.Domain != "acme.test" {
		t.Fatalf("signature of %q: %v (asked %v)", v.Domain, v.Err, asked)
	}
	signed := strings.ToLower(strings.Join(v.HeaderKeys, ":"))
	if want := "from:to:cc:subject:date:message-id:reply-to:mime-version:content-type:list-unsubscribe"; signed != want {
		t.Errorf("h= %s, want %s", signed, want)
	}
	sig := string(data[:bytes.Index(data, []byte("\r\nFrom:"))])
	for _, tag := range []string{"a=rsa-sha256", "c=relaxed/relaxed", "s=pm0123456789", "d=acme.test"} {
		if !strings.Contains(strings.Join(strings.Fields(sig), ""), tag) {
			t.Errorf("DKIM-Signature lacks %s: %s", tag, sig)
		}
	}

	// Relaxed canonicalization tolerates refolding, and a changed subject breaks the signature.
	refolded := bytes.Replace(data, []byte("Subject: Hello"), []byte("Subject:   Hello  "), 1)
	if vs, err := dkim.VerifyWithOptions(bytes.NewReader(refolded), opts); err != nil || vs[0].Err != nil {
		t.Errorf("refolded subject should still verify: %v %v", err, vs[0].Err)
	}
	tampered := bytes.Replace(data, []byte("Subject: Hello"), []byte("Subject: Hallo"), 1)
	if vs, err := dkim.VerifyWithOptions(bytes.NewReader(tampered), opts); err != nil || vs[0].Err == nil {
		t.Errorf("tampered subject verified: %v", err)
	}
}

func TestSeveralRecipientsInOneTransaction(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "cc:c@rcpt.test", "bcc:d@rcpt.test"))
	env := oneEnvelope(t, ts)
	if len(env.Rcpts) != 4 || len(rep.Recipients) != 4 {
		t.Fatalf("one MAIL with %d RCPTs, %d outcomes; want 4 and 4", len(env.Rcpts), len(rep.Recipients))
	}
	if accepts, _, _ := ts.Stats(); accepts != 1 {
		t.Errorf("%d connections, want 1", accepts)
	}
}

func TestMXPreferenceOrder(t *testing.T) {
	t.Parallel()
	port, servers := mustServersOnOnePort(t, []string{"127.0.0.1", "127.0.0.2"}, []serverOptions{{}, {}})
	r := newResolver().
		MX("rcpt.test", ports.MX{Host: "backup.rcpt.test", Preference: 20}, ports.MX{Host: "primary.rcpt.test", Preference: 10}).
		IP("primary.rcpt.test", "127.0.0.1").IP("backup.rcpt.test", "127.0.0.2")
	h := newHarness(t, baseConfig(port), r).start()

	for range 3 {
		rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
		if rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	if n, m := len(servers[0].Envelopes()), len(servers[1].Envelopes()); n != 3 || m != 0 {
		t.Errorf("primary got %d, backup got %d; want 3 and 0", n, m)
	}
}

func TestFallsBackToNextMXWhenFirstRefuses(t *testing.T) {
	t.Parallel()
	// 127.0.0.3 has no listener on the port: connections to the first MX are refused.
	port, servers := mustServersOnOnePort(t, []string{"127.0.0.2"}, []serverOptions{{}})
	r := newResolver().
		MX("rcpt.test", ports.MX{Host: "primary.rcpt.test", Preference: 10}, ports.MX{Host: "backup.rcpt.test", Preference: 20}).
		IP("primary.rcpt.test", "127.0.0.3").IP("backup.rcpt.test", "127.0.0.2")
	h := newHarness(t, baseConfig(port), r).start()

	rep, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if !st.Ack || rep.Recipients[0].Kind != ports.OutcomeDelivered || len(servers[0].Envelopes()) != 1 {
		t.Fatalf("outcome %v, backup got %d", rep.Recipients[0], len(servers[0].Envelopes()))
	}
	asked := r.Asked()
	if i, j := slices.Index(asked, "IP primary.rcpt.test"), slices.Index(asked, "IP backup.rcpt.test"); i < 0 || j < i {
		t.Errorf("lookups %v: want primary before backup", asked)
	}
}

func TestAllMXUnreachableIsDeferred(t *testing.T) {
	t.Parallel()
	port, _ := mustServersOnOnePort(t, []string{"127.0.0.2"}, []serverOptions{{}})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.3")
	h := newHarness(t, baseConfig(port), r).start()

	rep, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	o := rep.Recipients[0]
	if !st.Ack || rep.Handed || o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "refused") {
		t.Errorf("ack=%v handed=%v outcome=%v", st.Ack, rep.Handed, o)
	}
}

func TestImplicitMX(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().IP("rcpt.test", "127.0.0.1")
	r.mxErr["rcpt.test"] = ports.DNSNoData
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if rep.Recipients[0].Kind != ports.OutcomeDelivered || len(ts.Envelopes()) != 1 {
		t.Fatalf("outcome %v", rep.Recipients[0])
	}
	if got := r.Asked(); !slices.Equal(got, []string{"MX rcpt.test", "IP rcpt.test"}) {
		t.Errorf("lookups %v", got)
	}
}

func TestRoutingFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		setup    func(*staticResolver)
		kind     ports.DeliveryOutcomeKind
		response string
	}{
		{"null MX bounces (RFC 7505)", func(r *staticResolver) { r.MX("rcpt.test", ports.MX{Host: "", Preference: 0}) },
			ports.OutcomeBounced, "556 5.1.10 Recipient address has null MX"},
		{"no MX and no address fails", func(r *staticResolver) {}, ports.OutcomeFailed, "5.1.2 recipient domain rcpt.test has no MX and no address records"},
		{"MX lookup SERVFAIL defers", func(r *staticResolver) { r.mxErr["rcpt.test"] = ports.DNSTemporary }, ports.OutcomeDeferred, "4.4.3 MX lookup of rcpt.test failed"},
		{"implicit MX address lookup SERVFAIL defers", func(r *staticResolver) { r.ipErr["rcpt.test"] = ports.DNSTemporary }, ports.OutcomeDeferred, "4.4.3 DNS lookup of rcpt.test failed"},
		{"MX host without address defers", func(r *staticResolver) { r.MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}) }, ports.OutcomeDeferred, "4.4.3 address lookup of mx.rcpt.test failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newResolver()
			tc.setup(r)
			h := newHarness(t, baseConfig(1), r).start()
			rep, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test"))
			if !st.Ack || rep.Handed {
				t.Errorf("ack=%v handed=%v", st.Ack, rep.Handed)
			}
			for _, o := range rep.Recipients {
				if o.Kind != tc.kind || !strings.HasPrefix(o.Response, tc.response) {
					t.Errorf("outcome %s %q, want %s %q", o.Kind, o.Response, tc.kind, tc.response)
				}
			}
		})
	}
}

func TestRelayWithAuthPlain(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{AuthUser: "relay-user", AuthPass: "s3cret"})
	r := newResolver() // any lookup would fail: the relay is an address
	cfg := baseConfig(25)
	cfg.Relay, cfg.RelayUsername, cfg.RelayPassword = ts.Addr, "relay-user", "s3cret"
	h := newHarness(t, cfg, r).start()

	rep, _ := h.Send(outbound(t, "far-away.test", "a@far-away.test"))
	if rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Fatalf("outcome %v", rep.Recipients[0])
	}
	if env := oneEnvelope(t, ts); env.User != "relay-user" {
		t.Errorf("authenticated as %q", env.User)
	}
	if got := r.Asked(); len(got) != 0 {
		t.Errorf("relay mode looked up %v", got)
	}
}

func TestRelayRejectsBadCredentials(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{AuthUser: "relay-user", AuthPass: "s3cret"})
	cfg := baseConfig(25)
	cfg.Relay, cfg.RelayUsername, cfg.RelayPassword = ts.Addr, "relay-user", "wrong"
	h := newHarness(t, cfg, newResolver()).start()

	rep, _ := h.Send(outbound(t, "far-away.test", "a@far-away.test"))
	o := rep.Recipients[0]
	if o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "535") || strings.Contains(o.Response, "wrong") {
		t.Errorf("outcome %v", o)
	}
}

func TestSTARTTLS(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSigned(t, "mx.rcpt.test")
	cases := []struct {
		name       string
		trusted    bool
		requireTLS bool
		wantKind   ports.DeliveryOutcomeKind
		wantTLS    bool
		accepts    int
	}{
		{"used when offered", true, false, ports.OutcomeDelivered, true, 1},
		{"untrusted certificate falls back to plaintext", false, false, ports.OutcomeDelivered, false, 2},
		{"untrusted certificate with TLS required defers", false, true, ports.OutcomeDeferred, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := mustServer(t, serverOptions{TLS: serverTLS})
			r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
			cfg := baseConfig(ts.Port())
			cfg.RequireTLS = tc.requireTLS
			if tc.trusted {
				cfg.TLSConfig = &tls.Config{RootCAs: roots}
			} else {
				cfg.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool()}
			}
			h := newHarness(t, cfg, r).start()

			rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
			if o := rep.Recipients[0]; o.Kind != tc.wantKind {
				t.Fatalf("outcome %v, want %s", o, tc.wantKind)
			}
			if tc.wantKind == ports.OutcomeDelivered {
				if env := oneEnvelope(t, ts); env.TLS != tc.wantTLS {
					t.Errorf("TLS %v, want %v", env.TLS, tc.wantTLS)
				}
			}
			if accepts, _, _ := ts.Stats(); accepts != tc.accepts {
				t.Errorf("%d connections, want %d", accepts, tc.accepts)
			}
		})
	}
}

func TestRequireTLSWithoutSTARTTLSDefers(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.RequireTLS = true
	h := newHarness(t, cfg, r).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "TLS is required") || len(ts.Envelopes()) != 0 {
		t.Errorf("outcome %v, %d transactions", o, len(ts.Envelopes()))
	}
}

func TestRecipientReplies(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{
		RcptReply: map[string]*smtp.SMTPError{
			"gone@rcpt.test": smtpErr(550, "5.1.1", "No such user"),
			"busy@rcpt.test": smtpErr(450, "4.2.1", "Mailbox busy, try later"),
		},
		DataReply: smtpErr(250, "2.0.0", "Ok: queued as ABC123"),
	})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	rep, st := h.Send(outbound(t, "rcpt.test", "ok@rcpt.test", "gone@rcpt.test", "busy@rcpt.test"))
	want := map[string]string{
		"r1": "delivered|250 2.0.0 Ok: queued as ABC123",
		"r2": "bounced|550 5.1.1 No such user",
		"r3": "deferred|450 4.2.1 Mailbox busy, try later",
	}
	if got := outcomes(rep); !maps.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if !rep.Handed || !st.Ack {
		t.Errorf("handed=%v ack=%v", rep.Handed, st.Ack)
	}
	if env := oneEnvelope(t, ts); !slices.Equal(env.Rcpts, []string{"ok@rcpt.test"}) {
		t.Errorf("accepted %v", env.Rcpts)
	}
}

func TestTransactionReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		opts   serverOptions
		rcpts  []string
		want   string
		handed bool
	}{
		{"4xx after DATA defers", serverOptions{DataReply: smtpErr(451, "4.3.0", "Try again")}, []string{"a@rcpt.test"},
			"deferred|451 4.3.0 Try again", true},
		{"5xx after DATA bounces", serverOptions{DataReply: smtpErr(554, "5.7.1", "Spam detected")}, []string{"a@rcpt.test"},
			"bounced|554 5.7.1 Spam detected", true},
		{"421 defers", serverOptions{DataReply: smtpErr(421, "4.4.2", "Closing")}, []string{"a@rcpt.test"},
			"deferred|421 4.4.2 Closing", true},
		{"all recipients refused", serverOptions{RcptReply: map[string]*smtp.SMTPError{"a@rcpt.test": smtpErr(550, "5.1.1", "Unknown")}},
			[]string{"a@rcpt.test"}, "bounced|550 5.1.1 Unknown", true},
		{"MAIL FROM refused is not handed", serverOptions{AuthUser: "u", AuthPass: "p"}, []string{"a@rcpt.test"},
			"bounced|530 5.7.0 Authentication required", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := mustServer(t, tc.opts)
			r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
			h := newHarness(t, baseConfig(ts.Port()), r).start()
			rep, st := h.Send(outbound(t, "rcpt.test", tc.rcpts...))
			if got := outcomes(rep)["r1"]; got != tc.want || rep.Handed != tc.handed || !st.Ack {
				t.Errorf("outcome %q handed=%v ack=%v; want %q handed=%v", got, rep.Handed, st.Ack, tc.want, tc.handed)
			}
		})
	}
}

func TestReusesConnectionsAndClosesIdleOnes(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.IdleConnTimeout = 300 * time.Millisecond
	h := newHarness(t, cfg, r).start()

	for range 3 {
		if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	if accepts, active, _ := ts.Stats(); accepts != 1 || active != 1 || len(ts.Envelopes()) != 3 {
		t.Fatalf("%d connections (%d open) for %d transactions; want 1 for 3", accepts, active, len(ts.Envelopes()))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, active, _ := ts.Stats(); active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle connection not closed after IdleConnTimeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The next job dials again.
	h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if accepts, _, _ := ts.Stats(); accepts != 2 {
		t.Errorf("%d connections, want 2", accepts)
	}
}

func TestReconnectsWhenIdleConnectionWasDropped(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	// The server drops the pooled connection (as servers do after their own idle timeout).
	ts.dropAll()
	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Fatalf("outcome %v after the idle connection was dropped", rep.Recipients[0])
	}
	if accepts, _, _ := ts.Stats(); accepts != 2 {
		t.Errorf("%d connections, want 2", accepts)
	}
}

// TestRSETOnlyAfterAnUnfinishedTransaction: a session whose last transaction ended with 250 after DATA is
// reused without RSET (RFC 5321 §4.1.1.4); one whose transaction was left open (every recipient refused)
// is reset before the next MAIL, and the next message is still delivered over it.
func TestRSETOnlyAfterAnUnfinishedTransaction(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{RcptReply: map[string]*smtp.SMTPError{"gone@rcpt.test": smtpErr(550, "5.1.1", "Unknown")}})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	for range 2 {
		if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	if n := ts.RSETs(); n != 0 {
		t.Fatalf("%d RSETs between clean transactions, want 0", n)
	}
	if rep, _ := h.Send(outbound(t, "rcpt.test", "gone@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeBounced {
		t.Fatalf("outcome %v", rep.Recipients[0])
	}
	if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Fatalf("outcome after the refused transaction %v", rep.Recipients[0])
	}
	if n := ts.RSETs(); n != 1 {
		t.Fatalf("%d RSETs, want 1 (after the transaction left open)", n)
	}
	if accepts, _, _ := ts.Stats(); accepts != 1 || len(ts.Envelopes()) != 3 {
		t.Fatalf("%d connections for %d messages; want 1 for 3", accepts, len(ts.Envelopes()))
	}
}

// TestMXAnswersAreReused: a recipient domain's MX answer serves the jobs that follow it; a failed lookup is
// never kept.
func TestMXAnswersAreReused(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	r.mxErr["flaky.test"] = ports.DNSTemporary
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	for range 3 {
		if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
		if rep, _ := h.Send(outbound(t, "flaky.test", "a@flaky.test")); rep.Recipients[0].Kind != ports.OutcomeDeferred {
			t.Fatalf("outcome %v for a failing lookup", rep.Recipients[0])
		}
	}
	var rcpt, flaky int
	for _, q := range r.Asked() {
		switch q {
		case "MX rcpt.test":
			rcpt++
		case "MX flaky.test":
			flaky++
		}
	}
	if rcpt != 1 || flaky != 3 {
		t.Fatalf("MX lookups: rcpt.test %d (want 1), flaky.test %d (want 3)", rcpt, flaky)
	}
}

func TestPerDestinationConcurrencyLimit(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{DataDelay: 100 * time.Millisecond})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.Concurrency, cfg.Workers = 2, 10
	h := newHarness(t, cfg, r).start()

	const jobs = 10
	for range jobs {
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	}
	for range jobs {
		if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	accepts, _, maxActive := ts.Stats()
	if maxActive != 2 || accepts != 2 || len(ts.Envelopes()) != jobs {
		t.Errorf("at most %d sessions at once over %d connections for %d messages; want 2, 2, %d", maxActive, accepts, len(ts.Envelopes()), jobs)
	}
}

func TestLongJobRenewsItsLeaseUntilSettled(t *testing.T) {
	t.Parallel()
	gate, signal := make(chan struct{}), make(chan struct{}, 1)
	ts := mustServer(t, serverOptions{DataGate: gate, DataSignal: signal})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.LeaseRenewInterval = 10 * time.Millisecond
	h := newHarness(t, cfg, r).start()

	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	<-signal // the receiver holds its reply to DATA: the job is in progress
	for h.Queue.renewals.Load() < 3 {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	close(gate)
	if st := h.Settled(); !st.Ack {
		t.Fatalf("settlement %+v", st)
	}
	after := h.Queue.renewals.Load()
	time.Sleep(50 * time.Millisecond) // five renew intervals
	if n := h.Queue.renewals.Load(); n != after {
		t.Fatalf("the lease was renewed %d more times after the job was settled", n-after)
	}
}

func TestRunDrainsInFlightJobsOnCancel(t *testing.T) {
	t.Parallel()
	gate, signal := make(chan struct{}), make(chan struct{}, 1)
	ts := mustServer(t, serverOptions{DataGate: gate, DataSignal: signal})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	<-signal // the message is on the wire
	stopped := make(chan error, 1)
	go func() { stopped <- h.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Run returned with a job in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Errorf("outcome %v", rep.Recipients[0])
	}
	if st := h.Settled(); !st.Ack {
		t.Error("drained job not acked")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, active, _ := ts.Stats(); active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pooled connection still open after Run returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJobSettlement(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")

	t.Run("message gone is acked without delivery", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r).start()
		out := outbound(t, "rcpt.test", "gone-job@rcpt.test")
		_ = h.Queue.Publish(context.Background(), []ports.DeliveryJob{out.Job}) // never registered: not_found
		if st := h.Settled(); !st.Ack || st.JobID != out.Job.ID {
			t.Errorf("settlement %+v, want ack", st)
		}
		select {
		case rep := <-h.Service.reports:
			t.Errorf("unexpected report %+v", rep)
		default:
		}
	})
	t.Run("load failure is nacked", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r)
		h.Service.loadErr = errors.New("core unavailable")
		h.start()
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
		if st := h.Settled(); st.Ack {
			t.Error("acked after a load failure")
		}
	})
	t.Run("report failure is nacked", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r)
		h.Service.reportErr = errors.New("core unavailable")
		h.start()
		if _, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); st.Ack {
			t.Error("acked after a report failure")
		}
	})
	t.Run("missing attachment fails without delivery", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r).start()
		out := outbound(t, "rcpt.test", "a@rcpt.test")
		out.Attachments = []ports.StoredAttachment{{ID: "x", Filename: "gone.pdf", Key: "att/missing"}}
		rep, st := h.Send(out)
		if o := rep.Recipients[0]; o.Kind != ports.OutcomeFailed || !strings.HasPrefix(o.Response, "5.3.0") || rep.Handed || !st.Ack {
			t.Errorf("outcome %v handed=%v ack=%v", o, rep.Handed, st.Ack)
		}
	})
}

func TestMessageForSeveralDomainsIsSignedOnce(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().
		MX("one.test", ports.MX{Host: "mx.shared.test"}).MX("two.test", ports.MX{Host: "mx.shared.test"}).
		IP("mx.shared.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	first := outbound(t, "one.test", "a@one.test")
	first.HTML = "<p>multipart, so each build has fresh boundaries</p>"
	first.To = []string{"a@one.test", "b@two.test"}
	second := first
	second.Job.ID, second.Job.Domain = newID(), "two.test"
	second.Recipients = []ports.Recipient{{ID: "r2", Type: ports.RecipientTo, Address: "b@two.test"}}
	h.Send(first)
	h.Send(second)

	envs := ts.Envelopes()
	if len(envs) != 2 || !bytes.Equal(envs[0].Data, envs[1].Data) {
		t.Fatalf("%d transactions; the two jobs must send identical signed bytes", len(envs))
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{RcptReply: map[string]*smtp.SMTPError{"no@rcpt.test": smtpErr(550, "5.1.1", "Unknown")}})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	h := newHarness(t, baseConfig(ts.Port()), r, func(d *mta.Deps) { d.Registerer = reg }).start()

	h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "no@rcpt.test"))
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				got[name] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{
		"postmill_mta_deliveries_total{delivered}":        1,
		"postmill_mta_deliveries_total{bounced}":          1,
		"postmill_mta_jobs_total{acked}":                  1,
		"postmill_mta_smtp_duration_seconds{connect}":     1,
		"postmill_mta_smtp_duration_seconds{transaction}": 1,
		"postmill_mta_pool_connections":                   1,
		"postmill_mta_pool_idle_connections":              1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  mta.Config
		ok   bool
	}{
		{"zero is all defaults", mta.Config{}, true},
		{"relay with credentials", mta.Config{Relay: "smtp.example.com:587", RelayUsername: "u", RelayPassword: "p"}, true},
		{"relay without port", mta.Config{Relay: "smtp.example.com"}, false},
		{"credentials without relay", mta.Config{RelayUsername: "u"}, false},
		{"password without username", mta.Config{Relay: "a:25", RelayPassword: "p"}, false},
		{"bad port", mta.Config{Port: 70000}, false},
		{"negative concurrency", mta.Config{Concurrency: -1}, false},
		{"HELO with space", mta.Config{HELO: "bad name"}, false},
		{"insecure TLS through TLSConfig", mta.Config{TLSConfig: &tls.Config{InsecureSkipVerify: true}}, false},
		{"insecure TLS through the explicit option", mta.Config{InsecureSkipVerify: true}, true},
	}
	for _, tc := range cases {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if _, err := mta.New(mta.Config{}, mta.Deps{}); err == nil || !strings.Contains(err.Error(), "Queue") {
		t.Errorf("New without dependencies: %v", err)
	}
}

func TestReusesTLSAndAuthenticatedRelaySession(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSigned(t, "127.0.0.1")
	ts := mustServer(t, serverOptions{TLS: serverTLS, AuthUser: "relay-user", AuthPass: "s3cret"})
	cfg := baseConfig(25)
	cfg.Relay, cfg.RelayUsername, cfg.RelayPassword = ts.Addr, "relay-user", "s3cret"
	cfg.TLSConfig = &tls.Config{RootCAs: roots}
	h := newHarness(t, cfg, newResolver()).start()

	for range 3 {
		if rep, _ := h.Send(outbound(t, "far-away.test", "a@far-away.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	envs := ts.Envelopes()
	for _, env := range envs {
		if !env.TLS || env.User != "relay-user" {
			t.Errorf("transaction TLS=%v user=%q", env.TLS, env.User)
		}
	}
	if accepts, _, _ := ts.Stats(); accepts != 1 || len(envs) != 3 {
		t.Errorf("%d connections for %d transactions, want 1 for 3", accepts, len(envs))
	}
}

func TestTooManyRecipientsContinuesInFurtherTransactions(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{MaxRcpts: 2})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "c@rcpt.test", "d@rcpt.test", "e@rcpt.test"))
	for _, o := range rep.Recipients {
		if o.Kind != ports.OutcomeDelivered {
			t.Errorf("outcome %v", o)
		}
	}
	var sizes []int
	for _, env := range ts.Envelopes() {
		sizes = append(sizes, len(env.Rcpts))
	}
	if accepts, _, _ := ts.Stats(); !slices.Equal(sizes, []int{2, 2, 1}) || accepts != 1 {
		t.Errorf("transactions of %v recipients over %d connections; want [2 2 1] over 1", sizes, accepts)
	}
}
