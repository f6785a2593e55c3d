package e2e

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/clamd"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// inboundMalware is content only the test's own ClamAV signature database knows: it proves the verdict came
// from clamd, not from the builtin scanner.
const inboundMalware = "postmill inbound clamd test content: not a virus, but the signature below says it is\n"

// mustClamd starts a private clamd on a free loopback port whose database holds one hash signature,
// Postmill-Inbound-Test, for inboundMalware, and stops it when the test ends.
func mustClamd(t *testing.T) string {
	t.Helper()
	bin := "/usr/sbin/clamd"
	if _, err := os.Stat(bin); err != nil {
		missingEngine(t, "clamd is not installed (deploy/scripts/test-deps.sh installs clamav-daemon)")
	}
	dir := t.TempDir()
	for _, d := range []string{"db", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sum := md5.Sum([]byte(inboundMalware))
	sig := fmt.Sprintf("%s:%d:Postmill-Inbound-Test\n", hex.EncodeToString(sum[:]), len(inboundMalware))
	if err := os.WriteFile(filepath.Join(dir, "db", "inbound.hdb"), []byte(sig), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	conf := filepath.Join(dir, "clamd.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "Foreground yes\nTCPSocket %s\nTCPAddr 127.0.0.1\nDatabaseDirectory %s\nTemporaryDirectory %s\nLogFile %s\n",
		port, filepath.Join(dir, "db"), filepath.Join(dir, "tmp"), filepath.Join(dir, "clamd.log")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config-file="+conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	s, err := clamd.New(clamd.Config{Addr: addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Ping(context.Background()) != nil {
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(filepath.Join(dir, "clamd.log"))
			t.Fatalf("clamd did not answer within 30s:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr
}

// TestInboundClamdScan: with POSTMILL_SCANNER=clamd every received attachment goes through clamd; one its
// database flags is kept, named by its signature and never downloadable, and the message is quarantined.
func TestInboundClamdScan(t *testing.T) {
	t.Parallel()
	addr := mustClamd(t)
	dns := dnstest.New(t)
	dns.SetA(inboundMXHost, netip.MustParseAddr("127.0.0.1"))
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.InboundMXHost = inboundMXHost
	cfg.Scanner = "clamd"
	cfg.ClamdAddr = addr
	w := &inboundWorld{env: MustStart(t, cfg, "all"), dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "av-" + randomHex(t, 3) + ".acme.example"
	w.domID = expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": w.domain}), 201).str("id")
	dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all", "action": "store"}), 201)

	rcpt := "av@" + w.domain
	for _, tc := range []struct{ subject, content, scan, status string }{
		{"clean", "harmless attachment\n", "clean", "delivered"},
		{"flagged", inboundMalware, "infected", "quarantined"},
	} {
		if _, derr := w.send(t, "s@sender.example", []string{rcpt}, inboundMessage(rcpt, tc.subject, base64.StdEncoding.EncodeToString([]byte(tc.content)))); derr != nil {
			t.Fatal(derr)
		}
		d := w.waitReceived(t, rcpt, "Café "+tc.subject)
		att := d.body["attachments"].([]any)[0].(map[string]any)
		if d.str("scanStatus") != tc.scan || d.str("status") != tc.status || att["scanStatus"] != tc.scan {
			t.Fatalf("%s: %s", tc.subject, d.raw)
		}
		dl := w.get("/v1/received-emails/"+d.str("id")+"/attachments/"+att["id"].(string), w.key)
		switch tc.scan {
		case "clean":
			if expect(t, dl, 200); string(dl.raw) != tc.content {
				t.Errorf("clean download = %q", dl.raw)
			}
		default:
			if sig, _ := att["scanSignature"].(string); !strings.Contains(sig, "Postmill-Inbound-Test") {
				t.Errorf("signature %q does not come from the test's database", sig)
			}
			errorBody(t, dl, 403, "", "")
		}
	}
}
