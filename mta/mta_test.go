package mta_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/dkim"

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
