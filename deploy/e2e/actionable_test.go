package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// TestBlockedWebhookSaysWhy: a webhook to a private address is blocked, and the delivery says which
// address and which rule refused it and how an operator allows it, in the test answer and in GET
// /v1/webhook-events, whether the test route or the dispatcher made the attempt.
func TestBlockedWebhookSaysWhy(t *testing.T) {
	t.Parallel()
	w, rcv := MustWebhookWorld(t)
	const why = "10.0.0.5 is a private address (10.0.0.0/8, RFC 1918); an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5"

	literal, _ := w.mustEndpoint(t, "http://10.0.0.5:"+rcv.port()+"/hook", "email.queued")
	r := expect(t, w.post("/v1/webhooks/"+literal+"/test", w.key, nil), 201)
	if r.str("status") != "blocked" || r.body["responseCode"] != float64(0) || r.str("blockedReason") != why {
		t.Errorf("test delivery to a private literal: %s", r.raw)
	}
	named, _ := w.mustEndpoint(t, "http://internal.example:"+rcv.port()+"/hook", "email.delivered")
	r = expect(t, w.post("/v1/webhooks/"+named+"/test", w.key, nil), 201)
	if want := "internal.example resolves to 127.0.0.2, a loopback address (127.0.0.0/8, RFC 1122); " +
		"an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=127.0.0.2"; r.str("blockedReason") != want {
		t.Errorf("test delivery to a name of a loopback address: %s", r.raw)
	}

	// The dispatcher records the reason too: a send fans email.queued out to the private endpoint.
	expect(t, w.send(t, map[string]any{"from": "ada@" + senderDomain, "to": "x@rcpt.example", "subject": "hi", "text": "x", "sandbox": true}, nil), 202)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var dispatched map[string]any
		for _, item := range expect(t, w.get("/v1/webhook-events", w.key), 200).list {
			d := item.(map[string]any)
			if d["endpointId"] == literal && d["eventType"] == "email.queued" {
				dispatched = d
			}
		}
		if dispatched != nil && dispatched["status"] == "blocked" {
			if dispatched["blockedReason"] != why || dispatched["nextRetryAt"] != nil {
				t.Errorf("dispatched delivery: %v", dispatched)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the email.queued delivery to the private endpoint was never blocked: %v", dispatched)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(rcv.reqs); n != 0 {
		t.Errorf("the receiver got %d requests from blocked endpoints", n)
	}
}

// TestVerifySaysWhatIsWrong: every record names its DNS type; a verify answer says per record what DNS
// returned and what is wrong with it; and a send from the domain, once suspended, says how to get out.
func TestVerifySaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	dns := dnstest.New(t)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	e := MustStart(t, cfg, "all")
	a := e.MustSignup("verify@wrong.example", "")
	w := &mailWorld{env: e, dns: dns, owner: a}

	d := expect(t, e.post("/v1/domains", a.access, map[string]any{"domain": "wrong.example"}), 201)
	id := d.str("id")
	records, _ := d.body["records"].([]any)
	byType := map[string]map[string]any{}
	for _, r := range records {
		m := r.(map[string]any)
		byType[m["type"].(string)] = m
	}
	for typ, want := range map[string]string{"SPF": "TXT", "DKIM": "TXT", "DMARC": "TXT", "RETURN_PATH": "CNAME", "TRACKING": "CNAME"} {
		if got := byType[typ]["recordType"]; got != want {
			t.Errorf("%s recordType = %v, want %s", typ, got, want)
		}
	}

	// What a hurried owner publishes: an SPF record of another provider, the DKIM key cut at 255
	// characters, the bounce CNAME pointing elsewhere; DMARC and TRACKING not at all.
	dkim := byType["DKIM"]["value"].(string)
	dns.SetTXT("wrong.example", "v=spf1 include:_spf.google.com ~all")
	dns.SetTXT(byType["DKIM"]["host"].(string), dkim[:255])
	dns.SetCNAME("bounce.wrong.example", "bounces.elsewhere.example")
	v := expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	got := map[string]map[string]any{}
	for _, r := range v.body["records"].([]any) {
		m := r.(map[string]any)
		got[m["type"].(string)] = m
	}
	for typ, want := range map[string]struct {
		found   string // the first found value; "" means none
		problem string
	}{
		"SPF":         {"v=spf1 include:_spf.google.com ~all", "add include:spf.postmill.local to it"},
		"DKIM":        {dkim[:255], "cut short after 255 of " + strconv.Itoa(len(dkim)) + " characters"},
		"RETURN_PATH": {"bounces.elsewhere.example", `points to "bounces.elsewhere.example"; point it to bounces.postmill.local`},
		"DMARC":       {"", "no TXT record at _dmarc.wrong.example"},
		"TRACKING":    {"", "no CNAME record at track.wrong.example"},
	} {
		m := got[typ]
		found, _ := m["found"].([]any)
		if m["verified"] != false || !strings.Contains(str(m["problem"]), want.problem) {
			t.Errorf("%s: verified %v, problem %q; want it to contain %q", typ, m["verified"], m["problem"], want.problem)
		}
		if (want.found == "") != (len(found) == 0) || (want.found != "" && found[0] != want.found) {
			t.Errorf("%s: found %v, want %q", typ, m["found"], want.found)
		}
	}

	// Fixed, the records verify and say nothing more; a later GET shows no verify-only fields.
	w.publish(t, records)
	v = expect(t, e.post("/v1/domains/"+id+"/verify", a.access, nil), 201)
	if v.str("status") != "verified" {
		t.Fatalf("fixed records: %s", v.raw)
	}
	for _, r := range v.body["records"].([]any) {
		if m := r.(map[string]any); m["problem"] != nil || m["verified"] != true {
			t.Errorf("verified record %v: %v", m["type"], m)
		}
	}
	if g := expect(t, e.get("/v1/domains/"+id, a.access), 200); strings.Contains(string(g.raw), `"problem"`) ||
		strings.Contains(string(g.raw), `"found"`) || !strings.Contains(string(g.raw), `"recordType":"CNAME"`) {
		t.Errorf("get domain: %s", g.raw)
	}

	// Suspended, the domain refuses sends with SPEC §7's message and a hint naming the way out.
	expect(t, e.post("/v1/domains/"+id+"/suspend", a.access, nil), 201)
	_, key := e.MustKey(a, []string{"emails:send"})
	body := errorBody(t, e.post("/v1/emails", key, map[string]any{"from": "ada@wrong.example", "to": "x@rcpt.example", "subject": "s", "text": "t"}),
		400, "", "domain wrong.example is not verified")
	if h := str(body["hint"]); !strings.Contains(h, "suspended") || !strings.Contains(h, "/v1/domains/"+id+"/verify") {
		t.Errorf("hint of a suspended domain's refusal = %q", h)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
