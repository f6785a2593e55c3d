package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/mail"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

// mailWorld is a platform with a DNS server and recipient MX hosts it controls: the sender domain's records
// are published in dns, recipients at rcpt.example are served by mx (a real SMTP server on loopback).
type mailWorld struct {
	*env
	dns   *dnstest.Server
	mx    *sink
	owner account
	key   string
}

const senderDomain = "sender.example"

// MustMailWorld starts DNS, the recipient MX, and Postmill delivering to them, with a verified domain and a
// key of the given scopes for a fresh organization.
func MustMailWorld(t *testing.T, mutate func(*app.Config)) *mailWorld {
	t.Helper()
	dns := dnstest.New(t)
	mx := MustSink(t, "127.0.0.1", "0")
	dns.SetMX("rcpt.example", ports.MX{Host: "mx.rcpt.example", Preference: 10})
	dns.SetA("mx.rcpt.example", netip.MustParseAddr("127.0.0.1"))

	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.MTAPort = atoiPort(t, mx.port())
	cfg.MTARetryBase = 200 * time.Millisecond
	w := &mailWorld{dns: dns, mx: mx}
	if mutate != nil {
		mutate(&cfg)
	}
	w.env = MustStart(t, cfg, "all")
	w.owner = w.MustSignup("owner@"+senderDomain, "")
	w.mustVerifiedDomain(t, senderDomain)
	_, w.key = w.MustKey(w.owner, []string{"emails:send", "emails:read"})
	return w
}

// publish puts a domain's records into the DNS server, as its owner would at their DNS host.
func (w *mailWorld) publish(t *testing.T, records []any, only ...string) {
	t.Helper()
	for _, r := range records {
		rec := r.(map[string]any)
		typ, host, value := rec["type"].(string), rec["host"].(string), rec["value"].(string)
		if len(only) > 0 && !contains(only, typ) {
			continue
		}
		switch typ {
		case "SPF", "DKIM", "DMARC":
			w.dns.SetTXT(host, value)
		case "RETURN_PATH", "TRACKING":
			w.dns.SetCNAME(host, value)
		default:
			t.Fatalf("unknown record type %q", typ)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (w *mailWorld) mustVerifiedDomain(t *testing.T, name string) string {
	t.Helper()
	d := expect(t, w.post("/v1/domains", w.owner.access, map[string]any{"domain": name}), 201)
	records, _ := d.body["records"].([]any)
	w.publish(t, records)
	v := expect(t, w.post("/v1/domains/"+d.str("id")+"/verify", w.owner.access, nil), 201)
	if v.str("status") != "verified" {
		t.Fatalf("domain did not verify: %s", v.raw)
	}
	return d.str("id")
}

func (w *mailWorld) send(t *testing.T, body map[string]any, header map[string]string) resp {
	t.Helper()
	return w.do(req{method: "POST", path: "/v1/emails", token: w.key, body: body, header: header})
}

// waitStatus polls GET /v1/emails/{id} until the message reaches status.
func (w *mailWorld) waitStatus(t *testing.T, id, status string, timeout time.Duration) resp {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := expect(t, w.get("/v1/emails/"+id, w.key), 200)
		if r.str("status") == status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s is %q, never %q: %s", id, r.str("status"), status, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func timeline(r resp) []string {
	var out []string
	evs, _ := r.body["events"].([]any)
	for _, e := range evs {
		out = append(out, e.(map[string]any)["type"].(string))
	}
	return out
}

func TestDomainLifecycle(t *testing.T) {
	t.Parallel()
	clearOfWindowEdge(t, time.Hour, time.Minute)
	dns := dnstest.New(t)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	e := MustStart(t, cfg, "all")
	a := e.MustSignup("dom@example.com", "")
	w := &mailWorld{env: e, dns: dns, owner: a}

	d := expect(t, e.post("/v1/domains", a.access, map[string]any{"domain": "  Example.ORG "}), 201)
	if d.str("domain") != "example.org" || d.str("status") != "pending" || d.body["verifiedAt"] != nil {
		t.Fatalf("created domain: %s", d.raw)
	}
	if strings.Contains(strings.ToLower(string(d.raw)), "private") {
		t.Fatal("domain answer mentions a private key")
	}
	records, _ := d.body["records"].([]any)
	byType := map[string]map[string]any{}
	for _, r := range records {
		m := r.(map[string]any)
		byType[m["type"].(string)] = m
	}
	if len(byType) != 5 {
		t.Fatalf("records: %s", d.raw)
	}
	if byType["SPF"]["host"] != "example.org" || byType["SPF"]["value"] != "v=spf1 include:spf.postmill.local ~all" {
		t.Errorf("SPF record: %v", byType["SPF"])
	}
	dk := byType["DKIM"]
	if !strings.HasSuffix(dk["host"].(string), "._domainkey.example.org") || !strings.HasPrefix(dk["value"].(string), "v=DKIM1; k=rsa; p=") {
		t.Errorf("DKIM record: %v", dk)
	}
	if byType["DMARC"]["host"] != "_dmarc.example.org" || byType["DMARC"]["value"] != "v=DMARC1; p=quarantine; rua=mailto:dmarc@reports.postmill.local; fo=1" {
		t.Errorf("DMARC record: %v", byType["DMARC"])
	}
	if byType["RETURN_PATH"]["host"] != "bounce.example.org" || byType["RETURN_PATH"]["value"] != "bounces.postmill.local" {
		t.Errorf("RETURN_PATH record: %v", byType["RETURN_PATH"])
	}
	if byType["TRACKING"]["host"] != "track.example.org" || byType["TRACKING"]["value"] != "track.postmill.local" {
		t.Errorf("TRACKING record: %v", byType["TRACKING"])
	}
	id := d.str("id")

	errorBody(t, e.post("/v1/domains", a.access, map[string]any{"domain": "example.org"}), 409, "", "Resource already exists")
	for _, bad := range []string{"nodot", "-bad.example", "bad-.example", "a..example", strings.Repeat("a", 64) + ".example", "under_score.example"} {
		errorBody(t, e.post("/v1/domains", a.access, map[string]any{"domain": bad}), 400, "", "Validation failed")
	}

	// Nothing published: stays pending.
	v := expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	if v.str("status") != "pending" {
		t.Errorf("no records: status %s", v.str("status"))
	}
	// Only DKIM published: some but not all required → failed.
	w.publish(t, records, "DKIM")
	v = expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	if v.str("status") != "failed" {
		t.Errorf("partial records: status %s", v.str("status"))
	}
	// SPF merged into an existing record with other mechanisms still counts; CNAME with another case too.
	w.dns.SetTXT("example.org", "v=spf1 ip4:192.0.2.0/24 include:spf.postmill.local ~all")
	w.dns.SetCNAME("bounce.example.org", "BOUNCES.postmill.local.")
	v = expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	if v.str("status") != "verified" || v.body["verifiedAt"] == nil {
		t.Fatalf("all required records: %s", v.raw)
	}
	firstVerified := v.str("verifiedAt")
	for _, r := range v.body["records"].([]any) {
		m := r.(map[string]any)
		if m["checkedAt"] == nil {
			t.Errorf("record %v not checked", m["type"])
		}
		if (m["type"] == "DKIM" || m["type"] == "SPF" || m["type"] == "RETURN_PATH") && m["verified"] != true {
			t.Errorf("record %v not verified", m["type"])
		}
	}
	// Re-verifying keeps verifiedAt.
	v = expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	if v.str("verifiedAt") != firstVerified {
		t.Errorf("verifiedAt moved: %s → %s", firstVerified, v.str("verifiedAt"))
	}
	rr := expect(t, e.get("/v1/domains/"+id+"/dns-records", a.access), 200)
	if len(rr.list) != 5 {
		t.Errorf("dns-records: %s", rr.raw)
	}
	if l := expect(t, e.get("/v1/domains", a.access), 200); len(l.list) != 1 || l.list[0].(map[string]any)["records"] != nil {
		t.Errorf("domain list: %s", l.raw)
	}
	s := expect(t, e.post("/v1/domains/"+id+"/suspend", a.access, nil), 201)
	if s.str("status") != "suspended" {
		t.Errorf("suspend: %s", s.raw)
	}

	// Cross-organization: another organization sees none of it.
	b := e.MustSignup("other@example.com", "")
	errorBody(t, e.get("/v1/domains/"+id, b.access), 404, "", "")
	errorBody(t, e.post("/v1/domains/"+id+"/verify", b.access, nil), 404, "", "")
	errorBody(t, e.post("/v1/domains/"+id+"/suspend", b.access, nil), 404, "", "")
	if l := expect(t, e.get("/v1/domains", b.access), 200); len(l.list) != 0 {
		t.Errorf("B lists A's domains: %s", l.raw)
	}
	// B may add the same name in its own organization.
	expect(t, e.post("/v1/domains", b.access, map[string]any{"domain": "example.org"}), 201)

	// The verify limit: 10 per organization per hour (4 used above).
	for i := 0; i < 6; i++ {
		expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	}
	r := e.post("/v1/domains/"+id+"/verify", a.access, nil)
	if body := errorBody(t, r, 429, "Too Many Requests", "Rate limit exceeded. Try again later."); body["retryAfterSeconds"] == nil {
		t.Errorf("verify limit body: %s", r.raw)
	}
}

func TestSendDeliversSignedMail(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	att := base64.StdEncoding.EncodeToString([]byte("hello attachment"))
	r := expect(t, w.send(t, map[string]any{
		"from": "Ada <ada@" + senderDomain + ">", "to": "rcpt1@rcpt.example", "cc": []string{"rcpt2@rcpt.example"},
		"bcc": []string{"hidden@rcpt.example"}, "subject": "Hello e2e", "text": "plain body", "html": "<p>html body</p>",
		"replyTo": "replies@" + senderDomain, "headers": map[string]string{"X-Campaign": "c-42"},
		"tags": map[string]string{"kind": "welcome"}, "metadata": map[string]any{"secret": "never-in-mail"},
		"attachments": []map[string]any{{"filename": "a.txt", "contentType": "text/plain", "content": att}},
	}, nil), 202)
	if r.str("status") != "queued" || r.body["deduped"] != nil {
		t.Fatalf("send answer: %s", r.raw)
	}
	id := r.str("id")
	m := w.waitStatus(t, id, "delivered", 30*time.Second)
	got := w.mx.waitFor(t, "Subject: Hello e2e", 5*time.Second)
	if len(got.to) != 3 {
		t.Errorf("one transaction for the domain with 3 recipients, got %v", got.to)
	}
	if !strings.HasPrefix(got.from, "b-") || !strings.HasSuffix(got.from, "@bounce."+senderDomain) {
		t.Errorf("envelope sender %q is not a VERP address on bounce.%s", got.from, senderDomain)
	}
	data := string(got.data)
	for _, want := range []string{"X-Campaign: c-42", "Reply-To:", "a.txt", "DKIM-Signature:", "Message-Id: <" + id + "@" + senderDomain + ">"} {
		if !strings.Contains(data, want) && !strings.Contains(data, strings.ReplaceAll(want, "Message-Id", "Message-ID")) {
			t.Errorf("delivered mail lacks %q", want)
		}
	}
	for _, never := range []string{"never-in-mail", "hidden@rcpt.example"} {
		if strings.Contains(data, never) {
			t.Errorf("delivered mail contains %q", never)
		}
	}
	// The DKIM signature verifies against the key published in DNS.
	verifications, err := dkim.VerifyWithOptions(bytes.NewReader(got.data), &dkim.VerifyOptions{
		LookupTXT: func(domain string) ([]string, error) { return w.dnsTXT(domain) },
	})
	if err != nil || len(verifications) != 1 || verifications[0].Err != nil || verifications[0].Domain != senderDomain {
		t.Fatalf("DKIM verification: %v %+v", err, verifications)
	}
	w.independentDKIMCheck(t, got.data)

	// The timeline: queued, sent, delivered with the server's reply; recipients delivered.
	tl := timeline(m)
	if len(tl) < 3 || tl[0] != "queued" || !contains(tl, "sent") || !contains(tl, "delivered") {
		t.Errorf("timeline %v", tl)
	}
	for _, ev := range m.body["events"].([]any) {
		e := ev.(map[string]any)
		if e["type"] == "delivered" && !strings.HasPrefix(fmt.Sprint(e["providerResponse"]), "250") {
			t.Errorf("delivered providerResponse %v", e["providerResponse"])
		}
	}
	recips, _ := m.body["recipients"].([]any)
	if len(recips) != 3 {
		t.Fatalf("recipients: %s", m.raw)
	}
	for _, rc := range recips {
		if rc.(map[string]any)["status"] != "delivered" {
			t.Errorf("recipient %v", rc)
		}
	}
	if tags, _ := m.body["tags"].(map[string]any); tags["kind"] != "welcome" {
		t.Errorf("tags not echoed: %s", m.raw)
	}
	if md, _ := m.body["metadata"].(map[string]any); md["secret"] != "never-in-mail" {
		t.Errorf("metadata not echoed: %s", m.raw)
	}
}

// dnsTXT asks the test DNS server through Postmill's own resolver adapter would be circular; the DKIM
// verifier gets the record straight from the server's UDP port with a plain query instead.
func (w *mailWorld) dnsTXT(name string) ([]string, error) {
	return lookupTXT(w.dns.Addr(), name)
}

// independentDKIMCheck runs dkimverify (Debian's python3-dkim) when installed: a verifier that shares no
// code with Postmill. It reads the key from DNS, so it is pointed at the test server with a dnspython
// override.
func (w *mailWorld) independentDKIMCheck(t *testing.T, msg []byte) {
	t.Helper()
	// Debian's interpreter, where python3-dkim installs; not whatever python3 comes first on PATH.
	const python = "/usr/bin/python3"
	if _, err := exec.LookPath(python); err != nil {
		t.Log("python3 not installed: independent DKIM check skipped")
		return
	}
	script := `
import sys, dkim, dns.resolver
host, port = sys.argv[1].rsplit(':', 1)
r = dns.resolver.Resolver(configure=False)
r.nameservers = [host]
r.port = int(port)
def get_txt(name, timeout=5):
    n = name.decode() if isinstance(name, bytes) else name
    try:
        ans = r.resolve(n, 'TXT')
    except Exception:
        return None
    return b''.join(b''.join(rr.strings) for rr in ans)
ok = dkim.verify(sys.stdin.buffer.read(), dnsfunc=get_txt)
print('pass' if ok else 'fail')
sys.exit(0 if ok else 1)
`
	cmd := exec.Command(python, "-c", script, w.dns.Addr())
	cmd.Stdin = bytes.NewReader(msg)
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "No module named") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-dkim is missing in CI (deploy/scripts/test-deps.sh installs it): %s", out)
		}
		t.Logf("python3-dkim not installed: independent DKIM check skipped (%s)", strings.TrimSpace(string(out)))
		return
	}
	if err != nil || !strings.Contains(string(out), "pass") {
		t.Fatalf("independent DKIM verifier (dkimpy) rejected the signature: %v %s", err, out)
	}
	// The same verifier must refuse a copy whose signed Subject was altered.
	tampered := bytes.Replace(msg, []byte("Subject: "), []byte("Subject: Re: "), 1)
	cmd = exec.Command(python, "-c", script, w.dns.Addr())
	cmd.Stdin = bytes.NewReader(tampered)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "fail") {
		t.Fatalf("independent DKIM verifier accepted a tampered message: %v %s", err, out)
	}
}

func TestSendVariantsAndTimeline(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	base := func(subject string) map[string]any {
		return map[string]any{"from": "ada@" + senderDomain, "to": []string{"x@rcpt.example"}, "subject": subject, "text": "hi"}
	}

	// Idempotency: same key → same id, deduped only on the replay, delivered once.
	h := map[string]string{"Idempotency-Key": "order-123"}
	first := expect(t, w.send(t, base("Idem"), h), 202)
	if _, ok := first.body["deduped"]; ok {
		t.Errorf("first use carries deduped: %s", first.raw)
	}
	body := base("Different body, same key")
	replay := expect(t, w.send(t, body, h), 202)
	if replay.str("id") != first.str("id") || replay.body["deduped"] != true {
		t.Errorf("replay: %s vs %s", replay.raw, first.raw)
	}
	w.waitStatus(t, first.str("id"), "delivered", 30*time.Second)
	if n := w.mx.count("Subject: Idem"); n != 1 {
		t.Errorf("idempotent send delivered %d times", n)
	}

	// Sandbox: queued then sent with the sandbox response, never delivered.
	sb := base("Sandboxed")
	sb["sandbox"] = true
	s := expect(t, w.send(t, sb, nil), 202)
	m := expect(t, w.get("/v1/emails/"+s.str("id"), w.key), 200)
	if m.body["sandbox"] != true || m.str("status") != "sent" {
		t.Errorf("sandbox message: %s", m.raw)
	}
	tl := timeline(m)
	if len(tl) != 2 || tl[0] != "queued" || tl[1] != "sent" || m.body["events"].([]any)[1].(map[string]any)["providerResponse"] != "sandbox: not delivered" {
		t.Errorf("sandbox timeline: %s", m.raw)
	}

	// Scheduled: held until its time, then delivered; another scheduled one is cancelled.
	sc := base("Scheduled later")
	scheduledAt := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	sc["scheduledAt"] = scheduledAt.Format(time.RFC3339)
	later := expect(t, w.send(t, sc, nil), 202)
	if later.str("status") != "scheduled" {
		t.Errorf("scheduled answer: %s", later.raw)
	}
	cancelMe := base("Cancelled")
	cancelMe["scheduledAt"] = time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	c := expect(t, w.send(t, cancelMe, nil), 202)
	cr := expect(t, w.post("/v1/emails/"+c.str("id")+"/cancel", w.key, nil), 201)
	if cr.str("status") != "cancelled" || cr.str("id") != c.str("id") {
		t.Errorf("cancel answer: %s", cr.raw)
	}
	errorBody(t, w.post("/v1/emails/"+c.str("id")+"/cancel", w.key, nil), 409, "", "")
	errorBody(t, w.post("/v1/emails/"+first.str("id")+"/cancel", w.key, nil), 409, "", "")
	errorBody(t, w.post("/v1/emails/0190a0b0-0000-7000-8000-000000000000/cancel", w.key, nil), 404, "", "")
	lm := w.waitStatus(t, later.str("id"), "delivered", 30*time.Second)
	if tl := timeline(lm); tl[0] != "scheduled" {
		t.Errorf("scheduled timeline %v", tl)
	}
	// Its Date is when it was due to go out, not when it was accepted.
	held, err := mail.ReadMessage(bytes.NewReader(w.mx.waitFor(t, "Subject: Scheduled later", 5*time.Second).data))
	if err != nil {
		t.Fatal(err)
	}
	if date, err := held.Header.Date(); err != nil || !date.Equal(scheduledAt) {
		t.Errorf("scheduled mail Date %v (%v), want %v", date, err, scheduledAt)
	}
	if w.mx.count("Subject: Cancelled") != 0 {
		t.Error("a cancelled message was delivered")
	}

	// Batch: aligned results, one bad item does not abort the rest (an unknown domain, or an email that
	// breaks the schema of POST /v1/emails), Idempotency-Key ignored.
	items := []map[string]any{base("Batch 0"), {"from": "ada@unknown.example", "to": "y@rcpt.example", "subject": "x", "text": "x"}, base("Batch 2"),
		{"from": "ada@" + senderDomain, "to": "y@rcpt.example", "subject": "", "text": "x"}}
	br := expect(t, w.do(req{method: "POST", path: "/v1/emails/batch", token: w.key, body: map[string]any{"emails": items}, header: h}), 202)
	results, _ := br.body["results"].([]any)
	if len(results) != 4 {
		t.Fatalf("batch: %s", br.raw)
	}
	if msg, _ := results[3].(map[string]any)["error"].(string); !strings.HasPrefix(msg, "Validation failed (subject: ") {
		t.Errorf("batch item 3 (empty subject): %v", results[3])
	}
	for i, res := range results {
		m := res.(map[string]any)
		if m["index"] != float64(i) {
			t.Errorf("batch result %d has index %v", i, m["index"])
		}
	}
	if results[1].(map[string]any)["error"] != "domain unknown.example not found for this org" {
		t.Errorf("batch item 1: %v", results[1])
	}
	if results[0].(map[string]any)["id"] == first.str("id") {
		t.Error("batch honoured the Idempotency-Key")
	}
	w.waitStatus(t, results[2].(map[string]any)["id"].(string), "delivered", 30*time.Second)
	errorBody(t, w.do(req{method: "POST", path: "/v1/emails/batch", token: w.key, body: map[string]any{"emails": []any{}}}), 400, "", "Validation failed")

	// The session list pages newest first with a status filter.
	page := expect(t, w.get("/v1/emails?limit=2", w.owner.access), 200)
	data, _ := page.body["data"].([]any)
	if len(data) != 2 || page.str("nextCursor") == "" {
		t.Fatalf("first page: %s", page.raw)
	}
	seen := map[string]bool{}
	cursor := page.str("nextCursor")
	for _, d := range data {
		seen[d.(map[string]any)["id"].(string)] = true
	}
	for cursor != "" {
		p := expect(t, w.get("/v1/emails?limit=2&cursor="+cursor, w.owner.access), 200)
		for _, d := range p.body["data"].([]any) {
			id := d.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("message %s on two pages", id)
			}
			seen[id] = true
		}
		cursor = p.str("nextCursor")
	}
	if len(seen) < 6 {
		t.Errorf("paged through %d messages, want at least 6", len(seen))
	}
	cancelled := expect(t, w.get("/v1/emails?status=cancelled", w.owner.access), 200)
	if d, _ := cancelled.body["data"].([]any); len(d) != 1 {
		t.Errorf("status filter: %s", cancelled.raw)
	}
	errorBody(t, w.get("/v1/emails?limit=101", w.owner.access), 400, "", "")
	errorBody(t, w.get("/v1/emails", w.key), 401, "", "")
}

func TestBounceSuppressesAndRejections(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	w.mx.setReject("gone@rcpt.example")
	r := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "gone@rcpt.example", "subject": "Bounce me", "text": "x"}, nil), 202)
	m := w.waitStatus(t, r.str("id"), "bounced", 30*time.Second)
	if tl := timeline(m); !contains(tl, "bounced") {
		t.Errorf("bounce timeline %v", tl)
	}
	var resp string
	for _, ev := range m.body["events"].([]any) {
		if e := ev.(map[string]any); e["type"] == "bounced" {
			resp = fmt.Sprint(e["providerResponse"])
		}
	}
	if !strings.Contains(resp, "550") {
		t.Errorf("bounce providerResponse %q", resp)
	}
	// The address is now suppressed.
	// The message names the address as the caller wrote it; the match ignores case.
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": []string{"ok@rcpt.example", "GONE@rcpt.example"}, "subject": "x", "text": "x"}, nil),
		400, "", "recipient suppressed: GONE@rcpt.example")

	// Each rejection of SPEC §7.
	errorBody(t, w.send(t, map[string]any{"from": "ada@nowhere.example", "to": "a@rcpt.example", "subject": "x", "text": "x"}, nil),
		400, "", "domain nowhere.example not found for this org")
	expect(t, w.post("/v1/domains", w.owner.access, map[string]any{"domain": "pending.example"}), 201)
	errorBody(t, w.send(t, map[string]any{"from": "ada@pending.example", "to": "a@rcpt.example", "subject": "x", "text": "x"}, nil),
		400, "", "domain pending.example is not verified")
	eicar := base64.StdEncoding.EncodeToString([]byte(`X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`))
	before := w.count(t)
	r2 := w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x",
		"attachments": []map[string]any{{"filename": "eicar.com.txt", "contentType": "text/plain", "content": eicar}}}, nil)
	b := errorBody(t, r2, 400, "", "")
	if !strings.HasPrefix(fmt.Sprint(b["message"]), "attachment eicar.com.txt rejected: ") {
		t.Errorf("infected attachment: %s", r2.raw)
	}
	if w.count(t) != before {
		t.Error("a rejected send created a message")
	}
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "line\r\nbreak", "text": "x"}, nil),
		400, "", "Validation failed")

	// Paused organization: 403 org_suspended.
	root := w.MustSignup("root@admin.example", "")
	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/pause", root.access, nil), 200)
	time.Sleep(1100 * time.Millisecond) // a pause reaches the send path's organization cache within a second
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x"}, nil),
		403, "org_suspended", "organization sending is paused")
	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/resume", root.access, nil), 200)

	// Warm-up cap and monthly allowance (metered per recipient, checked atomically).
	used := w.usage(t)
	lim := func(monthly, warmup int64) {
		expect(t, w.do(req{method: "PUT", path: "/v1/admin/organizations/" + w.owner.orgID + "/limits", token: root.access,
			body: map[string]any{"monthlyLimit": monthly, "warmupCap": warmup}}), 200)
	}
	lim(0, used+1)
	time.Sleep(1100 * time.Millisecond) // organization settings are cached for up to a second on the send path
	expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x", "sandbox": true}, nil), 202)
	errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x", "sandbox": true}, nil),
		429, "warmup_cap_reached", "warm-up daily send cap reached")
	lim(used+1, 0)
	time.Sleep(1100 * time.Millisecond)
	pl := errorBody(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x"}, nil),
		402, "plan_limit_exceeded", "Plan limit reached for emails_sent")
	if pl["metric"] != "emails_sent" || pl["limit"] != float64(used+1) {
		t.Errorf("plan limit body: %v", pl)
	}
}

// count is how many messages the organization has (through the session list).
func (w *mailWorld) count(t *testing.T) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		p := expect(t, w.get("/v1/emails?limit=100&cursor="+cursor, w.owner.access), 200)
		n += len(p.body["data"].([]any))
		if cursor = p.str("nextCursor"); cursor == "" {
			return n
		}
	}
}

func (w *mailWorld) usage(t *testing.T) int64 {
	t.Helper()
	_, key := w.MustKey(w.owner, []string{"billing:read"})
	sub := expect(t, w.get("/v1/billing/subscription", key), 200)
	return int64(sub.body["usage"].(map[string]any)["emailsSent"].(float64))
}

func TestSendCrossOrganization(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	r := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "a@rcpt.example", "subject": "Mine", "text": "x",
		"scheduledAt": time.Now().UTC().Add(time.Hour).Format(time.RFC3339)}, nil), 202)
	other := w.MustSignup("thief@example.com", "")
	_, key := w.MustKey(other, []string{"*"})
	errorBody(t, w.get("/v1/emails/"+r.str("id"), key), 404, "", "")
	errorBody(t, w.post("/v1/emails/"+r.str("id")+"/cancel", key, nil), 404, "", "")
	if p := expect(t, w.get("/v1/emails", other.access), 200); len(p.body["data"].([]any)) != 0 {
		t.Errorf("B lists A's messages: %s", p.raw)
	}
	// B cannot send from A's verified domain.
	errorBody(t, w.do(req{method: "POST", path: "/v1/emails", token: key,
		body: map[string]any{"from": "x@" + senderDomain, "to": "a@rcpt.example", "subject": "x", "text": "x"}}), 400, "", "domain sender.example not found for this org")
	// A's scheduled message is untouched.
	if got := expect(t, w.get("/v1/emails/"+r.str("id"), w.key), 200).str("status"); got != "scheduled" {
		t.Errorf("A's message is %s", got)
	}
	// Scopes: a send-only key cannot read.
	_, sendOnly := w.MustKey(w.owner, nil)
	errorBody(t, w.get("/v1/emails/"+r.str("id"), sendOnly), 403, "insufficient_scope", "")
}

func TestDeferredThenDelivered(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	w.mx.setDefer("slow@rcpt.example", true)
	r := expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "slow@rcpt.example", "subject": "Retry me", "text": "x"}, nil), 202)
	w.waitStatus(t, r.str("id"), "delivery_delayed", 30*time.Second)
	w.mx.setDefer("slow@rcpt.example", false)
	m := w.waitStatus(t, r.str("id"), "delivered", 60*time.Second)
	tl := timeline(m)
	if !contains(tl, "delivery_delayed") || tl[len(tl)-1] != "delivered" {
		t.Errorf("retry timeline %v", tl)
	}
}
