package e2e

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

func TestSMTPSubmissionDeliversSignedMail(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	cred := expect(t, w.post("/v1/smtp-credentials", w.owner.access, nil), 201)
	user, pass := cred.str("username"), cred.str("password")

	c, err := smtp.Dial(w.app.SubmissionAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Nothing is accepted before AUTH, and wrong credentials are refused.
	if err := c.Mail("ada@"+senderDomain, nil); !isSMTPCode(err, 530) {
		t.Fatalf("MAIL before AUTH: %v", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", user, pass+"x")); !isSMTPCode(err, 535) {
		t.Fatalf("wrong password: %v", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", user, pass)); err != nil {
		t.Fatalf("AUTH PLAIN: %v", err)
	}
	msg := "From: Ada <ada@" + senderDomain + ">\r\nTo: sub@rcpt.example\r\nSubject: Submitted over SMTP\r\n" +
		"X-Ticket: 77\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello through submission.\r\n"
	if err := c.SendMail("ada@"+senderDomain, []string{"sub@rcpt.example", "hidden@rcpt.example"}, strings.NewReader(msg)); err != nil {
		t.Fatalf("submission: %v", err)
	}
	got := w.mx.waitFor(t, "Subject: Submitted over SMTP", 30*time.Second)
	if len(got.to) != 2 || !bytes.Contains(got.data, []byte("X-Ticket: 77")) || bytes.Contains(got.data, []byte("hidden@rcpt.example")) {
		t.Errorf("delivered: to %v\n%s", got.to, got.data)
	}
	v, err := dkim.VerifyWithOptions(bytes.NewReader(got.data), &dkim.VerifyOptions{LookupTXT: w.dnsTXT})
	if err != nil || len(v) != 1 || v[0].Err != nil {
		t.Fatalf("DKIM of submitted mail: %v %+v", err, v)
	}
	// The submitted message is an ordinary message of the organization, with its timeline.
	page := expect(t, w.get("/v1/emails?limit=1", w.owner.access), 200)
	item := page.body["data"].([]any)[0].(map[string]any)
	if item["subject"] != "Submitted over SMTP" {
		t.Fatalf("latest message: %v", item)
	}
	w.waitStatus(t, item["id"].(string), "delivered", 30*time.Second)

	// Only Bcc recipients ("To: undisclosed-recipients:;") is a valid message over SMTP: it is delivered to
	// the envelope recipient without any address in the headers.
	if err := c.SendMail("ada@"+senderDomain, []string{"quiet@rcpt.example"}, strings.NewReader(
		"From: ada@"+senderDomain+"\r\nTo: undisclosed-recipients:;\r\nSubject: Bcc only\r\n\r\nx\r\n")); err != nil {
		t.Fatalf("Bcc-only submission: %v", err)
	}
	bcc := w.mx.waitFor(t, "Subject: Bcc only", 30*time.Second)
	if len(bcc.to) != 1 || bcc.to[0] != "quiet@rcpt.example" || bytes.Contains(bcc.data, []byte("quiet@rcpt.example")) {
		t.Errorf("Bcc-only delivery: to %v\n%s", bcc.to, bcc.data)
	}
	// The REST API still requires `to` (SPEC §4.2).
	r := w.send(t, map[string]any{"from": "ada@" + senderDomain, "bcc": []string{"quiet@rcpt.example"}, "subject": "x", "text": "x"}, nil)
	b := errorBody(t, r, 400, "", "Validation failed")
	if d, _ := b["details"].([]any); len(d) == 0 || d[0].(map[string]any)["path"] != "to" {
		t.Errorf("REST send without to: %s", r.raw)
	}

	// Send-path rules apply to submissions too: an unverified From domain is refused with 550.
	if err := c.SendMail("ada@elsewhere.example", []string{"sub@rcpt.example"},
		strings.NewReader("From: ada@elsewhere.example\r\nTo: sub@rcpt.example\r\nSubject: x\r\n\r\nx\r\n")); !isSMTPCode(err, 550) {
		t.Fatalf("unverified From domain: %v", err)
	}
}

func isSMTPCode(err error, code int) bool {
	var se *smtp.SMTPError
	return errors.As(err, &se) && se.Code == code
}
