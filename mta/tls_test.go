package mta_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// requireTLSFor is a TLSPolicy requiring TLS for the listed domains, as an MTA-STS policy in enforce mode
// would.
type requireTLSFor map[string]bool

func (p requireTLSFor) RequireTLS(_ context.Context, domain string) bool { return p[domain] }

// TestSTARTTLSHandshakeFailureIsRecorded: a server offers STARTTLS, says 220 and then fails the handshake.
// Opportunistic TLS still delivers in plaintext, but the outcome says so and the downgrade is counted. A
// recipient domain whose policy requires TLS gets no plaintext fallback — not even over the plaintext
// session just used for the other domain on the same host — and is deferred without any MAIL.
func TestSTARTTLSHandshakeFailureIsRecorded(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{StartTLS: true})
	r := newResolver().
		MX("open.test", ports.MX{Host: "mx.shared.test"}).MX("strict.test", ports.MX{Host: "mx.shared.test"}).
		IP("mx.shared.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	h := newHarness(t, baseConfig(srv.Port()), r, func(d *mta.Deps) {
		d.Registerer = reg
		d.TLSPolicy = requireTLSFor{"strict.test": true}
	}).start()

	rep, _ := h.Send(outbound(t, "open.test", "a@open.test"))
	want := fmt.Sprintf("250 ok (sent without TLS: STARTTLS handshake with mx.shared.test[127.0.0.1]:%d failed: ", srv.Port())
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDelivered || !strings.HasPrefix(o.Response, want) {
		t.Fatalf("outcome %s %q, want delivered %q…", o.Kind, o.Response, want)
	}
	if got := counter(t, reg, "postmill_mta_tls_downgrades_total", "handshake"); got != 1 {
		t.Errorf("handshake downgrades %v, want 1", got)
	}
	before := srv.Counts()
	if before.Conns != 2 || before.StartTLS != 1 || before.Datas != 1 {
		t.Fatalf("server saw %+v; want a TLS attempt, then one plaintext session with one DATA", before)
	}

	rep, _ = h.Send(outbound(t, "strict.test", "a@strict.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.HasPrefix(o.Response, "4.7.0 STARTTLS with mx.shared.test[127.0.0.1]") {
		t.Fatalf("outcome %s %q, want deferred after the failed STARTTLS", o.Kind, o.Response)
	}
	after := srv.Counts()
	if after.Mails != before.Mails || after.StartTLS != before.StartTLS+1 || after.Conns != before.Conns+1 {
		t.Fatalf("server saw %+v after %+v; want one more TLS attempt and no MAIL", after, before)
	}
}

// TestSTARTTLSRefusedIsRecorded: a server that offers STARTTLS and then refuses it (454) gets the message
// in plaintext on the same session (RFC 3207 §4), recorded and counted; with TLS required it is deferred.
func TestSTARTTLSRefusedIsRecorded(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{StartTLS: true, StartTLSReply: "454 4.7.0 TLS not available due to temporary reason"})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	h := newHarness(t, baseConfig(srv.Port()), r, func(d *mta.Deps) { d.Registerer = reg }).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	want := fmt.Sprintf("250 ok (sent without TLS: STARTTLS refused by mx.rcpt.test[127.0.0.1]:%d: 454 TLS not available due to temporary reason)", srv.Port())
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDelivered || o.Response != want {
		t.Fatalf("outcome %s %q, want delivered %q", o.Kind, o.Response, want)
	}
	if got := counter(t, reg, "postmill_mta_tls_downgrades_total", "refused"); got != 1 {
		t.Errorf("refused downgrades %v, want 1", got)
	}

	cfg := baseConfig(srv.Port())
	cfg.RequireTLS = true
	strict := newHarness(t, cfg, r).start()
	rep, _ = strict.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "454") {
		t.Fatalf("outcome %s %q, want deferred with the refusal", o.Kind, o.Response)
	}
	if c := srv.Counts(); c.Datas != 1 {
		t.Fatalf("DATA %d times, want only the opportunistic delivery", c.Datas)
	}
}
