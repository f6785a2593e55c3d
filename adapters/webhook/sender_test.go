package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/webhook"
	"github.com/postmill/postmill/ports"
)

var (
	loopback1 = netip.MustParseAddr("127.0.0.1") // allow-listed in every test
	loopback2 = netip.MustParseAddr("127.0.0.2") // forbidden: the rest of 127/8 stays loopback
	loopback3 = netip.MustParseAddr("127.0.0.3") // allow-listed only where a test says so
	testNet   = netip.MustParseAddr("192.0.2.1") // public (RFC 5737); never connected to
)

type testBundle struct {
	dns    *dnstest.Server
	sender *webhook.Sender
	ctx    context.Context
}

// setup starts a DNS server and a Sender that asks it, with 127.0.0.1/32 allow-listed (or allow).
func setup(tb testing.TB, cfg webhook.Config) *testBundle {
	tb.Helper()
	srv := dnstest.New(tb)
	if cfg.AllowNets == nil {
		cfg.AllowNets = []netip.Prefix{netip.PrefixFrom(loopback1, 32)}
	}
	return &testBundle{dns: srv, sender: mustSender(tb, cfg, srv.Addr()), ctx: context.Background()}
}

func mustSender(tb testing.TB, cfg webhook.Config, dnsAddr string) *webhook.Sender {
	tb.Helper()
	s, err := webhook.New(cfg, dns.New(dnsAddr, dns.Options{Timeout: 2 * time.Second}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.CloseIdleConnections)
	return s
}

// listenSamePort binds one TCP port on every address given, so that a URL's port reaches whichever
// address the guard picks, and the test can watch each of them.
func listenSamePort(tb testing.TB, addrs ...netip.Addr) (int, []*net.TCPListener) {
	tb.Helper()
	for range 50 {
		first, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addrs[0], 0)))
		if err != nil {
			tb.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		lns := []*net.TCPListener{first}
		for _, a := range addrs[1:] {
			ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(port))))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(addrs) {
			for _, ln := range lns {
				tb.Cleanup(func() { _ = ln.Close() })
			}
			return port, lns
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
	}
	tb.Fatalf("no port free on all of %v", addrs)
	return 0, nil
}

// assertNoConn fails if anything connected to ln. A connection the sender made has completed its handshake
// before Send returned, so it is already waiting in the accept queue: the check needs no sleeping.
func assertNoConn(tb testing.TB, ln *net.TCPListener) {
	tb.Helper()
	_ = ln.SetDeadline(time.Now().Add(50 * time.Millisecond))
	c, err := ln.Accept()
	_ = ln.SetDeadline(time.Time{}) // a receiver may serve on ln later
	if err == nil {
		tb.Errorf("%s received a connection from %s", ln.Addr(), c.RemoteAddr())
		_ = c.Close()
		return
	}
	if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
		tb.Errorf("accept on %s: %v", ln.Addr(), err)
	}
}

// received is what a receiver saw of one request.
type received struct {
	method, uri, host, sni string
	proto                  int
	header                 http.Header
	body                   []byte
}

// receiver is an HTTP server on a given listener that records requests and counts connections.
type receiver struct {
	srv   *httptest.Server
	conns atomic.Int32
	mu    sync.Mutex
	reqs  []received
}

// newReceiver serves on ln, answering with respond (204 when nil) after recording the request.
func newReceiver(tb testing.TB, ln net.Listener, respond http.HandlerFunc) *receiver {
	tb.Helper()
	r := &receiver{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		got := received{method: req.Method, uri: req.RequestURI, host: req.Host, proto: req.ProtoMajor,
			header: req.Header.Clone(), body: body}
		if req.TLS != nil {
			got.sni = req.TLS.ServerName
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, got)
		r.mu.Unlock()
		if respond != nil {
			respond(w, req)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused TLS handshakes are expected
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	_ = r.srv.Listener.Close()
	r.srv.Listener = ln
	return r
}

func (r *receiver) start(tb testing.TB) *receiver {
	r.srv.Start()
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

func hookURL(host string, port int, path string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
}

func mustStatus(tb testing.TB, resp ports.WebhookResponse, err error, want int) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("Send: %v", err)
	}
	if resp.Blocked || resp.StatusCode != want {
		tb.Fatalf("Send = %+v; want status %d", resp, want)
	}
}

func mustBlocked(tb testing.TB, resp ports.WebhookResponse, err error, reason string) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("Send error %v; want a blocked response", err)
	}
	if !resp.Blocked || resp.StatusCode != 0 || !strings.Contains(resp.Reason, reason) {
		tb.Fatalf("Send = %+v; want blocked with a reason containing %q", resp, reason)
	}
}

func TestSendDeliversThroughName(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{})
	port, lns := listenSamePort(t, loopback1)
	rcv := newReceiver(t, lns[0], nil).start(t)
	b.dns.SetA("hooks.example.test", loopback1)

	body := []byte(`{"id":"5f0c","type":"email.delivered","data":{"message_id":null}}`)
	headers := map[string]string{
		"content-type":        "application/json",
		"user-agent":          "Service-Webhooks/1",
		"x-service-event":     "email.delivered",
		"x-service-event-id":  "5f0c",
		"x-service-delivery":  "d-1",
		"x-service-signature": "t=1700000000,v1=abcdef",
	}
	resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{
		URL: hookURL("hooks.example.test", port, "/in/hook?src=postmill"), Headers: headers, Body: body})
	mustStatus(t, resp, err, http.StatusNoContent)

	reqs := rcv.requests()
	if len(reqs) != 1 {
		t.Fatalf("receiver got %d requests; want 1", len(reqs))
	}
	got := reqs[0]
	if got.method != http.MethodPost || got.uri != "/in/hook?src=postmill" {
		t.Errorf("request line %s %s; want POST /in/hook?src=postmill", got.method, got.uri)
	}
	if want := "hooks.example.test:" + strconv.Itoa(port); got.host != want {
		t.Errorf("Host = %q; want %q (the URL's name, not the address)", got.host, want)
	}
	for k, v := range headers {
		if g := got.header.Get(k); g != v {
			t.Errorf("header %s = %q; want %q", k, g, v)
		}
	}
	if string(got.body) != string(body) {
		t.Errorf("body = %q; want %q", got.body, body)
	}

	// Any status is returned as is, for the dispatcher to judge.
	port2, lns2 := listenSamePort(t, loopback1)
	newReceiver(t, lns2[0], func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20))) // more than is drained
	}).start(t)
	resp, err = b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL("hooks.example.test", port2, "/")})
	mustStatus(t, resp, err, http.StatusInternalServerError)
}

func TestSendBlocksForbiddenAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{})
	// Both loopback addresses listen on the URL's port, so a connection anywhere would be seen.
	port, lns := listenSamePort(t, loopback1, loopback2)
	allowed, forbidden := lns[0], lns[1]

	b.dns.SetA("private.example.test", loopback2)
	b.dns.SetA("mixed.example.test", loopback1, loopback2)
	b.dns.SetA("public-and-private.example.test", testNet, loopback2)
	b.dns.SetA("metadata.example.test", netip.MustParseAddr("169.254.169.254"))
	b.dns.SetA("v6.example.test", netip.MustParseAddr("::1"))
	b.dns.SetA("ula.example.test", loopback1, netip.MustParseAddr("fd12::1"))
	b.dns.SetTXT("txt-only.example.test", "no addresses here")

	tests := []struct {
		host, reason string
	}{
		{"private.example.test", "loopback"},
		{"mixed.example.test", "127.0.0.2"}, // one allowed answer does not excuse a forbidden one
		{"public-and-private.example.test", "127.0.0.2"},
		{"metadata.example.test", "link-local"},
		{"v6.example.test", "loopback"},
		{"ula.example.test", "unique local"},
		{"missing.example.test", "no address"},  // NXDOMAIN
		{"txt-only.example.test", "no address"}, // NODATA
	}
	for _, tt := range tests {
		resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL(tt.host, port, "/"), Body: []byte("{}")})
		mustBlocked(t, resp, err, tt.reason)
	}
	assertNoConn(t, allowed)
	assertNoConn(t, forbidden)
}

func TestSendBlocksURLs(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{})
	port, lns := listenSamePort(t, loopback1, loopback2)
	b.dns.SetA("hooks.example.test", loopback1)
	b.dns.SetA("private.example.test", loopback2)
	p := strconv.Itoa(port)

	tests := []struct {
		url, reason string
	}{
		{"ftp://hooks.example.test:" + p + "/", "scheme"},
		{"file:///etc/passwd", "scheme"},
		{"gopher://hooks.example.test:" + p + "/", "scheme"},
		{"hooks.example.test:" + p, "scheme"},
		{"//hooks.example.test:" + p + "/", "scheme"},
		{"http:///no-host", "no host"},
		{"http://hooks.example.test:99999/", "port"},
		{"http://hooks.example.test:0/", "port"},
		{"http://%zz/", "invalid URL"},
		// IP literals are checked directly, in every spelling.
		{"http://127.0.0.2:" + p + "/", "loopback"},
		{"http://[::ffff:127.0.0.2]:" + p + "/", "IPv4-mapped"},
		{"http://[::ffff:7f00:2]:" + p + "/", "IPv4-mapped"},
		{"http://[::1]:" + p + "/", "loopback"},
		{"http://0.0.0.0:" + p + "/", "this network"},
		{"http://[::]:" + p + "/", "unspecified"},
		{"http://[64:ff9b::7f00:2]:" + p + "/", "NAT64"},
		{"http://[fe80::1%25lo]:" + p + "/", "link-local"},
		// The host is what follows the userinfo, whatever the userinfo looks like.
		{"http://127.0.0.1:" + p + "@private.example.test:" + p + "/", "loopback"},
		// Shorthand IPv4 forms are not addresses to the guard; they go to DNS, which knows no such name.
		{"http://127.2:" + p + "/", "no address"},
		{"http://0x7f000002:" + p + "/", "no address"},
		{"http://2130706434:" + p + "/", "no address"},
	}
	for _, tt := range tests {
		resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: tt.url})
		if err != nil || !resp.Blocked || !strings.Contains(resp.Reason, tt.reason) {
			t.Errorf("Send(%s) = %+v, %v; want blocked for %q", tt.url, resp, err, tt.reason)
		}
	}
	assertNoConn(t, lns[0])
	assertNoConn(t, lns[1])

	// The allow-listed literal goes straight through, upper-case scheme too.
	newReceiver(t, lns[0], nil).start(t)
	resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: "HTTP://127.0.0.1:" + p + "/"})
	mustStatus(t, resp, err, http.StatusNoContent)
}

func TestSendTemporaryDNSFailureIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{})
	b.dns.SetServFail("flaky.example.test")
	resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: "http://flaky.example.test/"})
	if err == nil || resp.Blocked {
		t.Fatalf("Send = %+v, %v; want an error (retried later), not a block", resp, err)
	}
	if de, ok := errors.AsType[*ports.DNSError](err); !ok || de.Kind != ports.DNSTemporary {
		t.Fatalf("error %v does not carry the temporary DNS failure", err)
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{})
	port, lns := listenSamePort(t, loopback1)
	// The target is allow-listed: only the no-redirect rule keeps the sender away from it.
	targetPort, targets := listenSamePort(t, loopback1)
	rcv := newReceiver(t, lns[0], func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, hookURL("127.0.0.1", targetPort, "/elsewhere"), http.StatusFound)
	}).start(t)
	b.dns.SetA("hooks.example.test", loopback1)

	for _, code := range []int{http.StatusFound} {
		resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL("hooks.example.test", port, "/")})
		mustStatus(t, resp, err, code)
	}
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("receiver got %d requests; want 1", n)
	}
	assertNoConn(t, targets[0])
}

func TestSendTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{Timeout: 200 * time.Millisecond})
	port, lns := listenSamePort(t, loopback1)
	newReceiver(t, lns[0], func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		w.WriteHeader(http.StatusOK)
	}).start(t)
	b.dns.SetA("slow.example.test", loopback1)

	start := time.Now()
	resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL("slow.example.test", port, "/")})
	if err == nil || resp.Blocked || resp.StatusCode != 0 {
		t.Fatalf("Send = %+v, %v; want a timeout error", resp, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v is not a deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Send took %s with a 200ms timeout", d)
	}
}

// TestSendTLSKeepsName proves SNI and certificate verification use the URL's name while the connection goes
// to the checked address, over HTTP/2 as well.
func TestSendTLSKeepsName(t *testing.T) {
	t.Parallel()
	port, lns := listenSamePort(t, loopback1)
	rcv := newReceiver(t, lns[0], nil)
	rcv.srv.EnableHTTP2 = true
	rcv.srv.StartTLS()
	t.Cleanup(rcv.srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(rcv.srv.Certificate()) // valid for example.com and *.example.com

	b := setup(t, webhook.Config{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "ignored.example.com"}})
	b.dns.SetA("hooks.example.com", loopback1)
	b.dns.SetA("hooks.example.test", loopback1)

	url := "https://hooks.example.com:" + strconv.Itoa(port) + "/tls"
	resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: url, Body: []byte("{}")})
	mustStatus(t, resp, err, http.StatusNoContent)
	got := rcv.requests()[0]
	if got.sni != "hooks.example.com" || got.host != "hooks.example.com:"+strconv.Itoa(port) {
		t.Errorf("SNI %q, Host %q; want the URL's name", got.sni, got.host)
	}
	if got.proto != 2 {
		t.Errorf("protocol HTTP/%d; want HTTP/2", got.proto)
	}

	// The same address under a name the certificate does not cover fails verification.
	resp, err = b.sender.Send(b.ctx, ports.WebhookRequest{URL: "https://hooks.example.test:" + strconv.Itoa(port) + "/"})
	if err == nil || resp.Blocked {
		t.Fatalf("Send to a name outside the certificate = %+v, %v; want a TLS error", resp, err)
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Errorf("error %v is not a certificate verification failure", err)
	}
}

func TestSendTriesEachCheckedAddress(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{AllowNets: []netip.Prefix{netip.PrefixFrom(loopback1, 32), netip.PrefixFrom(loopback3, 32)}})
	port, lns := listenSamePort(t, loopback1, loopback3)
	_ = lns[1].Close() // nothing listens on 127.0.0.3: connection refused
	rcv := newReceiver(t, lns[0], nil).start(t)
	b.dns.SetA("two.example.test", loopback3, loopback1)

	resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL("two.example.test", port, "/")})
	mustStatus(t, resp, err, http.StatusNoContent)
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("receiver got %d requests; want 1", n)
	}

	// When no address answers, the attempt fails with an error naming each.
	b.dns.SetA("none.example.test", loopback3)
	resp, err = b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL("none.example.test", port, "/")})
	if err == nil || resp.Blocked || !strings.Contains(err.Error(), "127.0.0.3") {
		t.Fatalf("Send to a closed port = %+v, %v; want a connection error", resp, err)
	}
}

// TestSendConnectionsFollowTheCheckedAddress: an idle connection kept from an earlier attempt is only reused
// when this attempt's lookup returned its address, and never across host names.
func TestSendConnectionsFollowTheCheckedAddress(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{AllowNets: []netip.Prefix{netip.PrefixFrom(loopback1, 32), netip.PrefixFrom(loopback3, 32)}})
	port, lns := listenSamePort(t, loopback1, loopback3)
	one := newReceiver(t, lns[0], nil).start(t)
	three := newReceiver(t, lns[1], nil).start(t)
	send := func(host string) {
		t.Helper()
		resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: hookURL(host, port, "/")})
		mustStatus(t, resp, err, http.StatusNoContent)
	}

	b.dns.SetA("moving.example.test", loopback1)
	send("moving.example.test")
	b.dns.SetA("moving.example.test", loopback3)
	send("moving.example.test") // must not ride the kept-alive connection to 127.0.0.1
	if n1, n3 := len(one.requests()), len(three.requests()); n1 != 1 || n3 != 1 {
		t.Fatalf("requests at 127.0.0.1: %d, at 127.0.0.3: %d; want 1 and 1", n1, n3)
	}
	b.dns.SetA("moving.example.test", loopback1)
	send("moving.example.test")
	if n := one.conns.Load(); n != 1 {
		t.Errorf("127.0.0.1 saw %d connections; want 1 (reused while its address was checked)", n)
	}

	b.dns.SetA("other.example.test", loopback1)
	send("other.example.test")
	if n := one.conns.Load(); n != 2 {
		t.Errorf("127.0.0.1 saw %d connections; want 2 (another name gets its own)", n)
	}
}

// rebinder is a DNS server whose answers for one name change from lookup to lookup, as an attacker's
// would: the n-th A query gets answers[n] (the last one from then on). It counts A queries.
type rebinder struct {
	name    string
	answers []netip.Addr
	queries atomic.Int32
	addr    string
}

func newRebinder(tb testing.TB, name string, answers ...netip.Addr) *rebinder {
	tb.Helper()
	r := &rebinder{name: mdns.Fqdn(name), answers: answers}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r.addr = pc.LocalAddr().String()
	srv := &mdns.Server{PacketConn: pc, Handler: mdns.HandlerFunc(r.serve)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return r
}

func (r *rebinder) serve(w mdns.ResponseWriter, req *mdns.Msg) {
	m := new(mdns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	q := req.Question[0]
	switch {
	case !strings.EqualFold(q.Name, r.name):
		m.Rcode = mdns.RcodeNameError
	case q.Qtype == mdns.TypeA:
		n := int(r.queries.Add(1)) - 1
		a := r.answers[min(n, len(r.answers)-1)].As4()
		m.Answer = []mdns.RR{&mdns.A{
			Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 0}, A: net.IP(a[:])}}
	}
	_ = w.WriteMsg(m)
}

// TestSendDNSRebinding: the name answers an allowed address, then a forbidden one. The attempt connects to
// the address it checked, with one lookup, so the second answer never gets a connection.
func TestSendDNSRebinding(t *testing.T) {
	t.Parallel()
	port, lns := listenSamePort(t, loopback1, loopback2)
	rcv := newReceiver(t, lns[0], nil).start(t)
	dnsSrv := newRebinder(t, "rebind.example.test", loopback1, loopback2)
	s := mustSender(t, webhook.Config{AllowNets: []netip.Prefix{netip.PrefixFrom(loopback1, 32)}}, dnsSrv.addr)
	url := hookURL("rebind.example.test", port, "/")

	resp, err := s.Send(context.Background(), ports.WebhookRequest{URL: url, Body: []byte("{}")})
	mustStatus(t, resp, err, http.StatusNoContent)
	if n := dnsSrv.queries.Load(); n != 1 {
		t.Fatalf("%d A lookups for one Send; want exactly 1", n)
	}
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("allowed receiver got %d requests; want 1", n)
	}
	assertNoConn(t, lns[1])

	// The next attempt looks up again, sees the forbidden answer and stops, although a connection to the
	// previously checked address is idle in the pool.
	resp, err = s.Send(context.Background(), ports.WebhookRequest{URL: url, Body: []byte("{}")})
	mustBlocked(t, resp, err, "127.0.0.2")
	if n := dnsSrv.queries.Load(); n != 2 {
		t.Fatalf("%d A lookups after two Sends; want 2", n)
	}
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("allowed receiver got %d requests after the blocked attempt; want 1", n)
	}
	assertNoConn(t, lns[1])
}

// TestSendDNSRebindingForbiddenFirst: the first answer is forbidden, a second lookup would be allowed. The
// attempt is blocked on what it saw and connects nowhere.
func TestSendDNSRebindingForbiddenFirst(t *testing.T) {
	t.Parallel()
	port, lns := listenSamePort(t, loopback1, loopback2)
	dnsSrv := newRebinder(t, "rebind.example.test", loopback2, loopback1)
	s := mustSender(t, webhook.Config{AllowNets: []netip.Prefix{netip.PrefixFrom(loopback1, 32)}}, dnsSrv.addr)
	url := hookURL("rebind.example.test", port, "/")

	resp, err := s.Send(context.Background(), ports.WebhookRequest{URL: url})
	mustBlocked(t, resp, err, "loopback")
	if n := dnsSrv.queries.Load(); n != 1 {
		t.Fatalf("%d A lookups for one Send; want exactly 1", n)
	}
	assertNoConn(t, lns[0])
	assertNoConn(t, lns[1])

	// The second lookup's answer is allowed: the next attempt goes through, to 127.0.0.1 only.
	rcv := newReceiver(t, lns[0], nil).start(t)
	resp, err = s.Send(context.Background(), ports.WebhookRequest{URL: url})
	mustStatus(t, resp, err, http.StatusNoContent)
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("receiver got %d requests; want 1", n)
	}
	assertNoConn(t, lns[1])
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	res := dns.New("127.0.0.1:1", dns.Options{})
	for _, cfg := range []webhook.Config{
		{Timeout: -time.Second},
		{MaxIdleConnsPerHost: -1},
		{AllowNets: []netip.Prefix{{}}},
	} {
		if _, err := webhook.New(cfg, res); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := webhook.New(webhook.Config{}, nil); err == nil {
		t.Error("New with a nil resolver accepted")
	}
}
