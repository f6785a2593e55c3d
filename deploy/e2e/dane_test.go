package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/mta/tlspolicy/tlspolicytest"
)

// TestDANEThroughTheBinaryAndAValidatingResolver runs DANE (RFC 7672) end to end: the postmill binary, its
// HTTP API and its MTA resolving MX, addresses and TLSA records through Unbound validating a zone signed
// with ldns-signzone and served by NSD (dnstest.NewValidating). Three domains of the zone each have one MX
// host on 127.0.0.1, where the test's SMTP server offers STARTTLS with a self-signed certificate:
//   - good: a TLSA record (3 1 1) of the server's key → delivered, the timeline and GET /v1/emails/{id}
//     saying "(tls: dane)", and postmill_mta_tls_total{mode="dane"} counting it;
//   - wrong: a TLSA record of another key → delivery_delayed with tlsa-invalid, nothing received;
//   - bogus: the right TLSA record with a corrupted signature → Unbound answers SERVFAIL →
//     delivery_delayed with "TLSA lookup … failed", nothing received.
//
// The sending domain is verified first by a run of the binary resolving through an in-process DNS server
// holding its records (Unbound answers for the signed zone alone); the binary then runs again on the same
// database, data directory and secret with POSTMILL_DNS_RESOLVER pointing at Unbound.
func TestDANEThroughTheBinaryAndAValidatingResolver(t *testing.T) {
	t.Parallel()
	cert := tlspolicytest.SelfSigned(t, "some.name.test")
	other := tlspolicytest.SelfSigned(t, "some.name.test")
	records, corrupt := tlspolicytest.DANEZone(cert.Leaf, other.Leaf)
	v := dnstest.NewValidating(t, "signed.test", records, corrupt)
	mx := mustTLSSink(t, tlspolicytest.ServerTLS(cert))

	// First run: sign up, verify the sending domain against records the test publishes, make a key.
	plain := dnstest.New(t)
	vars := baseEnv(t, pgtest.URL(t))
	vars["POSTMILL_DNS_RESOLVER"] = plain.Addr()
	vars["POSTMILL_MTA_PORT"] = mx.port()
	vars["POSTMILL_MTA_ALLOW_NETS"] = "127.0.0.1/32"
	vars["POSTMILL_MTA_RETRY_BASE"] = "300ms"
	first := MustServe(t, "all", vars)
	w := &mailWorld{env: &env{t: t, base: "http://" + first.addrs["edge-http"], http: &http.Client{Timeout: 30 * time.Second}}, dns: plain}
	w.owner = w.MustSignup("owner@"+senderDomain, "")
	w.mustVerifiedDomain(t, senderDomain)
	_, w.key = w.MustKey(w.owner, []string{"emails:send", "emails:read"})
	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-first.done:
		first.done <- err // for the cleanup's wait
	case <-time.After(30 * time.Second):
		t.Fatalf("the first run did not stop\n%s", first.logText())
	}

	// Second run: every lookup of the platform goes to Unbound.
	vars["POSTMILL_DNS_RESOLVER"] = v.Resolver
	second := MustServe(t, "all", vars)
	w.env = &env{t: t, base: "http://" + second.addrs["edge-http"], http: &http.Client{Timeout: 30 * time.Second}}
	defer func() {
		if t.Failed() {
			t.Logf("postmill log:\n%s", second.logText())
		}
	}()

	send := func(domain string) string {
		r := expect(t, w.send(t, map[string]any{
			"from": "Ada <ada@" + senderDomain + ">", "to": "rcpt@" + domain, "subject": "DANE to " + domain, "text": "hello",
		}, nil), 202)
		return r.str("id")
	}
	good, wrong, bogus := send("good.signed.test"), send("wrong.signed.test"), send("bogus.signed.test")

	m := w.waitStatus(t, good, "delivered", 60*time.Second)
	got, _ := eventResponse(m, "delivered")
	t.Logf("good.signed.test: delivered, %q", got)
	if !strings.HasPrefix(got, "250") || !strings.HasSuffix(got, "(tls: dane)") {
		t.Errorf("delivered providerResponse %q: want the server's 250 ending with (tls: dane)", got)
	}
	mail := mx.waitFor(t, "Subject: DANE to good.signed.test", 5*time.Second)
	if !mail.tls || len(mail.to) != 1 || mail.to[0] != "rcpt@good.signed.test" {
		t.Errorf("received for %v, under TLS %v; want rcpt@good.signed.test under TLS", mail.to, mail.tls)
	}

	for _, c := range []struct{ id, domain, response string }{
		{wrong, "wrong.signed.test", "tlsa-invalid"},
		{bogus, "bogus.signed.test", "TLSA lookup of _25._tcp.mx.bogus.signed.test failed"},
	} {
		m := w.waitStatus(t, c.id, "delivery_delayed", 60*time.Second)
		got, _ := eventResponse(m, "delivery_delayed")
		t.Logf("%s: delivery_delayed, %q", c.domain, got)
		if !strings.Contains(got, c.response) {
			t.Errorf("%s: delivery_delayed providerResponse %q does not contain %q", c.domain, got, c.response)
		}
	}
	// The deferred messages are retried every few hundred milliseconds: let a few retries go by, then
	// nothing but the good domain's mail may have arrived, and the deferred ones are still not delivered.
	time.Sleep(2 * time.Second)
	if got := mx.recipients(); len(got) != 1 || got[0] != "rcpt@good.signed.test" {
		t.Errorf("the SMTP server received mail for %v; want rcpt@good.signed.test alone", got)
	}
	for _, id := range []string{wrong, bogus} {
		if st := expect(t, w.get("/v1/emails/"+id, w.key), 200).str("status"); st != "delivery_delayed" {
			t.Errorf("message %s is %q after retries, want delivery_delayed", id, st)
		}
	}

	// The MTA counts the one transaction, under DANE, and none under any other TLS.
	metrics := string(expect(t, w.getURL(t, "http://"+second.addrs["metrics"]+"/metrics"), 200).raw)
	modes := regexp.MustCompile(`(?m)^postmill_mta_tls_total\{mode="([a-z]+)"\} (\S+)$`).FindAllStringSubmatch(metrics, -1)
	byMode := map[string]string{}
	for _, m := range modes {
		byMode[m[1]] = m[2]
	}
	if len(byMode) != 1 || byMode["dane"] != "1" {
		t.Errorf("postmill_mta_tls_total by mode %v; want dane 1 alone", byMode)
	}
}

// tlsSink is an SMTP server on 127.0.0.1 offering STARTTLS, recording whether each mail came under TLS.
type tlsSink struct {
	addr  string
	mu    sync.Mutex
	mails []tlsMail
}

type tlsMail struct {
	to   []string
	tls  bool
	data []byte
}

// mustTLSSink starts a tlsSink offering STARTTLS with cfg, stopped when the test ends.
func mustTLSSink(tb testing.TB, cfg *tls.Config) *tlsSink {
	tb.Helper()
	s := &tlsSink{}
	srv := smtp.NewServer(tlsSinkBackend{s})
	srv.Domain = "sink.test"
	srv.TLSConfig = cfg
	srv.ReadTimeout, srv.WriteTimeout = 30*time.Second, 30*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0) // the MTA hanging up after a failed DANE check is expected
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("sink listen: %v", err)
	}
	s.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *tlsSink) port() string {
	_, p, _ := net.SplitHostPort(s.addr)
	return p
}

// waitFor returns the first mail whose data contains needle, polling until timeout.
func (s *tlsSink) waitFor(tb testing.TB, needle string, timeout time.Duration) tlsMail {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		for _, m := range s.mails {
			if strings.Contains(string(m.data), needle) {
				s.mu.Unlock()
				return m
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			tb.Fatalf("no mail containing %q arrived", needle)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recipients lists the recipients of every mail received, in order.
func (s *tlsSink) recipients() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.mails {
		out = append(out, m.to...)
	}
	return out
}

type tlsSinkBackend struct{ s *tlsSink }

func (b tlsSinkBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &tlsSinkSession{s: b.s, conn: c}, nil
}

type tlsSinkSession struct {
	s    *tlsSink
	conn *smtp.Conn
	to   []string
}

func (ss *tlsSinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (ss *tlsSinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}
func (ss *tlsSinkSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading the message: %w", err)
	}
	_, underTLS := ss.conn.TLSConnectionState()
	ss.s.mu.Lock()
	ss.s.mails = append(ss.s.mails, tlsMail{to: ss.to, tls: underTLS, data: data})
	ss.s.mu.Unlock()
	return nil
}
func (ss *tlsSinkSession) Reset()        { ss.to = nil }
func (ss *tlsSinkSession) Logout() error { return nil }
