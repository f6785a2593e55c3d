package mta_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

func TestRequireTLSWithoutSTARTTLSDefers(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.RequireTLS = true
	h := newHarness(t, cfg, r).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDeferred || !strings.Contains(o.Response, "TLS is required") || len(ts.Envelopes()) != 0 {
		t.Errorf("outcome %v, %d transactions", o, len(ts.Envelopes()))
	}
}

func TestRecipientReplies(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{
		RcptReply: map[string]*smtp.SMTPError{
			"gone@rcpt.test": smtpErr(550, "5.1.1", "No such user"),
			"busy@rcpt.test": smtpErr(450, "4.2.1", "Mailbox busy, try later"),
		},
		DataReply: smtpErr(250, "2.0.0", "Ok: queued as ABC123"),
	})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	rep, st := h.Send(outbound(t, "rcpt.test", "ok@rcpt.test", "gone@rcpt.test", "busy@rcpt.test"))
	want := map[string]string{
		"r1": "delivered|250 2.0.0 Ok: queued as ABC123",
		"r2": "bounced|550 5.1.1 No such user",
		"r3": "deferred|450 4.2.1 Mailbox busy, try later",
	}
	if got := outcomes(rep); !maps.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if !rep.Handed || !st.Ack {
		t.Errorf("handed=%v ack=%v", rep.Handed, st.Ack)
	}
	if env := oneEnvelope(t, ts); !slices.Equal(env.Rcpts, []string{"ok@rcpt.test"}) {
		t.Errorf("accepted %v", env.Rcpts)
	}
}

func TestTransactionReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		opts   serverOptions
		rcpts  []string
		want   string
		handed bool
	}{
		{"4xx after DATA defers", serverOptions{DataReply: smtpErr(451, "4.3.0", "Try again")}, []string{"a@rcpt.test"},
			"deferred|451 4.3.0 Try again", true},
		{"5xx after DATA bounces", serverOptions{DataReply: smtpErr(554, "5.7.1", "Spam detected")}, []string{"a@rcpt.test"},
			"bounced|554 5.7.1 Spam detected", true},
		{"421 defers", serverOptions{DataReply: smtpErr(421, "4.4.2", "Closing")}, []string{"a@rcpt.test"},
			"deferred|421 4.4.2 Closing", true},
		{"all recipients refused", serverOptions{RcptReply: map[string]*smtp.SMTPError{"a@rcpt.test": smtpErr(550, "5.1.1", "Unknown")}},
			[]string{"a@rcpt.test"}, "bounced|550 5.1.1 Unknown", true},
		{"MAIL FROM refused is not handed", serverOptions{AuthUser: "u", AuthPass: "p"}, []string{"a@rcpt.test"},
			"bounced|530 5.7.0 Authentication required", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := mustServer(t, tc.opts)
			r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
			h := newHarness(t, baseConfig(ts.Port()), r).start()
			rep, st := h.Send(outbound(t, "rcpt.test", tc.rcpts...))
			if got := outcomes(rep)["r1"]; got != tc.want || rep.Handed != tc.handed || !st.Ack {
				t.Errorf("outcome %q handed=%v ack=%v; want %q handed=%v", got, rep.Handed, st.Ack, tc.want, tc.handed)
			}
		})
	}
}

func TestReusesConnectionsAndClosesIdleOnes(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.IdleConnTimeout = 300 * time.Millisecond
	h := newHarness(t, cfg, r).start()

	for range 3 {
		if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	if accepts, active, _ := ts.Stats(); accepts != 1 || active != 1 || len(ts.Envelopes()) != 3 {
		t.Fatalf("%d connections (%d open) for %d transactions; want 1 for 3", accepts, active, len(ts.Envelopes()))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, active, _ := ts.Stats(); active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle connection not closed after IdleConnTimeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The next job dials again.
	h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if accepts, _, _ := ts.Stats(); accepts != 2 {
		t.Errorf("%d connections, want 2", accepts)
	}
}

func TestReconnectsWhenIdleConnectionWasDropped(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	// The server drops the pooled connection (as servers do after their own idle timeout).
	ts.dropAll()
	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Fatalf("outcome %v after the idle connection was dropped", rep.Recipients[0])
	}
	if accepts, _, _ := ts.Stats(); accepts != 2 {
		t.Errorf("%d connections, want 2", accepts)
	}
}

// TestRSETOnlyAfterAnUnfinishedTransaction: a session whose last transaction ended with 250 after DATA is
// reused without RSET (RFC 5321 §4.1.1.4); one whose transaction was left open (every recipient refused)
// is reset before the next MAIL, and the next message is still delivered over it.
func TestRSETOnlyAfterAnUnfinishedTransaction(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{RcptReply: map[string]*smtp.SMTPError{"gone@rcpt.test": smtpErr(550, "5.1.1", "Unknown")}})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	for range 2 {
		if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	if n := ts.RSETs(); n != 0 {
		t.Fatalf("%d RSETs between clean transactions, want 0", n)
	}
	if rep, _ := h.Send(outbound(t, "rcpt.test", "gone@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeBounced {
		t.Fatalf("outcome %v", rep.Recipients[0])
	}
	if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Fatalf("outcome after the refused transaction %v", rep.Recipients[0])
	}
	if n := ts.RSETs(); n != 1 {
		t.Fatalf("%d RSETs, want 1 (after the transaction left open)", n)
	}
	if accepts, _, _ := ts.Stats(); accepts != 1 || len(ts.Envelopes()) != 3 {
		t.Fatalf("%d connections for %d messages; want 1 for 3", accepts, len(ts.Envelopes()))
	}
}

// TestMXAnswersAreReused: a recipient domain's MX answer serves the jobs that follow it; a failed lookup is
// never kept.
func TestMXAnswersAreReused(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	r.mxErr["flaky.test"] = ports.DNSTemporary
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	for range 3 {
		if rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
		if rep, _ := h.Send(outbound(t, "flaky.test", "a@flaky.test")); rep.Recipients[0].Kind != ports.OutcomeDeferred {
			t.Fatalf("outcome %v for a failing lookup", rep.Recipients[0])
		}
	}
	var rcpt, flaky int
	for _, q := range r.Asked() {
		switch q {
		case "MX rcpt.test":
			rcpt++
		case "MX flaky.test":
			flaky++
		}
	}
	if rcpt != 1 || flaky != 3 {
		t.Fatalf("MX lookups: rcpt.test %d (want 1), flaky.test %d (want 3)", rcpt, flaky)
	}
}

func TestPerDestinationConcurrencyLimit(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{DataDelay: 100 * time.Millisecond})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.Concurrency, cfg.Workers = 2, 10
	h := newHarness(t, cfg, r).start()

	const jobs = 10
	for range jobs {
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	}
	for range jobs {
		if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	accepts, _, maxActive := ts.Stats()
	if maxActive != 2 || accepts != 2 || len(ts.Envelopes()) != jobs {
		t.Errorf("at most %d sessions at once over %d connections for %d messages; want 2, 2, %d", maxActive, accepts, len(ts.Envelopes()), jobs)
	}
}

func TestLongJobRenewsItsLeaseUntilSettled(t *testing.T) {
	t.Parallel()
	gate, signal := make(chan struct{}), make(chan struct{}, 1)
	ts := mustServer(t, serverOptions{DataGate: gate, DataSignal: signal})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(ts.Port())
	cfg.LeaseRenewInterval = 10 * time.Millisecond
	h := newHarness(t, cfg, r).start()

	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	<-signal // the receiver holds its reply to DATA: the job is in progress
	for h.Queue.renewals.Load() < 3 {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	close(gate)
	if st := h.Settled(); !st.Ack {
		t.Fatalf("settlement %+v", st)
	}
	after := h.Queue.renewals.Load()
	time.Sleep(50 * time.Millisecond) // five renew intervals
	if n := h.Queue.renewals.Load(); n != after {
		t.Fatalf("the lease was renewed %d more times after the job was settled", n-after)
	}
}

func TestRunDrainsInFlightJobsOnCancel(t *testing.T) {
	t.Parallel()
	gate, signal := make(chan struct{}), make(chan struct{}, 1)
	ts := mustServer(t, serverOptions{DataGate: gate, DataSignal: signal})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
	<-signal // the message is on the wire
	stopped := make(chan error, 1)
	go func() { stopped <- h.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Run returned with a job in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if rep := h.Report(); rep.Recipients[0].Kind != ports.OutcomeDelivered {
		t.Errorf("outcome %v", rep.Recipients[0])
	}
	if st := h.Settled(); !st.Ack {
		t.Error("drained job not acked")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, active, _ := ts.Stats(); active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pooled connection still open after Run returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJobSettlement(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")

	t.Run("message gone is acked without delivery", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r).start()
		out := outbound(t, "rcpt.test", "gone-job@rcpt.test")
		_ = h.Queue.Publish(context.Background(), []ports.DeliveryJob{out.Job}) // never registered: not_found
		if st := h.Settled(); !st.Ack || st.JobID != out.Job.ID {
			t.Errorf("settlement %+v, want ack", st)
		}
		select {
		case rep := <-h.Service.reports:
			t.Errorf("unexpected report %+v", rep)
		default:
		}
	})
	t.Run("load failure is nacked", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r)
		h.Service.loadErr = errors.New("core unavailable")
		h.start()
		h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))
		if st := h.Settled(); st.Ack {
			t.Error("acked after a load failure")
		}
	})
	t.Run("report failure is nacked", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r)
		h.Service.reportErr = errors.New("core unavailable")
		h.start()
		if _, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test")); st.Ack {
			t.Error("acked after a report failure")
		}
	})
	t.Run("missing attachment fails without delivery", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, baseConfig(ts.Port()), r).start()
		out := outbound(t, "rcpt.test", "a@rcpt.test")
		out.Attachments = []ports.StoredAttachment{{ID: "x", Filename: "gone.pdf", Key: "att/missing"}}
		rep, st := h.Send(out)
		if o := rep.Recipients[0]; o.Kind != ports.OutcomeFailed || !strings.HasPrefix(o.Response, "5.3.0") || rep.Handed || !st.Ack {
			t.Errorf("outcome %v handed=%v ack=%v", o, rep.Handed, st.Ack)
		}
	})
}

func TestMessageForSeveralDomainsIsSignedOnce(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{})
	r := newResolver().
		MX("one.test", ports.MX{Host: "mx.shared.test"}).MX("two.test", ports.MX{Host: "mx.shared.test"}).
		IP("mx.shared.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	first := outbound(t, "one.test", "a@one.test")
	first.HTML = "<p>multipart, so each build has fresh boundaries</p>"
	first.To = []string{"a@one.test", "b@two.test"}
	second := first
	second.Job.ID, second.Job.Domain = newID(), "two.test"
	second.Recipients = []ports.Recipient{{ID: "r2", Type: ports.RecipientTo, Address: "b@two.test"}}
	h.Send(first)
	h.Send(second)

	envs := ts.Envelopes()
	if len(envs) != 2 || !bytes.Equal(envs[0].Data, envs[1].Data) {
		t.Fatalf("%d transactions; the two jobs must send identical signed bytes", len(envs))
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{RcptReply: map[string]*smtp.SMTPError{"no@rcpt.test": smtpErr(550, "5.1.1", "Unknown")}})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	h := newHarness(t, baseConfig(ts.Port()), r, func(d *mta.Deps) { d.Registerer = reg }).start()

	h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "no@rcpt.test"))
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				got[name] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{
		"postmill_mta_deliveries_total{delivered}":        1,
		"postmill_mta_deliveries_total{bounced}":          1,
		"postmill_mta_jobs_total{acked}":                  1,
		"postmill_mta_smtp_duration_seconds{connect}":     1,
		"postmill_mta_smtp_duration_seconds{transaction}": 1,
		"postmill_mta_pool_connections":                   1,
		"postmill_mta_pool_idle_connections":              1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  mta.Config
		ok   bool
	}{
		{"zero is all defaults", mta.Config{}, true},
		{"relay with credentials", mta.Config{Relay: "smtp.example.com:587", RelayUsername: "u", RelayPassword: "p"}, true},
		{"relay without port", mta.Config{Relay: "smtp.example.com"}, false},
		{"credentials without relay", mta.Config{RelayUsername: "u"}, false},
		{"password without username", mta.Config{Relay: "a:25", RelayPassword: "p"}, false},
		{"bad port", mta.Config{Port: 70000}, false},
		{"negative concurrency", mta.Config{Concurrency: -1}, false},
		{"negative signers", mta.Config{Signers: -1}, false},
		{"signing nice 19", mta.Config{SigningNice: 19}, true},
		{"signing nice over 19", mta.Config{SigningNice: 20}, false},
		{"signing at the process's priority", mta.Config{SigningNice: -1}, true},
		{"HELO with space", mta.Config{HELO: "bad name"}, false},
		{"insecure TLS through TLSConfig", mta.Config{TLSConfig: &tls.Config{InsecureSkipVerify: true}}, false},
		{"insecure TLS through the explicit option", mta.Config{InsecureSkipVerify: true}, true},
	}
	for _, tc := range cases {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if _, err := mta.New(mta.Config{}, mta.Deps{}); err == nil || !strings.Contains(err.Error(), "Queue") {
		t.Errorf("New without dependencies: %v", err)
	}
}

func TestReusesTLSAndAuthenticatedRelaySession(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSigned(t, "127.0.0.1")
	ts := mustServer(t, serverOptions{TLS: serverTLS, AuthUser: "relay-user", AuthPass: "s3cret"})
	cfg := baseConfig(25)
	cfg.Relay, cfg.RelayUsername, cfg.RelayPassword = ts.Addr, "relay-user", "s3cret"
	cfg.TLSConfig = &tls.Config{RootCAs: roots}
	h := newHarness(t, cfg, newResolver()).start()

	for range 3 {
		if rep, _ := h.Send(outbound(t, "far-away.test", "a@far-away.test")); rep.Recipients[0].Kind != ports.OutcomeDelivered {
			t.Fatalf("outcome %v", rep.Recipients[0])
		}
	}
	envs := ts.Envelopes()
	for _, env := range envs {
		if !env.TLS || env.User != "relay-user" {
			t.Errorf("transaction TLS=%v user=%q", env.TLS, env.User)
		}
	}
	if accepts, _, _ := ts.Stats(); accepts != 1 || len(envs) != 3 {
		t.Errorf("%d connections for %d transactions, want 1 for 3", accepts, len(envs))
	}
}

func TestTooManyRecipientsContinuesInFurtherTransactions(t *testing.T) {
	t.Parallel()
	ts := mustServer(t, serverOptions{MaxRcpts: 2})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, baseConfig(ts.Port()), r).start()

	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "c@rcpt.test", "d@rcpt.test", "e@rcpt.test"))
	for _, o := range rep.Recipients {
		if o.Kind != ports.OutcomeDelivered {
			t.Errorf("outcome %v", o)
		}
	}
	var sizes []int
	for _, env := range ts.Envelopes() {
		sizes = append(sizes, len(env.Rcpts))
	}
	if accepts, _, _ := ts.Stats(); !slices.Equal(sizes, []int{2, 2, 1}) || accepts != 1 {
		t.Errorf("transactions of %v recipients over %d connections; want [2 2 1] over 1", sizes, accepts)
	}
}
