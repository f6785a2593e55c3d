package e2e

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

// A double opt-in topic that names confirmFrom mails each pending subscription its confirmation link
// through the send path (SPEC §4.8 leaves who mails it open): the mail reaches a real SMTP server signed
// like any other, its link confirms the subscription, a suppressed address is reported and not mailed,
// and confirmFrom must be at a verified sending domain of the organization itself.

var confirmLink = regexp.MustCompile(`https?://[^\s"<>]+/p/confirm/[A-Za-z0-9_-]+`)

func TestTopicConfirmationMail(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	_, key := w.MustKey(w.owner, []string{"topics:read", "topics:write", "segments:read", "emails:read", "suppressions:write"})
	other := w.MustSignup("other-"+randomHex(t, 4)+"@example.test", "")
	_, otherKey := w.MustKey(other, []string{"topics:write"})

	// confirmFrom is checked before anything is written: an address, at a verified domain of this
	// organization (another organization's verified domain is not one).
	for name, c := range map[string]struct {
		key  string
		from string
	}{
		"not an address":         {key, "newsletter"},
		"header injection":       {key, "news@" + senderDomain + "\r\nBcc: x@y.example"},
		"not a domain of theirs": {key, "news@unverified.example"},
		"another organization's": {otherKey, "news@" + senderDomain},
	} {
		r := w.post("/v1/topics", c.key, map[string]any{"key": "t" + randomHex(t, 3), "name": "x", "doubleOptIn": true, "confirmFrom": c.from})
		if r.status != 400 || !strings.Contains(string(r.raw), `"path":"confirmFrom"`) {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	if l := expect(t, w.get("/v1/topics", key), 200); strings.Contains(string(l.raw), `"key":"t`) {
		t.Fatalf("a refused topic was written: %s", l.raw)
	}

	topic := expect(t, w.post("/v1/topics", key, map[string]any{"key": "news", "name": "The\nNewsletter", "doubleOptIn": true,
		"confirmFrom": "News <news@" + senderDomain + ">"}), 201)
	if topic.str("confirmFrom") != "News <news@"+senderDomain+">" {
		t.Fatalf("created: %s", topic.raw)
	}
	topicID := topic.str("id")

	sub := expect(t, w.post("/v1/topics/"+topicID+"/subscribe", key, map[string]any{"email": "reader@rcpt.example"}), 200)
	token, _ := sub.body["confirmToken"].(string)
	emailID, _ := sub.body["confirmationEmailId"].(string)
	if s := sub.body["subscription"].(map[string]any); s["status"] != "pending" || token == "" || emailID == "" || sub.body["confirmationError"] != nil {
		t.Fatalf("subscribe: %s", sub.raw)
	}
	got := w.mx.waitFor(t, "Subject: Confirm your subscription to The Newsletter", 60*time.Second)
	if len(got.to) != 1 || got.to[0] != "reader@rcpt.example" {
		t.Fatalf("confirmation mail to %v", got.to)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(got.data))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("From") != `"News" <news@`+senderDomain+`>` && msg.Header.Get("From") != "News <news@"+senderDomain+">" {
		t.Errorf("From %q", msg.Header.Get("From"))
	}
	if !contains(signedHeaders(t, got.data), "from") {
		t.Errorf("the confirmation mail is not DKIM-signed over From")
	}
	verifications, err := dkim.VerifyWithOptions(bytes.NewReader(got.data), &dkim.VerifyOptions{
		LookupTXT: func(domain string) ([]string, error) { return w.dnsTXT(domain) },
	})
	if err != nil || len(verifications) != 1 || verifications[0].Err != nil || verifications[0].Domain != senderDomain {
		t.Fatalf("DKIM verification of the confirmation mail: %v %+v", err, verifications)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	var body []byte
	parts := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := parts.NextPart()
		if err != nil {
			break
		}
		if strings.HasPrefix(part.Header.Get("Content-Type"), "text/plain") {
			body, _ = io.ReadAll(part) // quoted-printable decoded by the reader
		}
	}
	link := confirmLink.FindString(string(body))
	u, err := url.Parse(link)
	if err != nil || u.Path != "/p/confirm/"+token {
		t.Fatalf("link %q in the mail, want {base_url}/p/confirm/%s:\n%s", link, token, body)
	}
	if e := expect(t, w.get("/v1/emails/"+emailID, key), 200); !strings.Contains(string(e.raw), "reader@rcpt.example") {
		t.Fatalf("GET /v1/emails/%s: %s", emailID, e.raw)
	}

	rule := map[string]any{"rule": map[string]any{"field": "topic.news", "cmp": "eq"}}
	if p := expect(t, w.post("/v1/segments/preview", key, rule), 200); p.body["count"] != 0.0 {
		t.Fatalf("counted before the click: %s", p.raw)
	}
	conf := w.do(req{method: "POST", path: u.Path, header: map[string]string{"Accept": "application/json"}})
	if expect(t, conf, 200); conf.body["confirmed"] != true {
		t.Fatalf("confirm through the mailed link: %s", conf.raw)
	}
	if p := expect(t, w.post("/v1/segments/preview", key, rule), 200); p.body["count"] != 1.0 {
		t.Fatalf("not counted after the click: %s", p.raw)
	}
	// Subscribing a confirmed contact again mails nothing.
	again := expect(t, w.post("/v1/topics/"+topicID+"/subscribe", key, map[string]any{"email": "reader@rcpt.example"}), 200)
	if again.body["confirmationEmailId"] != nil || again.body["confirmToken"] != nil {
		t.Fatalf("subscribed again: %s", again.raw)
	}

	// A suppressed address is not mailed: the subscription is recorded, pending, with the send's refusal.
	expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "blocked@rcpt.example"}), 201)
	blocked := expect(t, w.post("/v1/topics/"+topicID+"/subscribe", key, map[string]any{"email": "blocked@rcpt.example"}), 200)
	ce, _ := blocked.body["confirmationError"].(map[string]any)
	if blocked.body["confirmationEmailId"] != nil || ce == nil || ce["message"] == "" ||
		blocked.body["subscription"].(map[string]any)["status"] != "pending" {
		t.Fatalf("suppressed subscriber: %s", blocked.raw)
	}

	// Without confirmFrom the application mails the link: nothing is sent.
	expect(t, w.patch("/v1/topics/"+topicID, key, map[string]any{"confirmFrom": ""}), 200)
	quiet := expect(t, w.post("/v1/topics/"+topicID+"/subscribe", key, map[string]any{"email": "quiet@rcpt.example"}), 200)
	if quiet.body["confirmToken"] == nil || quiet.body["confirmationEmailId"] != nil {
		t.Fatalf("without confirmFrom: %s", quiet.raw)
	}
	time.Sleep(500 * time.Millisecond)
	if n := w.mx.count("To: quiet@rcpt.example"); n != 0 {
		t.Fatalf("%d confirmation mails to quiet@ without confirmFrom", n)
	}
	if n := w.mx.count("Subject: Confirm your subscription"); n != 1 {
		t.Fatalf("%d confirmation mails in all, want 1", n)
	}
}
