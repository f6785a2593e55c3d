package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

const inboundMXHost = "mx.postmill.test"

// inboundWorld is a platform with a DNS server the inbound domains' MX records are published in, one
// organization holding a verified inbound domain, and a key with inbound:read.
type inboundWorld struct {
	*env
	dns    *dnstest.Server
	owner  account
	key    string
	domain string
	domID  string
}

func mustInboundWorld(t *testing.T) *inboundWorld {
	t.Helper()
	dns := dnstest.New(t)
	dns.SetA(inboundMXHost, netip.MustParseAddr("127.0.0.1"))
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.InboundMXHost = inboundMXHost
	w := &inboundWorld{env: MustStart(t, cfg, "all"), dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "in-" + randomHex(t, 3) + ".acme.example"
	r := expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": "  " + strings.ToUpper(w.domain) + " "}), 201)
	w.domID = r.str("id")
	w.dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201)
	return w
}

// send delivers raw to the MX listener over SMTP and returns the reply to RCPT for each recipient and the
// error of the DATA stage (nil when 250).
func (w *inboundWorld) send(t *testing.T, from string, rcpts []string, raw string) (rcptErrs []error, dataErr error) {
	t.Helper()
	c, err := smtp.Dial(w.app.InboundAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail(from); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, r := range rcpts {
		err := c.Rcpt(r)
		rcptErrs = append(rcptErrs, err)
		if err == nil {
			ok++
		}
	}
	if ok == 0 {
		return rcptErrs, nil
	}
	wc, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	dataErr = wc.Close()
	_ = c.Quit()
	return rcptErrs, dataErr
}

func smtpCode(err error) int {
	if e, ok := err.(*textproto.Error); ok {
		return e.Code
	}
	return 0
}

func inboundMessage(to, subject, attachment string) string {
	return strings.ReplaceAll(fmt.Sprintf(`From: =?UTF-8?Q?J=C3=A9r=C3=B4me?= <jerome@sender.example>
To: %s
Cc: Other <other@sender.example>
Subject: =?ISO-8859-1?Q?Caf=E9?= %s
Message-ID: <%s@sender.example>
In-Reply-To: <parent@acme.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b1"

--b1
Content-Type: multipart/alternative; boundary="b2"

--b2
Content-Type: text/plain; charset=ISO-8859-1
Content-Transfer-Encoding: quoted-printable

Bonjour, caf=E9 cr=E8me.
--b2
Content-Type: text/html; charset=utf-8

<p>Bonjour</p>
--b2--

--b1
Content-Type: application/octet-stream
Content-Disposition: attachment; filename*=UTF-8''r%%C3%%A9sum%%C3%%A9.txt
Content-Transfer-Encoding: base64

%s
--b1--
`, to, subject, subject, attachment), "\n", "\r\n")
}

// TestInboundDomainsAndRoutesAPI: the Session routes of SPEC §4.12 end to end, with tenancy on every route.
func TestInboundDomainsAndRoutesAPI(t *testing.T) {
	t.Parallel()
	w := mustInboundWorld(t)
	other := w.MustSignup("other@other.example", "")

	// Create: trimmed and lower-cased, MX record; the same name in any organization is a conflict.
	d := expect(t, w.get("/v1/inbound/domains/"+w.domID, w.owner.access), 200)
	if d.str("domain") != w.domain || d.str("status") != "verified" || d.body["verifiedAt"] == nil || d.body["lastCheckedAt"] == nil {
		t.Fatalf("domain after verify: %s", d.raw)
	}
	rec := d.body["dnsRecord"].(map[string]any)
	if rec["recordType"] != "MX" || rec["value"] != "10 "+inboundMXHost || rec["host"] != w.domain {
		t.Fatalf("dnsRecord = %v", rec)
	}
	body := errorBody(t, w.post("/v1/inbound/domains", other.access, map[string]any{"domain": w.domain}), 409, "", "Resource already exists")
	if body["constraint"] != "inbound_domains_name_key" {
		t.Errorf("constraint = %v", body["constraint"])
	}
	errorBody(t, w.post("/v1/inbound/domains", other.access, map[string]any{"domain": "no_dots"}), 400, "", "Validation failed")

	// Verify: pending without MX, failed with an MX elsewhere; verifiedAt is kept.
	od := expect(t, w.post("/v1/inbound/domains", other.access, map[string]any{"domain": "o-" + randomHex(t, 3) + ".other.example"}), 201)
	oid := od.str("id")
	if r := expect(t, w.post("/v1/inbound/domains/"+oid+"/verify", other.access, nil), 201); r.str("status") != "pending" {
		t.Fatalf("verify without MX: %s", r.raw)
	}
	w.dns.SetMX(od.str("domain"), ports.MX{Host: "mx.elsewhere.example", Preference: 5})
	if r := expect(t, w.post("/v1/inbound/domains/"+oid+"/verify", other.access, nil), 201); r.str("status") != "failed" || r.body["verifiedAt"] != nil {
		t.Fatalf("verify with a foreign MX: %s", r.raw)
	}

	// Tenancy: another organization sees none of the owner's domain or routes.
	for _, r := range []resp{
		w.get("/v1/inbound/domains/"+w.domID, other.access),
		w.post("/v1/inbound/domains/"+w.domID+"/verify", other.access, nil),
		w.post("/v1/inbound/domains/"+w.domID+"/suspend", other.access, nil),
		w.del("/v1/inbound/domains/"+w.domID, other.access),
		w.get("/v1/inbound/routes?inboundDomainId="+w.domID, other.access),
		w.post("/v1/inbound/routes", other.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store"}),
	} {
		expect(t, r, 404)
	}
	if l := expect(t, w.get("/v1/inbound/domains", other.access), 200); len(l.list) != 1 {
		t.Fatalf("other organization lists %d domains", len(l.list))
	}

	// Routes: validation.
	for _, bad := range []map[string]any{
		{"inboundDomainId": w.domID, "matchType": "exact", "action": "store"},
		{"inboundDomainId": w.domID, "matchType": "exact", "matchValue": "nodomain", "action": "store"},
		{"inboundDomainId": w.domID, "matchType": "pattern", "matchValue": "*@" + w.domain, "action": "webhook", "destination": "ftp://x.example"},
		{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "forward_email", "destination": "not an address"},
		{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store", "destination": "https://x.example"},
		{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store", "priority": 10001},
	} {
		b := errorBody(t, w.post("/v1/inbound/routes", w.owner.access, bad), 400, "", "Validation failed")
		if det, _ := b["details"].([]any); len(det) == 0 {
			t.Errorf("%v: no details", bad)
		}
	}
	// A route that could take no mail at its domain is refused, and nothing is written.
	for _, bad := range []map[string]any{
		{"inboundDomainId": w.domID, "matchType": "exact", "matchValue": "x@in.evil.example", "action": "store"},
		{"inboundDomainId": w.domID, "matchType": "exact", "matchValue": "x@sub." + w.domain, "action": "store"},
		{"inboundDomainId": w.domID, "matchType": "pattern", "matchValue": "support-*@in.evil.example", "action": "store"},
	} {
		b := errorBody(t, w.post("/v1/inbound/routes", w.owner.access, bad), 400, "", "Validation failed")
		if det, _ := b["details"].([]any); len(det) != 1 || det[0].(map[string]any)["path"] != "matchValue" ||
			!strings.Contains(det[0].(map[string]any)["message"].(string), w.domain) {
			t.Errorf("%v: details %v", bad, b["details"])
		}
	}
	if l := expect(t, w.get("/v1/inbound/routes?inboundDomainId="+w.domID, w.owner.access), 200); len(l.list) != 0 {
		t.Fatalf("refused routes were written: %s", l.raw)
	}
	mk := func(body map[string]any) resp {
		body["inboundDomainId"] = w.domID
		return expect(t, w.post("/v1/inbound/routes", w.owner.access, body), 201)
	}
	exact := mk(map[string]any{"matchType": "exact", "matchValue": "Support@" + strings.ToUpper(w.domain), "action": "store", "priority": 900})
	if exact.str("matchValue") != "support@"+w.domain || exact.body["enabled"] != true {
		t.Fatalf("exact route: %s", exact.raw)
	}
	pat := mk(map[string]any{"matchType": "pattern", "matchValue": "sales-*@" + w.domain, "action": "webhook", "destination": "http://10.0.0.1/hook"})
	catch := mk(map[string]any{"matchType": "catch_all", "matchValue": "ignored", "action": "store"})
	if catch.str("matchValue") != "" || int(catch.body["priority"].(float64)) != 100 {
		t.Fatalf("catch-all route: %s", catch.raw)
	}
	resolve := func(addr, token string) any {
		r := expect(t, w.get("/v1/inbound/routes/resolve?address="+addr, token), 200)
		if r.body["route"] == nil {
			return nil
		}
		return r.body["route"].(map[string]any)["id"]
	}
	if got := resolve("support@"+w.domain, w.owner.access); got != exact.str("id") {
		t.Errorf("support resolves to %v", got)
	}
	if got := resolve("sales-eu@"+w.domain, w.owner.access); got != pat.str("id") {
		t.Errorf("sales-eu resolves to %v", got)
	}
	if got := resolve("x@"+w.domain, w.owner.access); got != catch.str("id") {
		t.Errorf("x resolves to %v", got)
	}
	if got := resolve("support@"+w.domain, other.access); got != nil {
		t.Errorf("another organization resolves the owner's address to %v", got)
	}
	// PATCH: only enabled, priority, destination; a disabled route no longer matches.
	p := expect(t, w.do(req{method: "PATCH", path: "/v1/inbound/routes/" + exact.str("id"), token: w.owner.access,
		body: map[string]any{"enabled": false, "priority": 5}}), 200)
	if p.body["enabled"] != false || int(p.body["priority"].(float64)) != 5 {
		t.Fatalf("patched: %s", p.raw)
	}
	expect(t, w.do(req{method: "PATCH", path: "/v1/inbound/routes/" + exact.str("id"), token: other.access, body: map[string]any{"enabled": true}}), 404)
	errorBody(t, w.do(req{method: "PATCH", path: "/v1/inbound/routes/" + exact.str("id"), token: w.owner.access,
		body: map[string]any{"destination": "https://x.example"}}), 400, "", "Validation failed")
	if got := resolve("support@"+w.domain, w.owner.access); got != catch.str("id") {
		t.Errorf("disabled exact route still wins: %v", got)
	}
	// What a route matches and does is fixed: a PATCH naming it is refused, not answered 200 unchanged.
	for _, field := range []string{"matchValue", "matchType", "action", "inboundDomainId"} {
		b := errorBody(t, w.do(req{method: "PATCH", path: "/v1/inbound/routes/" + exact.str("id"), token: w.owner.access,
			body: map[string]any{field: "other@" + w.domain, "priority": 7}}), 400, "", "Validation failed")
		if det, _ := b["details"].([]any); len(det) != 1 || det[0].(map[string]any)["path"] != field {
			t.Errorf("PATCH %s: details %v", field, b["details"])
		}
	}
	if l := expect(t, w.get("/v1/inbound/routes?inboundDomainId="+w.domID, w.owner.access), 200); !strings.Contains(string(l.raw), `"matchValue":"support@`+w.domain+`"`) ||
		strings.Contains(string(l.raw), `"priority":7`) {
		t.Errorf("a refused PATCH changed the route: %s", l.raw)
	}
	if l := expect(t, w.get("/v1/inbound/routes?inboundDomainId="+w.domID, w.owner.access), 200); len(l.list) != 3 {
		t.Fatalf("routes listed: %d", len(l.list))
	}
	expect(t, w.del("/v1/inbound/routes/"+pat.str("id"), other.access), 404)
	expect(t, w.del("/v1/inbound/routes/"+pat.str("id"), w.owner.access), 200)
	if l := expect(t, w.get("/v1/inbound/routes?inboundDomainId="+w.domID, w.owner.access), 200); len(l.list) != 2 {
		t.Fatalf("routes after delete: %d", len(l.list))
	}
	// Delete the other organization's domain.
	if r := expect(t, w.del("/v1/inbound/domains/"+oid, other.access), 200); r.body["deleted"] != true {
		t.Fatalf("delete: %s", r.raw)
	}
	expect(t, w.get("/v1/inbound/domains/"+oid, other.access), 404)
}

// TestInboundReceiving: RCPT is refused for unknown and suspended domains, accepted mail is parsed, routed
// or dead-lettered, stored once when retried, downloadable only when clean, and invisible to another
// organization.
func TestInboundReceiving(t *testing.T) {
	t.Parallel()
	w := mustInboundWorld(t)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "exact",
		"matchValue": "support@" + w.domain, "action": "store"}), 201)

	errs, _ := w.send(t, "jerome@sender.example", []string{"x@unknown.example"}, "")
	if smtpCode(errs[0]) != 550 {
		t.Fatalf("RCPT at an unknown domain: %v, want 550", errs[0])
	}
	clean := "aGVsbG8gd29ybGQK" // "hello world\n"
	raw := inboundMessage("support@"+w.domain, "one", clean)
	errs, derr := w.send(t, "jerome@sender.example", []string{"support@" + w.domain, "nobody@" + w.domain}, raw)
	if errs[0] != nil || errs[1] != nil || derr != nil {
		t.Fatalf("delivery: rcpt %v, data %v", errs, derr)
	}
	// A retrying sender delivers the same bytes again: stored once.
	if _, derr := w.send(t, "jerome@sender.example", []string{"support@" + w.domain}, raw); derr != nil {
		t.Fatalf("second delivery: %v", derr)
	}

	l := expect(t, w.get("/v1/received-emails", w.key), 200)
	data := l.body["data"].([]any)
	if len(data) != 2 || l.body["limit"].(float64) != 25 || l.body["offset"].(float64) != 0 {
		t.Fatalf("list: %s", l.raw)
	}
	byTo := map[string]map[string]any{}
	for _, d := range data {
		m := d.(map[string]any)
		byTo[m["to"].(string)] = m
	}
	got, dead := byTo["support@"+w.domain], byTo["nobody@"+w.domain]
	if got == nil || dead == nil {
		t.Fatalf("recipients: %v", byTo)
	}
	if got["status"] != "delivered" || got["routeAction"] != "store" || dead["status"] != "dead_lettered" || dead["routeId"] != nil {
		t.Errorf("statuses: %v / %v", got, dead)
	}
	if got["from"] != "jerome@sender.example" || got["headerFrom"] != "jerome@sender.example" || got["headerFromName"] != "Jérôme" ||
		got["subject"] != "Café one" || got["messageId"] != "<one@sender.example>" || got["inReplyTo"] != "<parent@acme.example>" ||
		got["references"] != nil || got["spamStatus"] != "ham" || got["scanStatus"] != "clean" || got["sizeBytes"].(float64) != float64(len(raw)) {
		t.Errorf("list item: %v", got)
	}
	if cc := got["ccAddresses"].([]any); len(cc) != 1 || cc[0] != "other@sender.example" {
		t.Errorf("cc = %v", cc)
	}
	id := got["id"].(string)
	det := expect(t, w.get("/v1/received-emails/"+id, w.key), 200)
	if det.str("text") != "Bonjour, café crème." || det.str("html") != "<p>Bonjour</p>" {
		t.Errorf("bodies: %q %q", det.str("text"), det.str("html"))
	}
	if h := det.body["headers"].(map[string]any); h["Message-Id"] != "<one@sender.example>" && h["Message-ID"] != "<one@sender.example>" {
		t.Errorf("headers: %v", h)
	}
	atts := det.body["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("attachments: %v", atts)
	}
	att := atts[0].(map[string]any)
	if att["filename"] != "résumé.txt" || att["scanStatus"] != "clean" || att["downloadable"] != true || att["size"].(float64) != 12 {
		t.Errorf("attachment: %v", att)
	}
	if strings.Contains(string(det.raw), "inbound/") {
		t.Errorf("detail exposes a storage key: %s", det.raw)
	}
	dl := expect(t, w.get("/v1/received-emails/"+id+"/attachments/"+att["id"].(string), w.key), 200)
	if string(dl.raw) != "hello world\n" || dl.header.Get("X-Content-Type-Options") != "nosniff" ||
		dl.header.Get("Content-Disposition") != `attachment; filename="rsum.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt` {
		t.Errorf("download: %q %v", dl.raw, dl.header)
	}
	rawResp := expect(t, w.get("/v1/received-emails/"+id+"/raw", w.key), 200)
	if string(rawResp.raw) != raw || rawResp.header.Get("Content-Type") != "message/rfc822" ||
		!strings.HasPrefix(rawResp.header.Get("Content-Disposition"), "attachment; filename=") {
		t.Errorf("raw: %v", rawResp.header)
	}
	expect(t, w.get("/v1/received-emails/"+id+"/attachments/"+id, w.key), 404)

	// An infected attachment is kept, quarantined and never downloadable.
	eicar := "WDVPIVAlQEFQWzRcUFpYNTQoUF4pN0NDKTd9JEVJQ0FSLVNUQU5EQVJELUFOVElWSVJVUy1URVNULUZJTEUhJEgrSCo="
	if _, derr := w.send(t, "jerome@sender.example", []string{"support@" + w.domain}, inboundMessage("support@"+w.domain, "two", eicar)); derr != nil {
		t.Fatalf("infected delivery: %v", derr)
	}
	l = expect(t, w.get("/v1/received-emails?limit=1", w.key), 200)
	inf := l.body["data"].([]any)[0].(map[string]any)
	if inf["scanStatus"] != "infected" || inf["status"] != "quarantined" {
		t.Fatalf("infected item: %v", inf)
	}
	det = expect(t, w.get("/v1/received-emails/"+inf["id"].(string), w.key), 200)
	ia := det.body["attachments"].([]any)[0].(map[string]any)
	if ia["downloadable"] != false || ia["scanSignature"] == "" {
		t.Errorf("infected attachment: %v", ia)
	}
	b := errorBody(t, w.get("/v1/received-emails/"+inf["id"].(string)+"/attachments/"+ia["id"].(string), w.key), 403, "", "")
	if !strings.Contains(b["message"].(string), "infected") {
		t.Errorf("403 message %q does not name the verdict", b["message"])
	}

	// Tenancy: another organization's key sees nothing.
	other := w.MustSignup("other@other.example", "")
	_, okey := w.MustKey(other, []string{ports.ScopeInboundRead})
	if l := expect(t, w.get("/v1/received-emails", okey), 200); len(l.body["data"].([]any)) != 0 {
		t.Fatalf("other organization lists %s", l.raw)
	}
	expect(t, w.get("/v1/received-emails/"+id, okey), 404)
	expect(t, w.get("/v1/received-emails/"+id+"/raw", okey), 404)
	expect(t, w.get("/v1/received-emails/"+id+"/attachments/"+att["id"].(string), okey), 404)
	// Scope: a key without inbound:read is refused.
	_, sendKey := w.MustKey(w.owner, []string{ports.ScopeEmailsSend})
	expect(t, w.get("/v1/received-emails", sendKey), 403)
	requireDetail(t, w.get("/v1/received-emails?limit=101", w.key), "limit")
	requireDetail(t, w.get("/v1/received-emails?limit=0", w.key), "limit")

	// Suspended: RCPT refused.
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/suspend", w.owner.access, nil), 201)
	errs, _ = w.send(t, "jerome@sender.example", []string{"support@" + w.domain}, "")
	if smtpCode(errs[0]) != 550 {
		t.Fatalf("RCPT at a suspended domain: %v, want 550", errs[0])
	}
}

// TestInboundWebhookRoute: a webhook route posts the parsed message signed with the route's secret, as
// SPEC §6's events are signed; a destination at a private address is blocked at delivery.
func TestInboundWebhookRoute(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	t.Cleanup(hook.Close)
	dns := dnstest.New(t)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.InboundMXHost = inboundMXHost
	cfg.WebhookAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	w := &inboundWorld{env: MustStart(t, cfg, "all"), dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "hook-" + randomHex(t, 3) + ".acme.example"
	w.domID = expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": w.domain}), 201).str("id")
	dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201)

	r := expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "exact",
		"matchValue": "hook@" + w.domain, "action": "webhook", "destination": hook.URL + "/inbound"}), 201)
	secret := r.str("signingSecret")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("webhook route without a signing secret: %s", r.raw)
	}
	if l := expect(t, w.get("/v1/inbound/routes?inboundDomainId="+w.domID, w.owner.access), 200); strings.Contains(string(l.raw), secret) {
		t.Fatal("the route list shows the signing secret")
	}
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "exact",
		"matchValue": "private@" + w.domain, "action": "webhook", "destination": "http://10.0.0.1/hook"}), 201)

	if _, derr := w.send(t, "jerome@sender.example", []string{"hook@" + w.domain}, inboundMessage("hook@"+w.domain, "hook", "aGVsbG8gd29ybGQK")); derr != nil {
		t.Fatal(derr)
	}
	var req *http.Request
	var body []byte
	select {
	case req = <-got:
		body = <-bodies
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook request within 20s")
	}
	sig := req.Header.Get("X-Service-Signature")
	ts, v1, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",v1=")
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%s.%s.%s", ts, req.Header.Get("X-Service-Event-Id"), body)
	if hex.EncodeToString(mac.Sum(nil)) != v1 || req.Header.Get("X-Service-Event") != "email.received" ||
		req.Header.Get("User-Agent") != "Service-Webhooks/1" {
		t.Fatalf("request headers %v do not verify", req.Header)
	}
	var payload struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			MessageID string         `json:"message_id"`
			Email     map[string]any `json:"received_email"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &payload); err != nil {
		t.Fatal(err)
	}
	if payload.ID != req.Header.Get("X-Service-Event-Id") || payload.Type != "email.received" || payload.Data.Email["text"] != "Bonjour, café crème." ||
		strings.Contains(string(body), "inbound/") {
		t.Fatalf("payload: %s", body)
	}
	att := payload.Data.Email["attachments"].([]any)[0].(map[string]any)
	if att["downloadPath"] != "/v1/received-emails/"+payload.Data.MessageID+"/attachments/"+att["id"].(string) {
		t.Errorf("attachment: %v", att)
	}
	waitStatus := func(id, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			d := expect(t, w.get("/v1/received-emails/"+id, w.key), 200)
			if d.str("status") == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %q, want %q", d.str("status"), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitStatus(payload.Data.MessageID, "delivered")

	// A message with a raw Latin-1 subject, NUL and a decoded line break is posted with the values stored.
	hostile := "From: =?utf-8?q?Eve=0D=0AX=00?= <eve@sender.example>\r\nSubject: caf\xe9 =?utf-8?q?=0D=0ABcc:_x@evil.example?=\r\n\r\na\x00b\r\n"
	if _, derr := w.send(t, "eve@sender.example", []string{"hook@" + w.domain}, hostile); derr != nil {
		t.Fatal(derr)
	}
	select {
	case <-got:
		body = <-bodies
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook request for the hostile message within 20s")
	}
	if err := json.Unmarshal(body, &payload); err != nil {
		t.Fatal(err)
	}
	if e := payload.Data.Email; e["subject"] != "café   Bcc: x@evil.example" || e["headerFromName"] != "Eve  X " || e["text"] != "a\uFFFDb\r\n" ||
		e["headers"].(map[string]any)["Subject"] != e["subject"] {
		t.Errorf("hostile message payload: %s", body)
	}

	if _, derr := w.send(t, "jerome@sender.example", []string{"private@" + w.domain}, inboundMessage("private@"+w.domain, "private", "aGVsbG8gd29ybGQK")); derr != nil {
		t.Fatal(derr)
	}
	l := expect(t, w.get("/v1/received-emails?limit=1", w.key), 200)
	waitStatus(l.body["data"].([]any)[0].(map[string]any)["id"].(string), "blocked")
}

// TestInboundForwardRoute: a forward_email route re-sends the message through the send path from the
// organization's verified sending domain, with the original sender as Reply-To, and forwardStatus follows.
func TestInboundForwardRoute(t *testing.T) {
	t.Parallel()
	mw := MustMailWorld(t, func(c *app.Config) { c.InboundMXHost = inboundMXHost })
	w := &inboundWorld{env: mw.env, dns: mw.dns, owner: mw.owner}
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "fwd-" + randomHex(t, 3) + ".acme.example"
	w.domID = expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": w.domain}), 201).str("id")
	w.dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "exact",
		"matchValue": "fwd@" + w.domain, "action": "forward_email", "destination": "desk@rcpt.example"}), 201)

	if _, derr := w.send(t, "jerome@sender.example", []string{"fwd@" + w.domain}, inboundMessage("fwd@"+w.domain, "forward me", "aGVsbG8gd29ybGQK")); derr != nil {
		t.Fatal(derr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := expect(t, w.get("/v1/received-emails?limit=1", w.key), 200)
		item := l.body["data"].([]any)[0].(map[string]any)
		if item["forwardStatus"] == "sent" && item["status"] == "delivered" {
			break
		}
		if item["forwardStatus"] == "failed" || time.Now().After(deadline) {
			t.Fatalf("received email after forwarding: %v", item)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := mw.mx.waitFor(t, "X-Postmill-Forwarded-For: fwd@"+w.domain, 30*time.Second)
	data := string(got.data)
	if len(got.to) != 1 || got.to[0] != "desk@rcpt.example" || !strings.Contains(data, "Reply-To: <jerome@sender.example>") ||
		!strings.Contains(data, "forwarding@"+senderDomain) || !strings.Contains(data, "DKIM-Signature:") {
		t.Fatalf("forwarded message to %v:\n%s", got.to, data)
	}

	// A subject and a sender's name whose encoded-words decode to CR LF are kept on one line, so the
	// forward goes out, with no header line of the sender's making.
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "exact",
		"matchValue": "fwd2@" + w.domain, "action": "forward_email", "destination": "desk@rcpt.example"}), 201)
	raw := "From: =?utf-8?q?Eve=0D=0ABcc=3A_x=40evil.example?= <eve@sender.example>\r\nTo: fwd2@" + w.domain +
		"\r\nSubject: =?utf-8?q?fwd=0D=0ABcc:_x@evil.example?=\r\n\r\nhello\r\n"
	if _, derr := w.send(t, "eve@sender.example", []string{"fwd2@" + w.domain}, raw); derr != nil {
		t.Fatal(derr)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		item := expect(t, w.get("/v1/received-emails?limit=1", w.key), 200).body["data"].([]any)[0].(map[string]any)
		if item["to"] == "fwd2@"+w.domain && item["forwardStatus"] == "sent" {
			break
		}
		if item["forwardStatus"] == "failed" || time.Now().After(deadline) {
			t.Fatalf("received email after forwarding: %v", item)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got = mw.mx.waitFor(t, "X-Postmill-Forwarded-For: fwd2@"+w.domain, 30*time.Second)
	if data := string(got.data); len(got.to) != 1 || got.to[0] != "desk@rcpt.example" || strings.Contains(data, "\nBcc:") ||
		!strings.Contains(data, "Subject: fwd  Bcc: x@evil.example") {
		t.Fatalf("forwarded message to %v:\n%s", got.to, data)
	}
}
