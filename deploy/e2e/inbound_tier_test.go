package e2e

import (
	"net/netip"
	"testing"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

// TestInboundSplitTiers: with the core, the edge and the inbound tier in three processes, the edge manages
// inbound domains and reads received mail over Connect (InboundService) and the MX listener accepts and
// hands over mail over Connect (ReceiveService), each tier with its own credential.
func TestInboundSplitTiers(t *testing.T) {
	t.Parallel()
	dns := dnstest.New(t)
	dns.SetA(inboundMXHost, netip.MustParseAddr("127.0.0.1"))
	coreCfg := testConfig(t, pgtest.URL(t))
	coreCfg.DNSResolver = dns.Addr()
	coreCfg.InboundMXHost = inboundMXHost
	core := MustStart(t, coreCfg, "core")
	cred := func(tier string) []string {
		c, err := app.TierCredential(coreCfg.SecretKeys, tier)
		if err != nil {
			t.Fatal(err)
		}
		return []string{c}
	}
	edgeCfg := testConfig(t, "")
	edgeCfg.SecretKeys, edgeCfg.RPCCredentials, edgeCfg.CoreURL = nil, cred("edge"), core.app.RPCURL()
	edge := MustStart(t, edgeCfg, "edge")
	inCfg := testConfig(t, "")
	inCfg.SecretKeys, inCfg.RPCCredentials, inCfg.CoreURL = nil, cred("inbound"), core.app.RPCURL()
	inCfg.InboundMXHost = inboundMXHost
	mx := MustStart(t, inCfg, "inbound")

	w := &inboundWorld{env: edge, dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "split-" + randomHex(t, 3) + ".acme.example"
	w.domID = expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": w.domain}), 201).str("id")
	dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	if v := expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201); v.str("status") != "verified" {
		t.Fatalf("verify: %s", v.raw)
	}
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store"}), 201)

	// The MX listener of the inbound process.
	sender := &inboundWorld{env: mx, dns: dns}
	errs, _ := sender.send(t, "s@sender.example", []string{"x@unknown.example"}, "")
	if smtpCode(errs[0]) != 550 {
		t.Fatalf("RCPT at an unknown domain over Connect: %v", errs[0])
	}
	rcpt := "split@" + w.domain
	if _, derr := sender.send(t, "s@sender.example", []string{rcpt}, inboundMessage(rcpt, "split", "aGVsbG8K")); derr != nil {
		t.Fatal(derr)
	}
	d := w.waitReceived(t, rcpt, "Café split")
	att := d.body["attachments"].([]any)[0].(map[string]any)
	if att["downloadable"] != true {
		t.Fatalf("attachment over Connect: %v", att)
	}
	if dl := expect(t, w.get("/v1/received-emails/"+d.str("id")+"/attachments/"+att["id"].(string), w.key), 200); string(dl.raw) != "hello\n" {
		t.Errorf("download over Connect = %q", dl.raw)
	}
	if r := expect(t, w.get("/v1/inbound/routes/resolve?address="+rcpt, w.owner.access), 200); r.body["route"] == nil {
		t.Errorf("resolve over Connect: %s", r.raw)
	}
}
