package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/smtp"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

// feedbackAddress is the default POSTMILL_FEEDBACK_ADDRESS: "fbl@" + POSTMILL_RETURN_PATH_HOST.
const feedbackAddress = "fbl@bounces.postmill.local"

// mustFeedbackWorld is a mail world whose MTA hands every message to relay (none when empty), whose
// webhooks may reach the receiver on 127.0.0.1 (as hooks.example), and whose key has every scope.
func mustFeedbackWorld(t *testing.T, relay string) (*mailWorld, *receiver) {
	t.Helper()
	rcv := MustReceiver(t)
	w := MustMailWorld(t, func(c *app.Config) {
		c.MTARelay = relay
		c.WebhookAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.WebhookSchedule = []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	})
	w.dns.SetA("hooks.example", netip.MustParseAddr("127.0.0.1"))
	_, w.key = w.MustKey(w.owner, []string{"*"})
	return w, rcv
}

// recipientID is the id of the message's recipient with address. The public message shape has no
// recipient ids (SPEC §2), so it is read from the store: the id bounces, complaints and webhooks name.
func (w *mailWorld) recipientID(t *testing.T, messageID, address string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := w.app.Store().GetMessage(ctx, w.owner.orgID, messageID)
	if err != nil {
		t.Fatalf("reading message %s: %v", messageID, err)
	}
	for _, r := range m.Recipients {
		if strings.EqualFold(r.Address, address) {
			return r.ID
		}
	}
	t.Fatalf("message %s has no recipient %s: %+v", messageID, address, m.Recipients)
	return ""
}

// eventResponse is the providerResponse of the message's first timeline event of type typ.
func eventResponse(m resp, typ string) (string, bool) {
	for _, ev := range m.body["events"].([]any) {
		if e := ev.(map[string]any); e["type"] == typ {
			s, _ := e["providerResponse"].(string)
			return s, true
		}
	}
	return "", false
}

// pageData is the data array of a {data, nextCursor} page.
func pageData(t *testing.T, r resp) []map[string]any {
	t.Helper()
	raw, ok := r.body["data"].([]any)
	if !ok {
		t.Fatalf("not a page: %s", r.raw)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, d := range raw {
		out = append(out, d.(map[string]any))
	}
	return out
}

// hookData decodes a webhook request's data object.
func hookData(t *testing.T, q hookRequest) map[string]any {
	t.Helper()
	var body struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(q.body, &body); err != nil {
		t.Fatalf("webhook body %s: %v", q.body, err)
	}
	return body.Data
}

// assertOtherOrgSeesNothing signs up another organization and checks that its key lists no bounces and no
// complaints.
func assertOtherOrgSeesNothing(t *testing.T, w *mailWorld) {
	t.Helper()
	other := w.MustSignup(fmt.Sprintf("outsider-%s@example.com", randomHex(t, 4)), "")
	_, key := w.MustKey(other, []string{"emails:read"})
	for _, path := range []string{"/v1/bounces", "/v1/complaints"} {
		if d := pageData(t, expect(t, w.get(path, key), 200)); len(d) != 0 {
			t.Errorf("another organization lists %d items on %s: %v", len(d), path, d)
		}
	}
}

// TestPostfixDSNBouncesAndSuppresses is the asynchronous bounce: Postmill's MTA hands the message to a
// real Postfix, which accepts it (250) and only then learns from the recipient's MX that the mailbox does
// not exist. Postfix writes a delivery status notification (RFC 3464) to the envelope sender, the VERP
// return path on bounce.sender.example, and its transport map routes that to Postmill's MX listener.
func TestPostfixDSNBouncesAndSuppresses(t *testing.T) {
	t.Parallel()
	// Postfix's port is reserved first: Postmill must know its relay when it starts, and Postfix must know
	// Postmill's MX listener, which exists only once Postmill has started.
	relay := freeAddr(t)
	w, rcv := mustFeedbackWorld(t, relay)
	pf := MustPostfix(t, postfixConfig{Addr: relay, LogSessions: true, Transports: map[string]string{
		"rcpt.example":           smtpNexthop(w.mx.addr),
		"bounce." + senderDomain: smtpNexthop(w.app.InboundAddr()),
	}})
	defer func() {
		if t.Failed() {
			t.Logf("postfix maillog:\n%s", pf.log())
		}
	}()
	w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/bounced", "email.bounced")
	w.mx.setReject("gone@rcpt.example")

	gone := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "gone@rcpt.example",
		"subject": "Bounce me later", "text": "x"}, nil), 202).str("id")
	kept := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "kept@rcpt.example",
		"subject": "Keep me", "text": "x"}, nil), 202).str("id")

	// The bounce arrives after Postfix took the message: delivered first (Postfix's 250), bounced later.
	m := w.waitStatus(t, gone, "bounced", 30*time.Second)
	tl := timeline(m)
	di, bi := -1, -1
	for i, typ := range tl {
		if typ == "delivered" && di < 0 {
			di = i
		}
		if typ == "bounced" && bi < 0 {
			bi = i
		}
	}
	if di < 0 || bi < di {
		t.Errorf("timeline %v: want delivered (Postfix's 250) and then bounced (its DSN)", tl)
	}
	accepted, _ := eventResponse(m, "delivered")
	if !strings.HasPrefix(accepted, "250") {
		t.Errorf("delivered providerResponse %q is not Postfix's 250", accepted)
	}
	if diag, _ := eventResponse(m, "bounced"); !strings.Contains(diag, "550") && !strings.Contains(diag, "5.1.1") {
		t.Errorf("bounced providerResponse %q mentions neither 550 nor 5.1.1", diag)
	}
	// The bounce really was Postfix's notification: its queue id (from the 250 reply) produced one, and
	// Postmill's MX listener took it.
	if qid := regexp.MustCompile(`queued as ([0-9A-Za-z]+)`).FindStringSubmatch(accepted); qid == nil {
		t.Errorf("delivered providerResponse %q names no Postfix queue id", accepted)
	} else {
		pf.waitLog(t, 5*time.Second, qid[1]+":", "to=<gone@rcpt.example>", "status=bounced", "550 5.1.1")
		pf.waitLog(t, 5*time.Second, qid[1]+": sender non-delivery notification")
	}
	pf.waitLog(t, 5*time.Second, "to=<b-", "@bounce."+senderDomain+">", "relay=127.0.0.1[127.0.0.1]", "status=sent (250")
	// Postfix offers PIPELINING and CHUNKING: Postmill sent each message as one BDAT chunk (RFC 3030) in
	// the group of its MAIL and RCPTs, and Postfix took it.
	pf.waitLog(t, 5*time.Second, "postfix/smtpd", "< ", ": BDAT ", " LAST")
	for _, line := range strings.Split(pf.log(), "\n") {
		if strings.Contains(line, "postfix/smtpd") && strings.Contains(line, "< ") && strings.HasSuffix(line, ": DATA") {
			t.Errorf("Postmill sent DATA to a Postfix that offers CHUNKING: %s", line)
		}
	}
	goneRcpt := w.recipientID(t, gone, "gone@rcpt.example")
	if st := m.body["recipients"].([]any)[0].(map[string]any)["status"]; st != "bounced" {
		t.Errorf("recipient status %v, want bounced", st)
	}

	// GET /v1/bounces: one hard bounce with what Postfix's DSN said.
	bounces := pageData(t, expect(t, w.get("/v1/bounces", w.key), 200))
	if len(bounces) != 1 {
		t.Fatalf("bounces: %v", bounces)
	}
	b := bounces[0]
	for k, want := range map[string]any{"messageId": gone, "recipientId": goneRcpt, "address": "gone@rcpt.example",
		"type": "hard", "class": "bad_mailbox", "status": "5.1.1", "action": "failed"} {
		if b[k] != want {
			t.Errorf("bounce %s = %v, want %v (%v)", k, b[k], want, b)
		}
	}
	if d := fmt.Sprint(b["diagnosticCode"]); !strings.Contains(d, "550 5.1.1") || !strings.Contains(d, "User unknown") {
		t.Errorf("bounce diagnosticCode %q is not the sink's reply as Postfix reported it", d)
	}
	if r := fmt.Sprint(b["remoteMta"]); !strings.Contains(r, "127.0.0.1") {
		t.Errorf("bounce remoteMta %q, want the sink's address", r)
	}
	if r := fmt.Sprint(b["reportingMta"]); !strings.Contains(r, "postfix.test") {
		t.Errorf("bounce reportingMta %q, want Postfix's myhostname", r)
	}

	// The address is suppressed with reason bounce, and the next send to it is refused.
	found := false
	for _, s := range expect(t, w.get("/v1/suppressions", w.key), 200).list {
		sp := s.(map[string]any)
		if strings.EqualFold(fmt.Sprint(sp["address"]), "gone@rcpt.example") {
			found = true
			if sp["reason"] != "bounce" {
				t.Errorf("suppression reason %v, want bounce", sp["reason"])
			}
		}
	}
	if !found {
		t.Error("gone@rcpt.example is not among the suppressions")
	}
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "gone@rcpt.example", "subject": "Again", "text": "x"}, nil),
		400, "", "recipient suppressed: gone@rcpt.example")

	// email.bounced reached the subscribed endpoint, about that message and recipient.
	hooks := rcv.waitFor(t, "/bounced", "email.bounced", 1, 30*time.Second)
	if data := hookData(t, hooks[0]); data["message_id"] != gone || data["recipient_id"] != goneRcpt || data["bounce_class"] != "bad_mailbox" {
		t.Errorf("email.bounced data %v, want message %s recipient %s bounce_class bad_mailbox", data, gone, goneRcpt)
	}

	// The DSN named one recipient: the other message through the same relay stays delivered.
	k := w.waitStatus(t, kept, "delivered", 30*time.Second)
	w.mx.waitFor(t, "Subject: Keep me", 5*time.Second)
	if tl := timeline(k); contains(tl, "bounced") {
		t.Errorf("kept message timeline %v", tl)
	}
	if st := k.body["recipients"].([]any)[0].(map[string]any)["status"]; st != "delivered" {
		t.Errorf("kept recipient status %v", st)
	}
	expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "kept@rcpt.example", "subject": "Still fine", "text": "x"}, nil), 202)
	for _, q := range rcv.waitFor(t, "/bounced", "email.bounced", 1, time.Second) {
		if hookData(t, q)["message_id"] == kept {
			t.Error("email.bounced for the delivered message")
		}
	}

	assertOtherOrgSeesNothing(t, w)
}

// TestARFComplaintSuppresses delivers a message, then plays the recipient's mailbox provider: it sends an
// RFC 5965 abuse report about that message to Postmill's feedback address, relayed by a real Postfix to
// Postmill's MX listener.
func TestARFComplaintSuppresses(t *testing.T) {
	t.Parallel()
	w, rcv := mustFeedbackWorld(t, "")
	pf := MustPostfix(t, postfixConfig{Transports: map[string]string{
		"bounces.postmill.local": smtpNexthop(w.app.InboundAddr()),
	}})
	defer func() {
		if t.Failed() {
			t.Logf("postfix maillog:\n%s", pf.log())
		}
	}()
	w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/complained", "email.complained")

	id := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "reader@rcpt.example",
		"subject": "Complain about me", "text": "buy now"}, nil), 202).str("id")
	w.waitStatus(t, id, "delivered", 30*time.Second)
	readerRcpt := w.recipientID(t, id, "reader@rcpt.example")
	original := w.mx.waitFor(t, "Subject: Complain about me", 5*time.Second)
	if !strings.HasPrefix(original.from, "b-") {
		t.Fatalf("envelope sender %q is not a VERP return path", original.from)
	}

	arrival := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	report := arfReport(original, "reader@rcpt.example", arrival)
	if err := smtp.SendMail(pf.addr, nil, "fbl-reports@isp.example", []string{feedbackAddress}, report); err != nil {
		t.Fatalf("submitting the feedback report to postfix: %v", err)
	}

	c := w.waitStatus(t, id, "complained", 30*time.Second)
	if tl := timeline(c); !contains(tl, "complained") {
		t.Errorf("timeline %v", tl)
	}
	pf.waitLog(t, 5*time.Second, "to=<"+feedbackAddress+">", "status=sent (250")

	complaints := pageData(t, expect(t, w.get("/v1/complaints", w.key), 200))
	if len(complaints) != 1 {
		t.Fatalf("complaints: %v", complaints)
	}
	cp := complaints[0]
	for k, want := range map[string]any{"messageId": id, "recipientId": readerRcpt, "address": "reader@rcpt.example",
		"feedbackType": "abuse", "userAgent": "ExampleFBL/2.1", "reportedDomain": senderDomain, "sourceIp": "192.0.2.25"} {
		if cp[k] != want {
			t.Errorf("complaint %s = %v, want %v (%v)", k, cp[k], want, cp)
		}
	}
	if got, err := time.Parse(time.RFC3339, fmt.Sprint(cp["arrivalDate"])); err != nil || !got.Equal(arrival) {
		t.Errorf("complaint arrivalDate %v (%v), want %v", cp["arrivalDate"], err, arrival)
	}
	if b := pageData(t, expect(t, w.get("/v1/bounces", w.key), 200)); len(b) != 0 {
		t.Errorf("a complaint was recorded as a bounce: %v", b)
	}

	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "reader@rcpt.example", "subject": "Again", "text": "x"}, nil),
		400, "", "recipient suppressed: reader@rcpt.example")

	hooks := rcv.waitFor(t, "/complained", "email.complained", 1, 30*time.Second)
	if data := hookData(t, hooks[0]); data["message_id"] != id {
		t.Errorf("email.complained data %v, want message %s", data, id)
	}

	assertOtherOrgSeesNothing(t, w)
}

// arfReport is an abuse report as a mailbox provider's feedback loop sends it (RFC 5965 §2): a
// multipart/report with report-type=feedback-report of a human-readable part, the machine-readable
// message/feedback-report (§3) and the original message (§2 item d) as the provider received it, with
// the Return-Path its MX added on top.
func arfReport(original sunkMail, rcpt string, arrival time.Time) []byte {
	const boundary = "arf-7d1c0e"
	var b bytes.Buffer
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\r\n", args...) }
	line("From: Example Feedback Loop <fbl-reports@isp.example>")
	line("To: %s", feedbackAddress)
	line("Subject: FW: Complain about me")
	line("Date: %s", time.Now().UTC().Format(time.RFC1123Z))
	line("Message-ID: <report-%d@isp.example>", time.Now().UnixNano())
	line("MIME-Version: 1.0")
	line(`Content-Type: multipart/report; report-type=feedback-report; boundary="%s"`, boundary)
	line("")
	line("This is a multi-part message in MIME format.")
	line("")
	line("--%s", boundary)
	line("Content-Type: text/plain; charset=us-ascii")
	line("Content-Transfer-Encoding: 7bit")
	line("")
	line("This is an email abuse report for an email message received from IP 192.0.2.25 on %s.", arrival.Format(time.RFC1123Z))
	line("A recipient marked it as spam.")
	line("")
	line("--%s", boundary)
	line("Content-Type: message/feedback-report")
	line("")
	line("Feedback-Type: abuse")
	line("User-Agent: ExampleFBL/2.1")
	line("Version: 1")
	line("Original-Mail-From: <%s>", original.from)
	line("Original-Rcpt-To: <%s>", rcpt)
	line("Arrival-Date: %s", arrival.Format(time.RFC1123Z))
	line("Reporting-MTA: dns; mx.isp.example")
	line("Source-IP: 192.0.2.25")
	line("Reported-Domain: %s", senderDomain)
	line("")
	line("--%s", boundary)
	line("Content-Type: message/rfc822")
	line("Content-Disposition: inline")
	line("")
	line("Return-Path: <%s>", original.from)
	body := strings.ReplaceAll(string(original.data), "\r\n", "\n")
	b.WriteString(strings.ReplaceAll(strings.TrimRight(body, "\n"), "\n", "\r\n"))
	line("")
	line("--%s--", boundary)
	return b.Bytes()
}
