package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/deploy/app"
)

var (
	trackedHref = regexp.MustCompile(`href="(http://track\.sender\.example/t/c/[A-Za-z0-9_-]+)"`)
	pixelSrc    = regexp.MustCompile(`src="(http://track\.sender\.example/t/o/[A-Za-z0-9_-]+)"`)
)

// TestOpenAndClickTracking turns tracking on for the domain, sends an HTML mail, follows the pixel and a link
// of the delivered copy the way a mail client would (any Host: the tracking CNAME points at Postmill), and
// checks the events: one opened however often the pixel loads, one clicked per click with url, link_id and
// recipient_id, and a redirect only to the URL of the sent mail.
func TestOpenAndClickTracking(t *testing.T) {
	t.Parallel()
	rcv := MustReceiver(t)
	w := MustMailWorld(t, func(c *app.Config) {
		c.WebhookAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.TrackingScheme = "http"
	})
	w.dns.SetA("hooks.example", netip.MustParseAddr("127.0.0.1"))
	_, w.key = w.MustKey(w.owner, []string{"*"})
	w.mustEndpoint(t, "http://hooks.example:"+rcv.port()+"/ok", "email.opened", "email.clicked")

	domains := expect(t, w.get("/v1/domains", w.owner.access), 200)
	var domainID string
	for _, d := range domains.list {
		if d := d.(map[string]any); d["domain"] == senderDomain {
			domainID = d["id"].(string)
			if d["openTracking"] != false || d["clickTracking"] != false {
				t.Fatalf("tracking is not off by default: %v", d)
			}
		}
	}
	p := expect(t, w.do(req{method: "PATCH", path: "/v1/domains/" + domainID, token: w.owner.access,
		body: map[string]any{"openTracking": true, "clickTracking": true}}), 200)
	if p.body["openTracking"] != true || p.body["clickTracking"] != true || p.body["records"] != nil {
		t.Fatalf("PATCH answer: %s", p.raw)
	}

	const target = "https://example.com/pricing?plan=pro&ref=mail"
	r := expect(t, w.send(t, map[string]any{
		"from": "ada@" + senderDomain, "to": []string{"reader@rcpt.example", "second@rcpt.example"}, "subject": "Tracked",
		"html": `<html><body><p>Hi</p><a href="https://example.com/pricing?plan=pro&amp;ref=mail">Pricing</a>` +
			`<a href="https://example.com/unsubscribe?u=1">Unsubscribe</a><a href="mailto:help@example.com">Help</a></body></html>`,
		"text": "Hi",
	}, nil), 202)
	id := r.str("id")
	msg := w.mx.waitFor(t, "reader@rcpt.example", 30*time.Second)
	if len(msg.to) != 1 {
		t.Fatalf("a tracked copy went to %v; each recipient gets its own", msg.to)
	}
	_, html, _ := mailParts(t, msg.data)
	links := trackedHref.FindAllStringSubmatch(html, -1)
	pixel := pixelSrc.FindStringSubmatch(html)
	if len(links) != 1 || pixel == nil {
		t.Fatalf("tracked html: %d rewritten links, pixel %v: %s", len(links), pixel != nil, html)
	}
	if !strings.Contains(html, `href="https://example.com/unsubscribe?u=1"`) || !strings.Contains(html, `href="mailto:help@example.com"`) {
		t.Errorf("unsubscribe or mailto link was rewritten: %s", html)
	}
	w.waitStatus(t, id, "delivered", 30*time.Second)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(raw string) *http.Response {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		rq, _ := http.NewRequest("GET", w.base+u.Path, nil)
		rq.Host = u.Host
		res, err := client.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	for range 3 {
		res := fetch(pixel[1])
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/gif" || len(body) == 0 {
			t.Fatalf("pixel: %d %s (%d bytes)", res.StatusCode, res.Header.Get("Content-Type"), len(body))
		}
	}
	res := fetch(links[0][1])
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != target {
		t.Fatalf("click: %d Location %q, want 302 to %q", res.StatusCode, res.Header.Get("Location"), target)
	}
	// A forged token redirects nowhere.
	bad := fetch("http://track.sender.example/t/c/" + strings.Repeat("A", 120))
	if bad.StatusCode != http.StatusNotFound || bad.Header.Get("Location") != "" {
		t.Fatalf("forged click token: %d Location %q", bad.StatusCode, bad.Header.Get("Location"))
	}

	opened := rcv.waitFor(t, "/ok", "email.opened", 1, 30*time.Second)
	clicked := rcv.waitFor(t, "/ok", "email.clicked", 1, 30*time.Second)
	var c struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(clicked[0].body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Data["url"] != target || c.Data["link_id"] != "0" || c.Data["message_id"] != id || c.Data["recipient_id"] == nil {
		t.Errorf("clicked payload: %s", clicked[0].body)
	}
	var o struct {
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(opened[0].body, &o)
	if o.Data["recipient_id"] != c.Data["recipient_id"] {
		t.Errorf("opened recipient %v, clicked recipient %v", o.Data["recipient_id"], c.Data["recipient_id"])
	}
	time.Sleep(500 * time.Millisecond) // give any duplicate open the time to arrive before counting
	if n := len(rcv.waitFor(t, "/ok", "email.opened", 1, time.Second)); n != 1 {
		t.Errorf("%d email.opened webhooks for three pixel loads, want 1", n)
	}
	m := expect(t, w.get("/v1/emails/"+id, w.key), 200)
	if tl := timeline(m); !contains(tl, "opened") || !contains(tl, "clicked") {
		t.Errorf("timeline %v", tl)
	}
}
