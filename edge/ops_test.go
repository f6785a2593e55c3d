package edge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/postmill/postmill/edge"
)

// metrics is what the composition root's operations listener serves for this edge's registry.
func (b *testBundle) metrics(tb testing.TB) string {
	tb.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestMetricsAreNotServedOnThePublicListener(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	mustError(t, b.do(t, "GET", "/metrics", "", nil), 404, "", "")
	mustStatus(t, b.do(t, "GET", "/healthz", "", nil), 200)
}

// TestReadyzAnswersFromACachedCheck: a flood of concurrent probes runs the readiness check (a database
// ping through the core) once, every probe gets its answer, and a failure is answered as 503 from the
// cache just the same. Once the answer is older than a second, the next probe checks again.
func TestReadyzAnswersFromACachedCheck(t *testing.T) {
	t.Parallel()
	var pings atomic.Int32
	var failing atomic.Bool
	b := MustStartEdge(t, newFakeCore(), func(c *edge.Config) {
		c.Ready = func(ctx context.Context) error {
			pings.Add(1)
			time.Sleep(50 * time.Millisecond) // a check takes a while, so the probes overlap it
			if failing.Load() {
				return errors.New("database down")
			}
			return nil
		}
	})
	flood := func(want int) {
		t.Helper()
		const probes = 64
		var wg sync.WaitGroup
		statuses := make(chan int, probes)
		for range probes {
			wg.Go(func() {
				res, err := b.srv.Client().Get(b.srv.URL + "/readyz")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				statuses <- res.StatusCode
			})
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != want {
				t.Errorf("readyz %d, want %d", s, want)
			}
		}
	}

	flood(200)
	// A slow machine may spread the probes over more than the second an answer is kept.
	if n := pings.Load(); n < 1 || n > 2 {
		t.Fatalf("%d pings for 64 concurrent probes, want 1 (2 at most)", n)
	}
	// Once the answer has aged, a probe checks again, and sees the failure.
	failing.Store(true)
	before := pings.Load()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := b.do(t, "GET", "/readyz", "", nil)
		if r.status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readyz never checked again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pings.Load() != before+1 {
		t.Fatalf("pings went from %d to %d while polling, want one more check", before, pings.Load())
	}
	before = pings.Load()
	flood(503)
	if n := pings.Load() - before; n > 1 {
		t.Fatalf("%d pings for 64 probes of a cached failure, want at most 1", n)
	}
}

// startServer serves an edge over fake with timeouts, through the http.Server the edge configures.
func startServer(tb testing.TB, fake *fakeCore, timeouts edge.Timeouts) string {
	tb.Helper()
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler), Timeouts: timeouts}, fake.core())
	if err != nil {
		tb.Fatal(err)
	}
	srv := s.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// upload sends a POST whose body leaves in pieces of chunk bytes, one every interval, and returns the
// server's status line ("" when it closed the connection without one) and how many body bytes had been
// sent when the answer came. It stops sending as soon as the server answers.
func upload(tb testing.TB, addr, path, token string, body []byte, chunk int, every time.Duration) (status string, sent int) {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: edge.test\r\nContent-Type: application/json\r\n"+
		"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", path, token, len(body)); err != nil {
		tb.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- strings.TrimSpace(line)
	}()
	for sent < len(body) {
		select {
		case line := <-answered:
			return line, sent
		case <-time.After(every):
		}
		n := min(chunk, len(body)-sent)
		if _, err := conn.Write(body[sent : sent+n]); err != nil {
			break // the server closed the connection; its answer, if any, is read below
		}
		sent += n
	}
	select {
	case line := <-answered:
		return line, sent
	case <-time.After(30 * time.Second):
		tb.Fatal("no answer and no close after the whole body")
		return "", sent
	}
}

// TestTricklingBodyIsCutOff: a client sending its body a byte at a time is answered 408 and cut off once
// the route's body time has passed, long before the body is complete, and the core is never called.
func TestTricklingBodyIsCutOff(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	// Login bodies are bounded at 1 MiB: at 4 MiB/s that is a quarter second, so Read (300 ms) applies.
	addr := startServer(t, fake, edge.Timeouts{Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, MinBodyRate: 4 << 20})
	body, _ := json.Marshal(map[string]any{"email": "ada@example.com", "password": strings.Repeat("p", 200)})
	status, sent := upload(t, addr, "/v1/auth/login", "", body, 1, 20*time.Millisecond)
	if !strings.Contains(status, " 408 ") && status != "" {
		t.Errorf("status %q, want 408 or a closed connection", status)
	}
	if sent >= len(body) {
		t.Errorf("the whole body (%d bytes) went through before the cut", sent)
	}
	if fake.called("Login") != 0 {
		t.Error("the core was called with a body that never arrived")
	}
}

// TestLargeBodyRoutesAllowSlowUploads: the send route's body may take what its bound (SendMaxBodyBytes)
// needs at MinBodyRate, far beyond Read, and the answer still gets through after it, beyond Write; the same
// pace on a route with a small bound is cut off.
func TestLargeBodyRoutesAllowSlowUploads(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	// A send's bound at 12 MiB/s: some seconds for its body, against 300 ms for the rest.
	addr := startServer(t, fake, edge.Timeouts{Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, MinBodyRate: 12 << 20})
	body, _ := json.Marshal(map[string]any{"from": "ada@example.org", "to": "bob@example.net", "subject": "Hi",
		"text": strings.Repeat("slow link ", 20)})
	// About a second in all: longer than Read and Write, well within the send route's body time.
	every := time.Second / time.Duration(len(body)/8+1)
	status, sent := upload(t, addr, "/v1/emails", sendKey, body, 8, every)
	if !strings.Contains(status, " 202 ") || sent != len(body) {
		t.Fatalf("slow send: status %q after %d of %d bytes, want 202 after all of them", status, sent, len(body))
	}
	if fake.called("Send") != 1 {
		t.Errorf("Send called %d times", fake.called("Send"))
	}
	status, sent = upload(t, addr, "/v1/auth/login", "", body, 8, every)
	if strings.Contains(status, " 200 ") || sent >= len(body) {
		t.Errorf("the same pace on login: status %q after %d of %d bytes, want a cut", status, sent, len(body))
	}
}

// TestInFlightCountsRequestsBeingServed: Config.InFlight is one while a request is being served (read here
// from inside the readiness check) and back to zero once it is answered, errors included.
func TestInFlightCountsRequestsBeingServed(t *testing.T) {
	t.Parallel()
	var inFlight atomic.Int64
	seen := make(chan int64, 1)
	b := MustStartEdge(t, newFakeCore(), func(c *edge.Config) {
		c.InFlight = &inFlight
		c.Ready = func(context.Context) error {
			seen <- inFlight.Load()
			return nil
		}
	})
	mustStatus(t, b.do(t, "GET", "/readyz", "", nil), 200)
	if n := <-seen; n != 1 {
		t.Fatalf("%d requests in flight while one was served, want 1", n)
	}
	mustError(t, b.do(t, "GET", "/v1/no-such-route", "", nil), 404, "", "")
	if n := inFlight.Load(); n != 0 {
		t.Fatalf("%d requests in flight after the answers, want 0", n)
	}
}
