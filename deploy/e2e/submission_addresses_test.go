package e2e

import (
	"bufio"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/deploy/app"
)

// TestSubmissionAndAPIDisplayNames: the send API takes RFC 5322 mailboxes in from, to, cc, bcc and
// replyTo like SMTP submission does, and both deliver the same header fields; the address alone is
// stored, suppressed and metered; anything else is a 400 in SPEC §7's shape that writes nothing.
func TestSubmissionAndAPIDisplayNames(t *testing.T) {
	t.Parallel()
	w := MustSubmissionWorld(t, nil)
	_, key := w.MustKey(w.owner, []string{"emails:send", "emails:read", "suppressions:write"})
	send := func(body map[string]any) resp {
		return w.do(req{method: "POST", path: "/v1/emails", token: key, body: body})
	}
	usedBefore := w.usage(t)

	r := expect(t, send(map[string]any{
		"from":    "Ada Lovelace <ada@" + senderDomain + ">",
		"to":      []string{`"Bob, the Builder" <bob@rcpt.example>`, "=?utf-8?q?Zo=C3=AB?= <zoe@rcpt.example>", "plain@rcpt.example"},
		"cc":      []string{"Carol Ünïcode <carol@rcpt.example>", "Bob again <BOB@rcpt.example>"},
		"bcc":     []string{"Hidden Person <hidden@rcpt.example>"},
		"replyTo": "=?utf-8?q?Supp=C3=B6rt?= <support@" + senderDomain + ">",
		"subject": "API names", "text": "hello", "headers": map[string]string{"X-Test-Tag": "api-names"},
	}), 202)
	id := r.str("id")
	api := waitDelivered(t, w.mx, "X-Test-Tag: api-names")
	mustRecipients(t, api, "bob@rcpt.example", "zoe@rcpt.example", "plain@rcpt.example", "carol@rcpt.example", "hidden@rcpt.example")
	mustHeader(t, api, "From", [2]string{"Ada Lovelace", "ada@" + senderDomain})
	mustHeader(t, api, "To", [2]string{"Bob, the Builder", "bob@rcpt.example"}, [2]string{"Zoë", "zoe@rcpt.example"}, [2]string{"", "plain@rcpt.example"})
	mustHeader(t, api, "Cc", [2]string{"Carol Ünïcode", "carol@rcpt.example"})
	mustHeader(t, api, "Reply-To", [2]string{"Suppört", "support@" + senderDomain})
	if strings.Contains(string(api.data), "idden") {
		t.Errorf("the Bcc recipient shows in the delivered mail:\n%s", api.data)
	}

	// Stored: bare addresses (the repeated Bob once, as his first occurrence), names beside them; the API
	// shows the addresses; each address is metered once.
	wantStored := [][2]string{{"bob@rcpt.example", "Bob, the Builder"}, {"zoe@rcpt.example", "Zoë"}, {"plain@rcpt.example", ""},
		{"carol@rcpt.example", "Carol Ünïcode"}, {"hidden@rcpt.example", "Hidden Person"}}
	if got := w.storedRecipients(t, id); !slices.Equal(got, wantStored) {
		t.Errorf("stored recipients %q, want %q", got, wantStored)
	}
	m := w.waitStatus(t, id, "delivered", 30*time.Second)
	var addrs []string
	for _, rc := range m.body["recipients"].([]any) {
		addrs = append(addrs, rc.(map[string]any)["address"].(string))
	}
	if want := []string{"bob@rcpt.example", "zoe@rcpt.example", "plain@rcpt.example", "carol@rcpt.example", "hidden@rcpt.example"}; !slices.Equal(addrs, want) {
		t.Errorf("GET /v1/emails/{id} recipients %q, want %q", addrs, want)
	}
	if used := w.usage(t); used != usedBefore+5 {
		t.Errorf("metered %d, want 5 (one per address)", used-usedBefore)
	}

	// The same names through SMTP submission give the same header fields.
	c, err := smtp.Dial(w.app.SubmissionAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Auth(sasl.NewPlainClient("", w.user, w.pass)); err != nil {
		t.Fatal(err)
	}
	if err := c.SendMail("ada@"+senderDomain, []string{"bob@rcpt.example", "zoe@rcpt.example", "plain@rcpt.example", "carol@rcpt.example"},
		strings.NewReader("From: Ada Lovelace <ada@"+senderDomain+">\r\n"+
			"To: \"Bob, the Builder\" <bob@rcpt.example>, =?utf-8?q?Zo=C3=AB?= <zoe@rcpt.example>, plain@rcpt.example\r\n"+
			"Cc: Carol =?utf-8?q?=C3=9Cn=C3=AFcode?= <carol@rcpt.example>\r\nSubject: SMTP names\r\nX-Test-Tag: smtp-names\r\n\r\nhello\r\n")); err != nil {
		t.Fatalf("submission: %v", err)
	}
	sub := waitDelivered(t, w.mx, "X-Test-Tag: smtp-names")
	for _, field := range []string{"From", "To", "Cc"} {
		if a, s := api.names(t, field), sub.names(t, field); !slices.Equal(a, s) {
			t.Errorf("%s through the API %q, through SMTP %q", field, a, s)
		}
	}

	// Suppression and validation see the address part; a refusal is SPEC §7's 400 and writes nothing.
	expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "blocked@rcpt.example"}), 201)
	count := w.count(t)
	errorBody(t, send(map[string]any{"from": "ada@" + senderDomain, "to": "Blocked Person <Blocked@rcpt.example>", "subject": "x", "text": "x"}),
		400, "", "recipient suppressed: Blocked@rcpt.example")
	for _, c := range []struct {
		field string
		value any
		path  string
	}{
		{"to", []string{"Friends: a@rcpt.example;"}, "to.0"},
		{"to", "Alice <alice@localhost>", "to"}, // one address sent as a string: its path is to
		{"to", []string{"ok@rcpt.example", "a@rcpt.example, b@rcpt.example"}, "to.1"},
		{"cc", []string{"Alice <alice@localhost>"}, "cc.0"},
		{"bcc", []string{"=?utf-8?q?A=0D=0ABcc:_x@evil.example?= <a@rcpt.example>"}, "bcc.0"},
		{"replyTo", "Support", "replyTo"},
	} {
		body := map[string]any{"from": "ada@" + senderDomain, "to": "ok@rcpt.example", "subject": "x", "text": "x", c.field: c.value}
		b := errorBody(t, send(body), 400, "", "Validation failed")
		d, _ := b["details"].([]any)
		if len(d) != 1 || d[0].(map[string]any)["path"] != c.path {
			t.Errorf("%s %v: details %v, want one on %s", c.field, c.value, b["details"], c.path)
		}
	}
	if n := w.count(t); n != count {
		t.Errorf("refused sends created %d messages", n-count)
	}
}

// TestSubmissionListenerLimitsFromConfig: the per-address connection limits of both SMTP listeners come
// from the platform's configuration (POSTMILL_SUBMISSION_MAX_CONNECTIONS_PER_IP,
// POSTMILL_SMTP_MAX_CONNECTIONS_PER_IP): the connection past the limit is greeted with 421 and closed.
func TestSubmissionListenerLimitsFromConfig(t *testing.T) {
	t.Parallel()
	w := MustSubmissionWorld(t, func(c *app.Config) {
		c.SubmissionMaxConnectionsPerIP = 2
		c.SMTPMaxConnectionsPerIP = 3
	})
	for name, l := range map[string]struct {
		addr  string
		limit int
	}{"submission": {w.app.SubmissionAddr(), 2}, "MX": {w.app.InboundAddr(), 3}} {
		for i := range l.limit {
			if line := greeting(t, l.addr); !strings.HasPrefix(line, "220 ") {
				t.Fatalf("%s connection %d: %q", name, i+1, line)
			}
		}
		if line := greeting(t, l.addr); !strings.HasPrefix(line, "421 4.7.0 ") {
			t.Errorf("%s connection %d: %q, want 421 4.7.0", name, l.limit+1, line)
		}
	}
}

// greeting connects to addr, keeps the connection open until the test ends and returns the first line.
func greeting(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return line
}
