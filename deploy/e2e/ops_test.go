package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/edge"
)

// getURL fetches an absolute URL (another listener of the process than the edge).
func (e *env) getURL(t *testing.T, url string) resp {
	t.Helper()
	res, err := e.http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, raw: raw}
}

// TestMetricsOnTheOperationsListenerOnly: /metrics is served on POSTMILL_METRICS_ADDR, with /healthz, and
// no longer on the public edge; /readyz stays on the edge and answers a flood of probes.
func TestMetricsOnTheOperationsListenerOnly(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	e.MustSignup("metrics@example.com", "")
	if e.app.MetricsURL() == "" || e.app.MetricsURL() == e.base {
		t.Fatalf("metrics URL %q beside the edge at %q", e.app.MetricsURL(), e.base)
	}
	errorBody(t, e.get("/metrics", ""), 404, "Not Found", "")
	m := expect(t, e.getURL(t, e.app.MetricsURL()+"/metrics"), 200)
	for _, want := range []string{`postmill_http_requests_total{method="POST",route="/v1/auth/signup",status="201"} 1`,
		"postmill_http_request_duration_seconds", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(m.raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	expect(t, e.getURL(t, e.app.MetricsURL()+"/healthz"), 200)
	if r := e.getURL(t, e.app.MetricsURL()+"/v1/organization"); r.status != http.StatusNotFound {
		t.Errorf("the operations listener serves the API: %d", r.status)
	}

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if r := e.getURL(t, e.base+"/readyz"); r.status != 200 {
				t.Errorf("readyz %d", r.status)
			}
		})
	}
	wg.Wait()
}

// TestReadyzAnswersEveryProbeOfAFlood: a hundred concurrent probes of /readyz on the running platform all
// answer ready (the edge answers them from one cached check; the edge's own tests count the checks).
func TestReadyzAnswersEveryProbeOfAFlood(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if r := e.getURL(t, e.base+"/readyz"); r.status != 200 {
				t.Errorf("readyz %d: %s", r.status, r.raw)
			}
		})
	}
	wg.Wait()
}

// TestTimeoutCutsOffATricklingBody: a client that sends its sign-up body a byte at a time is answered 408
// and cut off once the route's body time has passed, and the edge goes on serving others.
func TestTimeoutCutsOffATricklingBody(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, pgtest.URL(t))
	cfg.HTTPTimeouts = edge.Timeouts{Read: 500 * time.Millisecond, Write: 500 * time.Millisecond, MinBodyRate: 8 << 20}
	e := MustStart(t, cfg, "all")

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"email":"slow@example.com","password":"` + strings.Repeat("p", 400) + `"}`
	fmt.Fprintf(conn, "POST /v1/auth/signup HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- strings.TrimSpace(line)
	}()
	sent := 0
	var status string
trickle:
	for sent < len(body) {
		select {
		case status = <-answered:
			break trickle
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{body[sent]}); err != nil {
			status = <-answered
			break
		}
		sent++
	}
	if sent == len(body) {
		t.Fatalf("the whole body went through (%d bytes); answer %q", sent, status)
	}
	if status != "" && !strings.Contains(status, " 408 ") {
		t.Errorf("answer %q, want 408 or a closed connection", status)
	}
	// The cut-off client created nothing, and the edge still serves a normal sign-up.
	expect(t, e.do(req{method: "POST", path: "/v1/auth/login",
		body: map[string]any{"email": "slow@example.com", "password": strings.Repeat("p", 400)}}), 401)
	e.MustSignup("quick@example.com", "")
}

// TestOpenAPIServersNameTheBaseURL: the OpenAPI document the platform serves names POSTMILL_BASE_URL in
// servers, so generated clients and the docs page reach the right host.
func TestOpenAPIServersNameTheBaseURL(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, pgtest.URL(t))
	cfg.BaseURL = "https://mail.example.com"
	e := MustStart(t, cfg, "all")
	doc := expect(t, e.get("/v1/openapi.json", ""), 200)
	servers, _ := doc.body["servers"].([]any)
	if len(servers) != 1 {
		t.Fatalf("servers %v", doc.body["servers"])
	}
	if url, _ := servers[0].(map[string]any)["url"].(string); url != "https://mail.example.com" {
		t.Errorf("servers[0].url %q", url)
	}
}
