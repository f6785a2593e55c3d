package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runListmonk measures listmonk (https://listmonk.app, the self-hosted newsletter manager Postmill's
// marketing half is compared with) on this machine, against the same PostgreSQL and the same SMTP sink as
// Postmill's benchmarks: a 10,000-row CSV import, 100,000 subscribers loaded by ten such imports, and a
// campaign to all of them from "running" to the last arrival at the sink, with the process's peak RSS and
// the CPU a message costs. listmonk does not sign with DKIM; the RSA ceiling of the same run is printed to
// set its rate beside Postmill's. deploy/bench/listmonk.sh fetches and builds listmonk.
func runListmonk(args []string) error {
	fs := flag.NewFlagSet("listmonk", flag.ExitOnError)
	dir := fs.String("dir", "", "listmonk's source tree with its binary built in it as ./listmonk (deploy/bench/listmonk.sh prints it)")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	contacts := fs.Int("contacts", 100000, "subscribers, loaded by imports of -import-rows each")
	domains := fs.Int("domains", 20, "recipient domains the subscribers are spread over")
	importRows := fs.Int("import-rows", 10000, "rows of each CSV import")
	concurrency := fs.Int("concurrency", 10, "app.concurrency: campaign workers (listmonk's default: 10)")
	rate := fs.Int("message-rate", 0, "app.message_rate: messages per second per worker (listmonk's default: 10); 0 lifts the limit")
	conns := fs.Int("max-conns", 10, "SMTP connections to the sink (listmonk's default: 10)")
	rsaFor := fs.Duration("rsa", 3*time.Second, "how long the RSA ceiling is measured")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up after")
	_ = fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("-dir is required (deploy/bench/listmonk.sh builds listmonk and prints its directory)")
	}
	bin := filepath.Join(*dir, "listmonk")
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	ceilingBefore, _, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	version, _ := exec.Command(bin, "--version").CombinedOutput()
	mx, err := startSink(true, true)
	if err != nil {
		return err
	}
	defer mx.close()

	u, err := url.Parse(*db)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "postmill-bench-listmonk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	password, _ := u.User.Password()
	if password == "" {
		// listmonk writes "password=%s dbname=%s" into lib/pq's connection string, which reads an empty
		// password as "dbname=…" and then connects to the user's database; a server that trusts the
		// connection ignores the password.
		password = "unused"
	}
	dbPort := u.Port()
	if dbPort == "" {
		dbPort = "5432"
	}
	config := filepath.Join(work, "config.toml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `[app]
address = "127.0.0.1:%d"
admin_username = "bench"
admin_password = "bench"

[db]
host = %q
port = %s
user = %q
password = %q
database = %q
ssl_mode = "disable"
max_open = 25
max_idle = 25
max_lifetime = "300s"
`, port, u.Hostname(), dbPort, u.User.Username(), password, strings.TrimPrefix(u.Path, "/")), 0o600); err != nil {
		return err
	}
	install := exec.Command(bin, "--config", config, "--install", "--yes")
	install.Dir = *dir
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("listmonk --install: %v\n%s", err, out)
	}

	// Settings live in the database: the sink as the one SMTP server (no TLS, no authentication), the
	// campaign workers and their rate, and nothing that would reach beyond loopback (no update check, no
	// notification mails to the administrators, which would land in the sink beside the campaign).
	msgRate := *rate
	if msgRate == 0 {
		msgRate = 1_000_000
	}
	sinkHost, sinkPort, _ := net.SplitHostPort(mx.addr())
	smtp, _ := json.Marshal([]map[string]any{{"enabled": true, "host": sinkHost, "port": json.Number(sinkPort), "auth_protocol": "none",
		"username": "", "password": "", "hello_hostname": "listmonk.bench.example", "max_conns": *conns, "idle_timeout": "15s",
		"wait_timeout": "5s", "max_msg_retries": 2, "tls_enabled": false, "tls_skip_verify": false, "email_headers": []any{}}})
	conn, err := connect(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for key, value := range map[string]string{
		"smtp": string(smtp), "app.concurrency": fmt.Sprint(*concurrency), "app.message_rate": fmt.Sprint(msgRate),
		"app.check_updates": "false", "app.notify_emails": "[]", "app.root_url": fmt.Sprintf(`"http://127.0.0.1:%d"`, port),
	} {
		if tag, err := conn.Exec(ctx, `UPDATE settings SET value = $2::jsonb WHERE key = $1`, key, value); err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("listmonk setting %s: %v (%d rows)", key, err, tag.RowsAffected())
		}
	}

	lm := exec.Command(bin, "--config", config)
	lm.Dir = *dir
	var logs bytes.Buffer
	lm.Stdout, lm.Stderr = &logs, &logs
	if err := lm.Start(); err != nil {
		return err
	}
	defer func() {
		_ = lm.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = lm.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = lm.Process.Kill()
			<-done
		}
	}()
	api := &listmonkAPI{base: fmt.Sprintf("http://127.0.0.1:%d", port), client: &http.Client{Timeout: 60 * time.Second}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, _, err := api.call("GET", "/api/health", nil); err == nil && st == 200 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("listmonk did not answer /api/health:\n%s", logs.String())
		}
	}
	pid := lm.Process.Pid
	peakRSS := watchRSS(pid)
	defer peakRSS.stop()

	st, body, err := api.call("POST", "/api/lists", map[string]any{"name": "bench", "type": "private", "optin": "single"})
	if err != nil || st != 200 {
		return fmt.Errorf("create list: %d %s %v", st, body, err)
	}
	var list struct {
		Data struct{ ID int } `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return err
	}

	// Imports, one at a time (listmonk runs one import at once): each is timed from the upload to the
	// importer's "finished".
	imports := (*contacts + *importRows - 1) / *importRows
	var first, all time.Duration
	var csvBytes int
	for i := range imports {
		var doc strings.Builder
		doc.WriteString("email,name,attributes\n")
		for j := i * *importRows; j < min((i+1)**importRows, *contacts); j++ {
			r := audienceMember(j, *domains)
			attribs, _ := json.Marshal(map[string]any{"plan": r.plan, "city": r.city, "score": r.score})
			fmt.Fprintf(&doc, "%s,%s %s,\"%s\"\n", r.email, r.first, r.last, strings.ReplaceAll(string(attribs), `"`, `""`))
		}
		if i == 0 {
			csvBytes = doc.Len()
		}
		d, err := api.importCSV(doc.String(), list.Data.ID)
		if err != nil {
			return fmt.Errorf("import %d: %w\n%s", i, err, logs.String())
		}
		if i == 0 {
			first = d
		}
		all += d
	}
	var subscribers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM subscriber_lists WHERE list_id = $1 AND status <> 'unsubscribed'`, list.Data.ID).Scan(&subscribers); err != nil {
		return err
	}
	if subscribers != *contacts {
		return fmt.Errorf("the imports left %d subscribers on the list, want %d\n%s", subscribers, *contacts, logs.String())
	}

	// A campaign with the content of Postmill's broadcast benchmark, personalised the same way.
	st, body, err = api.call("POST", "/api/campaigns", map[string]any{"name": "bench", "subject": "Hello {{ .Subscriber.Name }}",
		"lists": []int{list.Data.ID}, "from_email": "News <news@bench.example>", "content_type": "html", "messenger": "email",
		"type": "regular", "body": `<p>Hello {{ .Subscriber.Name }}, your plan is {{ .Subscriber.Attribs.plan }}.</p>`})
	if err != nil || st != 200 {
		return fmt.Errorf("create campaign: %d %s %v", st, body, err)
	}
	var campaign struct {
		Data struct{ ID int } `json:"data"`
	}
	if err := json.Unmarshal(body, &campaign); err != nil {
		return err
	}
	cpu := startCPUMeter(ctx, *db, []int{pid})
	start := time.Now()
	mx.startClock(start)
	st, body, err = api.call("PUT", fmt.Sprintf("/api/campaigns/%d/status", campaign.Data.ID), map[string]any{"status": "running"})
	if err != nil || st != 200 {
		return fmt.Errorf("start campaign: %d %s %v", st, body, err)
	}
	for deadline := time.Now().Add(*timeout); mx.count.Load() < int64(*contacts) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	arrived := mx.count.Load()
	_, last := mx.curve()
	elapsed := last.Sub(start)
	cpuLine, totalCPU := cpu.report(ctx, arrived), cpu.perMessage(ctx, arrived)
	ceilingAfter, _, err := rsaMeasure(*rsaFor)
	if err != nil {
		return err
	}
	ceiling := (ceilingBefore + ceilingAfter) / 2
	dupes, noID, size := mx.stats()
	throttle := fmt.Sprintf("%d messages/s per worker", *rate)
	if *rate == 0 {
		throttle = "no rate limit"
	}
	fmt.Printf("listmonk %s: %s; %d workers, %s, %d SMTP connections; sink PIPELINING and CHUNKING offered\n",
		strings.TrimSpace(string(version)), machine(), *concurrency, throttle, *conns)
	fmt.Printf("  import: %d rows (%d bytes of CSV) in %s = %.0f rows/s; %d subscribers by %d imports in %s\n",
		min(*importRows, *contacts), csvBytes, first.Round(time.Millisecond), float64(min(*importRows, *contacts))/first.Seconds(),
		subscribers, imports, all.Round(time.Millisecond))
	fmt.Printf("  campaign: %d of %d arrived in %s (\"running\" → last arrival) = %.0f msg/s, not signed (mean %d bytes; %d duplicates, %d without Message-ID); peak RSS %d MiB\n",
		arrived, *contacts, elapsed.Round(time.Millisecond), float64(arrived)/elapsed.Seconds(), size, dupes, noID, peakRSS.peak()/1024)
	// listmonk picks a running campaign up on its next scan (every 5 s in v1.1.0), so the first message
	// leaves up to 5 s after "running": the rate from the first arrival is its sending alone.
	if first := mx.firstArrival(); !first.IsZero() && last.After(first) {
		fmt.Printf("  first arrival %s after \"running\"; from it to the last: %.0f msg/s\n",
			first.Sub(start).Round(time.Millisecond), float64(arrived)/last.Sub(first).Seconds())
	}
	fmt.Println(strings.Replace(cpuLine, "postmill", "listmonk", 1))
	fmt.Printf("  CPU a message in all: %.3f ms; RSA-2048 ceiling of this run %.0f signatures/s (listmonk's rate is %.0f%% of it)\n",
		float64(totalCPU.Microseconds())/1000, ceiling, 100*float64(arrived)/elapsed.Seconds()/ceiling)
	fmt.Printf("summary: listmonk campaign %d contacts %.0f msg/s unsigned (%.0f%% of RSA %.0f/s), peak RSS %d MiB; import %.0f rows/s, %d by %d imports in %s\n",
		*contacts, float64(arrived)/elapsed.Seconds(), 100*float64(arrived)/elapsed.Seconds()/ceiling, ceiling, peakRSS.peak()/1024,
		float64(min(*importRows, *contacts))/first.Seconds(), subscribers, imports, all.Round(time.Millisecond))
	if arrived < int64(*contacts) {
		return fmt.Errorf("only %d of %d campaign messages arrived\n%s", arrived, *contacts, logs.String())
	}
	return nil
}

// listmonkAPI calls listmonk's HTTP API as its administrator.
type listmonkAPI struct {
	base   string
	client *http.Client
}

func (a *listmonkAPI) do(req *http.Request) (int, []byte, error) {
	req.SetBasicAuth("bench", "bench")
	res, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, b, err
}

func (a *listmonkAPI) call(method, path string, body any) (int, []byte, error) {
	var rdr io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rdr)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return a.do(req)
}

// importCSV uploads a CSV of subscribers into a list and waits for the importer to finish; it returns the
// time from the upload to "finished".
func (a *listmonkAPI) importCSV(doc string, list int) (time.Duration, error) {
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	params, _ := json.Marshal(map[string]any{"mode": "subscribe", "subscription_status": "confirmed", "delim": ",", "lists": []int{list}, "overwrite": true})
	_ = w.WriteField("params", string(params))
	f, _ := w.CreateFormFile("file", "subscribers.csv")
	_, _ = io.WriteString(f, doc)
	_ = w.Close()
	req, err := http.NewRequest("POST", a.base+"/api/import/subscribers", &form)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	start := time.Now()
	st, body, err := a.do(req)
	if err != nil || st != 200 {
		return 0, fmt.Errorf("upload: %d %s %v", st, body, err)
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, body, err := a.call("GET", "/api/import/subscribers", nil)
		if err != nil || st != 200 {
			return 0, fmt.Errorf("import status: %d %s %v", st, body, err)
		}
		var s struct {
			Data struct {
				Status   string `json:"status"`
				Imported int    `json:"imported"`
				Total    int    `json:"total"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &s); err != nil {
			return 0, err
		}
		switch s.Data.Status {
		case "finished":
			d := time.Since(start)
			// Clear the finished import, or the next upload is refused as "already running".
			if st, body, err := a.call("DELETE", "/api/import/subscribers", nil); err != nil || st != 200 {
				return 0, fmt.Errorf("clear import: %d %s %v", st, body, err)
			}
			return d, nil
		case "failed":
			return 0, fmt.Errorf("import failed: %s", body)
		}
	}
	return 0, fmt.Errorf("import did not finish in 5 minutes")
}
