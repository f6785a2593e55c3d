package mta_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// errStoreRefusesNUL is what PostgreSQL answers to text holding a NUL byte.
var errStoreRefusesNUL = errors.New(`ERROR: invalid byte sequence for encoding "UTF8": 0x00 (SQLSTATE 22021)`)

// refuseUnstorable fails a report the way the PostgreSQL store does: NUL or invalid UTF-8 in any response.
func refuseUnstorable(r ports.DeliveryReport) error {
	for _, o := range r.Recipients {
		if strings.ContainsRune(o.Response, 0) || !utf8.ValidString(o.Response) {
			return errStoreRefusesNUL
		}
	}
	return nil
}

// fastRetries makes redeliveries come back within milliseconds.
func fastRetries(cfg mta.Config, maxDeliveries int) mta.Config {
	cfg.RedeliveryBackoff, cfg.MaxRedeliveryBackoff, cfg.MaxDeliveries = 20*time.Millisecond, 160*time.Millisecond, maxDeliveries
	return cfg
}

// settleUntil collects settlements until one acks or dead-letters the job.
func settleUntil(tb testing.TB, h *harness) []settlement {
	tb.Helper()
	var all []settlement
	for {
		st := h.Settled()
		all = append(all, st)
		if st.Ack || st.Dead != "" {
			return all
		}
		if len(all) > 50 {
			tb.Fatalf("still not settled after %d deliveries: %+v", len(all), all)
		}
	}
}

// quiet waits long enough for a runaway redelivery loop to show.
func quiet() { time.Sleep(400 * time.Millisecond) }

// TestNULInReplyIsStoredEscapedAndSentOnce: a receiving server answers the message with "250 ok\x00". The
// reply is stored escaped, so the store (which refuses NUL) takes the report at once, and the message is
// sent exactly once. Before replies were cleaned, the report failed, the job came straight back, and DATA
// was sent again and again.
func TestNULInReplyIsStoredEscapedAndSentOnce(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{DataReply: "250 ok\x00"})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, fastRetries(baseConfig(srv.Port()), 10), r)
	h.Service.refuse = refuseUnstorable
	h.start()

	rep, st := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if o := rep.Recipients[0]; o.Kind != ports.OutcomeDelivered || o.Response != `250 ok\x00` {
		t.Fatalf("outcome %s %q, want delivered %q", o.Kind, o.Response, `250 ok\x00`)
	}
	if !st.Ack {
		t.Fatalf("settlement %+v, want ack", st)
	}
	quiet()
	if c := srv.Counts(); c.Datas != 1 {
		t.Fatalf("DATA sent %d times, want once", c.Datas)
	}
}

// TestReportFailureNeverSendsTwice: the server accepts the message but recording the outcome fails three
// times. The job comes back after growing delays and its journaled outcome is reported again each time;
// DATA is sent exactly once.
func TestReportFailureNeverSendsTwice(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{DataReply: "250 2.0.0 queued as A1"})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	cfg := fastRetries(baseConfig(srv.Port()), 10)
	cfg.JournalDir = filepath.Join(t.TempDir(), "mta")
	h := newHarness(t, cfg, r, func(d *mta.Deps) { d.Registerer = reg })
	var mu sync.Mutex
	failures := 3
	h.Service.refuse = func(ports.DeliveryReport) error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return errors.New("core unavailable")
		}
		return nil
	}
	h.start()
	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))

	sts := settleUntil(t, h)
	if len(sts) != 4 || !sts[3].Ack {
		t.Fatalf("settlements %+v, want three nacks and an ack", sts)
	}
	for i, st := range sts[:3] {
		base := 20 * time.Millisecond << i // 20, 40, 80 ms, less up to a quarter of jitter
		if st.Deliveries != i+1 || st.Delay > base || st.Delay < base*3/4 {
			t.Errorf("delivery %d nacked for %v (deliveries %d), want %v less at most a quarter", i+1, st.Delay, st.Deliveries, base)
		}
	}
	for i := range 4 {
		if o := h.Report().Recipients[0]; o.Kind != ports.OutcomeDelivered || o.Response != "250 2.0.0 queued as A1" {
			t.Fatalf("report %d: %s %q", i+1, o.Kind, o.Response)
		}
	}
	quiet()
	if c := srv.Counts(); c.Datas != 1 || c.Mails != 1 {
		t.Fatalf("MAIL %d and DATA %d times, want once each", c.Mails, c.Datas)
	}
	if got := counter(t, reg, "postmill_mta_journal_replays_total", ""); got != 3 {
		t.Errorf("journal replays %v, want 3", got)
	}
	// Each failed report fsynced the journal before the job went back; the one that succeeded did not.
	if got := counter(t, reg, "postmill_mta_journal_fsyncs_total", ""); got != 3 {
		t.Errorf("journal fsyncs %v, want 3 (one per failed report)", got)
	}
}

// TestDeadLetterWhenTheReportPathFails: recording the outcome never succeeds. At MaxDeliveries the job is
// given up: the failed report is attempted, fails too, and the queue keeps the job as a dead letter whose
// reason says the server had accepted the message. DATA was sent once; an error is logged and counted.
func TestDeadLetterWhenTheReportPathFails(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	h := newHarness(t, fastRetries(baseConfig(srv.Port()), 4), r, func(d *mta.Deps) {
		d.Registerer = reg
		d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	h.Service.reportErr = errors.New("core unavailable")
	h.start()
	h.Enqueue(outbound(t, "rcpt.test", "a@rcpt.test"))

	sts := settleUntil(t, h)
	last := sts[len(sts)-1]
	if len(sts) != 4 || last.Deliveries != 4 {
		t.Fatalf("settlements %+v, want three nacks and a dead letter at the fourth delivery", sts)
	}
	for _, want := range []string{"5.3.0 delivery given up after 4 attempts", "recording the outcome failed: core unavailable",
		"the receiving server had accepted the message: 250 ok", "reporting the failure failed too"} {
		if !strings.Contains(last.Dead, want) {
			t.Errorf("dead-letter reason %q lacks %q", last.Dead, want)
		}
	}
	var deadReport ports.DeliveryReport
	for range 5 { // four delivered reports, then the failed one
		deadReport = h.Report()
	}
	if o := deadReport.Recipients[0]; o.Kind != ports.OutcomeFailed || !strings.HasPrefix(o.Response, "5.3.0 delivery given up") {
		t.Errorf("dead report outcome %s %q", o.Kind, o.Response)
	}
	quiet()
	if c := srv.Counts(); c.Datas != 1 {
		t.Fatalf("DATA sent %d times, want once", c.Datas)
	}
	if got := counter(t, reg, "postmill_mta_jobs_total", "parked"); got != 1 {
		t.Errorf("parked jobs %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"delivery job parked") {
		t.Errorf("no error logged for the dead letter:\n%s", logs.String())
	}
}

// TestDeadLetterReportsFailedWhenLoadingKeepsFailing: the message cannot be loaded however often the job
// comes back. At MaxDeliveries its recipients are reported failed with the reason (the message timeline
// shows it) and the job is acked; nothing was sent.
func TestDeadLetterReportsFailedWhenLoadingKeepsFailing(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	reg := prometheus.NewRegistry()
	h := newHarness(t, fastRetries(baseConfig(srv.Port()), 3), r, func(d *mta.Deps) { d.Registerer = reg })
	h.Service.loadErr = errors.New("decrypting the DKIM key failed")
	h.start()
	out := outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test")
	h.Enqueue(out)

	sts := settleUntil(t, h)
	if len(sts) != 3 || !sts[2].Ack {
		t.Fatalf("settlements %+v, want two nacks and an ack", sts)
	}
	rep := h.Report()
	if len(rep.Recipients) != 2 || rep.Handed {
		t.Fatalf("dead report %+v", rep)
	}
	for _, o := range rep.Recipients {
		if o.Kind != ports.OutcomeFailed || o.Response != "5.3.0 delivery given up after 3 attempts: loading the message failed: decrypting the DKIM key failed" {
			t.Errorf("outcome %s %q", o.Kind, o.Response)
		}
	}
	if c := srv.Counts(); c.Conns != 0 {
		t.Errorf("%d connections for a message never loaded", c.Conns)
	}
	if got := counter(t, reg, "postmill_mta_jobs_total", "dead_lettered"); got != 1 {
		t.Errorf("dead-lettered jobs %v, want 1", got)
	}
}

// TestJobHandedOutTooOftenIsDeadLettered: a job that keeps coming back without being settled (each MTA
// handling it died) is given up on arrival once past MaxDeliveries, before any connection.
func TestJobHandedOutTooOftenIsDeadLettered(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	h := newHarness(t, fastRetries(baseConfig(srv.Port()), 5), r).start()
	out := outbound(t, "rcpt.test", "a@rcpt.test")
	h.Service.mu.Lock()
	h.Service.messages[out.Job.ID] = out
	h.Service.mu.Unlock()
	h.Queue.requeue(queuedJob{job: out.Job, before: 5}) // the sixth time it is handed out

	if st := h.Settled(); !st.Ack {
		t.Fatalf("settlement %+v, want the dead report recorded and the job acked", st)
	}
	if o := h.Report().Recipients[0]; o.Kind != ports.OutcomeFailed || !strings.Contains(o.Response, "handed out 5 times without settling") {
		t.Errorf("outcome %s %q", o.Kind, o.Response)
	}
	if c := srv.Counts(); c.Conns != 0 {
		t.Errorf("%d connections", c.Conns)
	}
}

// TestJournalSurvivesRestart: the report fails and the process stops; a new MTA on the same data
// directory gets the job back and reports the journaled outcome instead of sending the message again. Two
// MTAs running at once on one directory each hold a journal file of their own.
func TestJournalSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := mustRawServer(t, "127.0.0.1", rawOptions{DataReply: "250 2.0.0 kept"})
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := fastRetries(baseConfig(srv.Port()), 10)
	cfg.RedeliveryBackoff, cfg.MaxRedeliveryBackoff = time.Hour, time.Hour // the first process never sees it again
	cfg.JournalDir = filepath.Join(t.TempDir(), "mta")

	first := newHarness(t, cfg, r)
	first.Service.reportErr = errors.New("core unavailable")
	first.start()
	out := outbound(t, "rcpt.test", "a@rcpt.test")
	if _, st := first.Send(out); st.Ack {
		t.Fatal("acked although the report failed")
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	second := newHarness(t, cfg, r)
	other := newHarness(t, cfg, r) // a second process on the same directory
	second.start()
	other.start()
	second.Service.mu.Lock()
	second.Service.messages[out.Job.ID] = out
	second.Service.mu.Unlock()
	second.Queue.requeue(queuedJob{job: out.Job, before: 1})
	if st := second.Settled(); !st.Ack {
		t.Fatalf("settlement %+v, want ack", st)
	}
	if o := second.Report().Recipients[0]; o.Kind != ports.OutcomeDelivered || o.Response != "250 2.0.0 kept" {
		t.Fatalf("re-reported outcome %s %q", o.Kind, o.Response)
	}
	if c := srv.Counts(); c.Datas != 1 {
		t.Fatalf("DATA sent %d times across the restart, want once", c.Datas)
	}
	for _, name := range []string{"journal-0.log", "journal-1.log"} {
		if _, err := os.Stat(filepath.Join(cfg.JournalDir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// counter returns the value of a counter (or gauge) series, label being its one label's value ("" for
// none).
func counter(tb testing.TB, reg *prometheus.Registry, name, label string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() != label {
				continue
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
