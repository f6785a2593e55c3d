package clickhouse_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/postmill/postmill/adapters/clickhouse"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/porttest"
)

// serverBinary is Debian's clickhouse-server (deploy/scripts/test-deps.sh installs it).
const serverBinary = "/usr/sbin/clickhouse-server"

var (
	serverOnce sync.Once
	serverAddr string
	serverErr  error
)

// server starts one private clickhouse-server for the package's tests, on a free loopback port with its
// data in a temporary directory, and returns its native-protocol address.
func server(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(serverBinary); err != nil {
		t.Skipf("%s is not installed (deploy/scripts/test-deps.sh installs clickhouse-server)", serverBinary)
	}
	serverOnce.Do(func() { serverAddr, serverErr = startServer() })
	if serverErr != nil {
		t.Fatalf("starting clickhouse-server: %v", serverErr)
	}
	return serverAddr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startServer() (string, error) {
	dir, err := os.MkdirTemp("", "postmill-clickhouse-")
	if err != nil {
		return "", err
	}
	tcp, err := freePort()
	if err != nil {
		return "", err
	}
	httpPort, err := freePort()
	if err != nil {
		return "", err
	}
	users := filepath.Join(dir, "users.xml")
	config := filepath.Join(dir, "config.xml")
	if err := os.WriteFile(users, []byte(`<yandex><profiles><default></default></profiles>
<users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default></default></quotas></yandex>`), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(config, fmt.Appendf(nil, `<yandex>
<logger><level>warning</level><log>%[1]s/server.log</log><errorlog>%[1]s/error.log</errorlog></logger>
<listen_host>127.0.0.1</listen_host><tcp_port>%[2]d</tcp_port><http_port>%[3]d</http_port>
<path>%[1]s/data/</path><tmp_path>%[1]s/tmp/</tmp_path><users_config>%[4]s</users_config>
<default_profile>default</default_profile><default_database>default</default_database>
<mark_cache_size>5368709</mark_cache_size></yandex>`, dir, tcp, httpPort, users), 0o600); err != nil {
		return "", err
	}
	cmd := exec.Command(serverBinary, "--config-file="+config)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return "", err
	}
	// The server outlives no test binary: it is killed, and its directory removed, when the test process
	// ends (see TestMain).
	started = append(started, cmd)
	addr := fmt.Sprintf("127.0.0.1:%d", tcp)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		a, err := clickhouse.Open(ctx, addr, "postmill_probe")
		cancel()
		if err == nil {
			a.Close()
			return addr, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("clickhouse-server on %s did not answer within 60s (logs in %s)", addr, dir)
}

var started []*exec.Cmd

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range started {
		_ = c.Process.Kill()
		_ = c.Wait()
		_ = os.RemoveAll(c.Dir)
	}
	os.Exit(code)
}

func TestAnalyticsContract(t *testing.T) {
	addr := server(t)
	porttest.ExerciseAnalytics(t, porttest.AnalyticsHarness{
		New: func(t *testing.T) ports.AnalyticsStore {
			b := make([]byte, 6)
			_, _ = rand.Read(b)
			db := "postmill_test_" + hex.EncodeToString(b)
			a, err := clickhouse.Open(context.Background(), addr, db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			return a
		},
	})
}

// TestAnalyticsMeasure logs ingest rates and read times (POSTMILL_ANALYTICS_MEASURE=events,requests).
func TestAnalyticsMeasure(t *testing.T) {
	var events, requests int
	if _, err := fmt.Sscanf(os.Getenv("POSTMILL_ANALYTICS_MEASURE"), "%d,%d", &events, &requests); err != nil {
		t.Skip("set POSTMILL_ANALYTICS_MEASURE=events,requests to measure")
	}
	a, err := clickhouse.Open(context.Background(), server(t), "postmill_measure_"+fmt.Sprint(time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	porttest.MeasureAnalytics(t, a, events, requests)
}

// TestRollupsBackfilled: a database made before the rollups existed gets them filled from its stored events
// when it is opened, each event once, and the view counts what comes after.
func TestRollupsBackfilled(t *testing.T) {
	addr := server(t)
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "postmill_backfill_" + hex.EncodeToString(b)
	a, err := clickhouse.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := time.Now().UTC().Truncate(time.Hour).Add(-30 * time.Minute)
	org := fmt.Sprintf("org-%x", b)
	ev := func(i int) ports.AnalyticsEvent {
		return ports.AnalyticsEvent{ID: fmt.Sprintf("ev-%d", i), OrganizationID: org, Type: ports.EventEmailSent,
			MessageID: fmt.Sprintf("m-%d", i), Domain: "a.example", Tags: []string{"campaign:x"}, OccurredAt: now}
	}
	if err := a.InsertEvents(ctx, []ports.AnalyticsEvent{ev(1), ev(2), ev(3)}); err != nil {
		t.Fatal(err)
	}
	// As an older version left it: events (one of them stored twice, not merged), no rollups.
	raw, err := ch.Open(&ch.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{`DROP TABLE ` + db + `.rollups_mv`, `DROP TABLE ` + db + `.rollups`,
		`INSERT INTO ` + db + `.events (organization_id, occurred_at, id, type, message_id, domain, tags)
SELECT organization_id, occurred_at, id, type, message_id, domain, tags FROM ` + db + `.events WHERE id = 'ev-1'`} {
		if err := raw.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	a2, err := clickhouse.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if err := a2.InsertEvents(ctx, []ports.AnalyticsEvent{ev(3), ev(4)}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []ports.AnalyticsQuery{{}, {Domain: "a.example"}, {Tag: "campaign:x"}} {
		q.From, q.To, q.Bucket = now.Add(-time.Hour), now.Add(time.Hour), time.Hour
		sum, err := a2.Summarize(ctx, org, q)
		if err != nil || sum.Totals.Sent != 4 {
			t.Errorf("Summarize(%+v) after the backfill: sent %d, %v; want 4", q, sum.Totals.Sent, err)
		}
	}
	// Opening again adds nothing.
	a3, err := clickhouse.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a3.Close()
	if sum, err := a3.Summarize(ctx, org, ports.AnalyticsQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour), Bucket: time.Hour}); err != nil || sum.Totals.Sent != 4 {
		t.Errorf("after opening again: sent %d, %v; want 4", sum.Totals.Sent, err)
	}
}

// TestLoggedSeedsScrubbedAtOpen: an enrolment answer logged with the TOTP seed in otpauthUrl (as an older
// edge wrote it) loses its body when the store is opened; other rows keep theirs.
func TestLoggedSeedsScrubbedAtOpen(t *testing.T) {
	addr := server(t)
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "postmill_scrub_" + hex.EncodeToString(b)
	a, err := clickhouse.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	at := time.Now().UTC()
	rows := []ports.RequestLog{
		{OrganizationID: "org", ID: "enrol", OccurredAt: at, Method: "POST", Route: "/v1/auth/2fa/enroll", Path: "/v1/auth/2fa/enroll",
			Status: 201, ResponseBody: `{"otpauthUrl":"otpauth://totp/Postmill:a@example.com?secret=FDK6ETAMBJHL","secret":"[redacted]"}`},
		{OrganizationID: "org", ID: "send", OccurredAt: at, Method: "POST", Route: "/v1/emails", Path: "/v1/emails",
			Status: 202, ResponseBody: `{"id":"m1","note":"otpauth"}`},
	}
	if err := a.InsertRequests(ctx, rows); err != nil {
		t.Fatal(err)
	}
	a2, err := clickhouse.Open(ctx, addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	raw, err := ch.Open(&ch.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	body := func(id string) string {
		var s string
		if err := raw.QueryRow(ctx, `SELECT response_body FROM `+db+`.requests WHERE id = ?`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for deadline := time.Now().Add(30 * time.Second); strings.Contains(body("enrol"), "FDK6ETAMBJHL"); { // the mutation runs in the background
		if time.Now().After(deadline) {
			t.Fatalf("the logged seed is still there: %s", body("enrol"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := body("enrol"); got != "[redacted]" {
		t.Errorf("enrolment body %q, want [redacted]", got)
	}
	if got := body("send"); got != rows[1].ResponseBody {
		t.Errorf("another route's body became %q", got)
	}
}
