package e2e

import (
	"net/netip"
	"testing"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/adapters/spamd/spamdtest"
	"github.com/postmill/postmill/ports"
)

// TestInboundSpamd: with POSTMILL_SPAM=spamd each received message is judged by SpamAssassin's spamd; spam
// is kept, marked spam and quarantined (its route's action is not carried out), ham is delivered.
func TestInboundSpamd(t *testing.T) {
	t.Parallel()
	addr := spamdtest.Start(t)
	dns := dnstest.New(t)
	dns.SetA(inboundMXHost, netip.MustParseAddr("127.0.0.1"))
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.InboundMXHost = inboundMXHost
	cfg.Inbound.Spam, cfg.Inbound.SpamdAddr = "spamd", addr
	w := &inboundWorld{env: MustStart(t, cfg, "all"), dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "spam-" + randomHex(t, 3) + ".acme.example"
	w.domID = expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": w.domain}), 201).str("id")
	dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store"}), 201)
	rcpt := "x@" + w.domain
	for _, tc := range []struct{ subject, spam, status string }{
		{"postmill-spam-test offer", "spam", "quarantined"},
		{"lunch", "ham", "delivered"},
	} {
		if _, derr := w.send(t, "s@sender.example", []string{rcpt}, inboundMessage(rcpt, tc.subject, "aGVsbG8K")); derr != nil {
			t.Fatal(derr)
		}
		d := w.waitReceived(t, rcpt, "Café "+tc.subject)
		if d.str("spamStatus") != tc.spam || d.str("status") != tc.status {
			t.Errorf("%s: spamStatus %q status %q", tc.subject, d.str("spamStatus"), d.str("status"))
		}
	}
}
