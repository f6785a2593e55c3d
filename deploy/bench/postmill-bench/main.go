// Command postmill-bench measures Postmill end to end on this machine: it starts the real binary against a
// PostgreSQL database, a DNS server of its own (so a sending domain verifies) and, for the MTA run, Postfix's
// smtp-sink as every recipient's MX, then drives the public API. It prints one result line per run and is
// what docs/benchmarks.md reports. Traffic stays on loopback.
//
//	postmill-bench send -bin bin/postmill -db URL [-workers 64] [-duration 20s] [-recipients 1]
//	postmill-bench mta  -bin bin/postmill -db URL -sink 127.0.0.1:PORT [-messages 5000]
//	postmill-bench webhooks -bin bin/postmill -db URL [-endpoints 4] [-sends 4000] [-rate 0]
//	postmill-bench e2e  -bin bin/postmill -db URL [-sends 20000] [-clients 64] [-shape all|split] [-sample]
//	postmill-bench throttle -bin bin/postmill -db URL [-messages 3000]
//	postmill-bench rsa  [-duration 3s]
package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: postmill-bench send|mta|e2e|webhooks|broadcast|throttle|import|listmonk|rsa [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "send":
		err = runSend(os.Args[2:])
	case "mta":
		err = runMTA(os.Args[2:])
	case "rsa":
		err = runRSA(os.Args[2:])
	case "e2e":
		err = runE2E(os.Args[2:])
	case "webhooks":
		err = runWebhooks(os.Args[2:])
	case "broadcast":
		err = runBroadcast(os.Args[2:])
	case "throttle":
		err = runThrottle(os.Args[2:])
	case "import":
		err = runImport(os.Args[2:])
	case "listmonk":
		err = runListmonk(os.Args[2:])
	default:
		err = fmt.Errorf("unknown run %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "postmill-bench:", err)
		os.Exit(1)
	}
}

// zone is a tiny authoritative DNS server for the benchmark's sending and recipient domains.
type zone struct {
	mu    sync.Mutex
	txt   map[string][]string
	cname map[string]string
	mx    map[string]string
	a     map[string]net.IP
	srv   *dns.Server
	addr  string
}

func startZone() (*zone, error) {
	z := &zone{txt: map[string][]string{}, cname: map[string]string{}, mx: map[string]string{}, a: map[string]net.IP{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	z.addr = pc.LocalAddr().String()
	z.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(z.serve)}
	go func() { _ = z.srv.ActivateAndServe() }()
	return z, nil
}

func (z *zone) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, q := range r.Question {
		name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 60}
		switch q.Qtype {
		case dns.TypeTXT:
			for _, v := range z.txt[name] {
				var chunks []string
				for len(v) > 255 {
					chunks, v = append(chunks, v[:255]), v[255:]
				}
				hdr.Rrtype = dns.TypeTXT
				m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr, Txt: append(chunks, v)})
			}
		case dns.TypeCNAME:
			if t, ok := z.cname[name]; ok {
				hdr.Rrtype = dns.TypeCNAME
				m.Answer = append(m.Answer, &dns.CNAME{Hdr: hdr, Target: dns.Fqdn(t)})
			}
		case dns.TypeMX:
			if t, ok := z.mx[name]; ok {
				hdr.Rrtype = dns.TypeMX
				m.Answer = append(m.Answer, &dns.MX{Hdr: hdr, Preference: 10, Mx: dns.Fqdn(t)})
			}
		case dns.TypeA:
			if ip, ok := z.a[name]; ok {
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip})
			}
		}
	}
	_ = w.WriteMsg(m)
}

// platform is a running postmill with an organization, a verified domain and an API key.
type platform struct {
	cmd    *exec.Cmd
	base   string
	key    string
	domain string
	// access is the owner's session token and domainID the sending domain, for Session routes.
	access   string
	domainID string
	client   *http.Client
	logs     *bytes.Buffer
	// dataDir is the process's POSTMILL_DATA_DIR, removed by stop.
	dataDir string
}

type platformOpts struct {
	bin, db, targets string
	env              []string
	zone             *zone
}

func startPlatform(o platformOpts) (*platform, error) {
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	rpcPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", "postmill-bench-")
	if err != nil {
		return nil, err
	}
	p := &platform{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort), logs: &bytes.Buffer{}, dataDir: dataDir,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}}}
	p.cmd = exec.Command(o.bin, "serve", "--target="+o.targets)
	p.cmd.Env = append(os.Environ(),
		"POSTMILL_DATABASE_URL="+o.db,
		fmt.Sprintf("POSTMILL_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("POSTMILL_RPC_ADDR=127.0.0.1:%d", rpcPort),
		"POSTMILL_METRICS_ADDR=127.0.0.1:0", // several processes run side by side in the split shape
		"POSTMILL_DATA_DIR="+dataDir,
		"POSTMILL_SECRET_KEY=bench-secret-key-0123456789abcdef",
		"POSTMILL_DNS_RESOLVER="+o.zone.addr,
		"POSTMILL_DEFAULT_MONTHLY_LIMIT=0",
		"POSTMILL_LOG_LEVEL=warn",
		"POSTMILL_SUBMISSION_ADDR=127.0.0.1:0",
		"POSTMILL_SMTP_ADDR=127.0.0.1:0",
	)
	p.cmd.Env = append(p.cmd.Env, o.env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		_ = os.RemoveAll(dataDir)
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := p.client.Get(p.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("postmill did not become ready:\n%s", p.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p, nil
}

// reportLogs prints how many warnings and errors the platform logged, with the first few, so a figure is
// never reported without saying that something went wrong meanwhile.
func (p *platform) reportLogs() {
	var n int
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			if n < 5 {
				fmt.Println("  log:", line)
			}
			n++
		}
	}
	if n > 0 {
		fmt.Printf("  (%d warnings and errors logged)\n", n)
	}
}

func (p *platform) stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	if p.dataDir != "" {
		_ = os.RemoveAll(p.dataDir)
	}
}

func (p *platform) call(method, path, token string, body any) (int, map[string]any, error) {
	var rdr io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rdr = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rdr)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out, nil
}

// setup signs up, adds and verifies a sending domain (publishing its records in the zone) and creates a key.
func (p *platform) setup(z *zone) error {
	st, body, err := p.call("POST", "/v1/auth/signup", "", map[string]any{"email": "bench@bench.example", "password": "benchmark password"})
	if err != nil || st != 201 {
		return fmt.Errorf("signup: %d %v %v", st, body, err)
	}
	access := body["accessToken"].(string)
	p.domain = "bench.example"
	st, body, err = p.call("POST", "/v1/domains", access, map[string]any{"domain": p.domain})
	if err != nil || st != 201 {
		return fmt.Errorf("domain: %d %v %v", st, body, err)
	}
	z.mu.Lock()
	for _, r := range body["records"].([]any) {
		rec := r.(map[string]any)
		host, value := rec["host"].(string), rec["value"].(string)
		switch rec["type"] {
		case "SPF", "DKIM", "DMARC":
			z.txt[host] = append(z.txt[host], value)
		default:
			z.cname[host] = value
		}
	}
	z.mu.Unlock()
	p.access, p.domainID = access, body["id"].(string)
	st, body, err = p.call("POST", "/v1/domains/"+body["id"].(string)+"/verify", access, nil)
	if err != nil || st != 201 || body["status"] != "verified" {
		return fmt.Errorf("verify: %d %v %v", st, body, err)
	}
	st, body, err = p.call("POST", "/v1/api-keys", access, map[string]any{"name": "bench", "scopes": []string{"*"}})
	if err != nil || st != 201 {
		return fmt.Errorf("key: %d %v %v", st, body, err)
	}
	p.key = body["token"].(string)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func resetDatabase(ctx context.Context, url string) error {
	conn, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
	return err
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func machine() string {
	return fmt.Sprintf("%d cores (GOMAXPROCS %d), %s/%s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
}

// runSend measures accepted sends per second through POST /v1/emails: the edge and core tiers only, so the
// figure is the accept path (validation, checks, one transaction) and not delivery.
func runSend(args []string) error {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	workers := fs.Int("workers", 64, "concurrent clients")
	duration := fs.Duration("duration", 20*time.Second, "measured time")
	warmup := fs.Duration("warmup", 3*time.Second, "unmeasured warm-up")
	recipients := fs.Int("recipients", 1, "recipients per message")
	withTemplate := fs.Bool("template", false, "send through a published template with ten variables instead of inline bodies")
	extraEnv := fs.String("env", "", "extra NAME=VALUE settings for the platform, comma-separated (e.g. POSTMILL_REQUEST_LOG=false; figures with any are not the defaults)")
	_ = fs.Parse(args)
	var env []string
	settings := "default settings"
	if *extraEnv != "" {
		env, settings = strings.Split(*extraEnv, ","), "settings "+*extraEnv
	}
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	z, err := startZone()
	if err != nil {
		return err
	}
	p, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: "edge,core", zone: z, env: env})
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.setup(z); err != nil {
		return err
	}
	to := make([]string, *recipients)
	for i := range to {
		to[i] = fmt.Sprintf("user%d@rcpt.example", i)
	}
	send := map[string]any{"from": "bench@" + p.domain, "to": to, "subject": "Benchmark", "text": "Hello from the benchmark.", "html": "<p>Hello from the benchmark.</p>"}
	if *withTemplate {
		id, vars, err := p.benchTemplate()
		if err != nil {
			return err
		}
		send = map[string]any{"from": "bench@" + p.domain, "to": to, "template": map[string]any{"id": id, "variables": vars}}
	}
	body, _ := json.Marshal(send)

	var (
		measuring atomic.Bool
		ok, bad   atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for {
				select {
				case <-stop:
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
					return
				default:
				}
				req, _ := http.NewRequest("POST", p.base+"/v1/emails", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+p.key)
				t0 := time.Now()
				res, err := p.client.Do(req)
				d := time.Since(t0)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				if !measuring.Load() {
					continue
				}
				if err != nil || res.StatusCode != 202 {
					bad.Add(1)
					continue
				}
				ok.Add(1)
				local = append(local, d)
			}
		}()
	}
	time.Sleep(*warmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(*duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	kind := "inline bodies"
	if *withTemplate {
		kind = "a published template, 10 variables"
	}
	fmt.Printf("send: %d accepted in %.1fs = %.0f sends/s (%d recipients each, %s, %d workers, %s), p50 %.2fms, p99 %.2fms, errors %d; %s\n",
		ok.Load(), elapsed.Seconds(), float64(ok.Load())/elapsed.Seconds(), *recipients, kind, *workers, settings,
		ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)), bad.Load(), machine())
	return nil
}

// benchTemplate creates and publishes a template of a typical transactional shape (about 3 KB of HTML with
// ten placeholders, some in links) and returns its id and the variables a send passes.
func (p *platform) benchTemplate() (string, map[string]any, error) {
	st, body, err := p.call("POST", "/v1/templates", p.key, map[string]any{"name": "receipt"})
	if err != nil || st != 201 {
		return "", nil, fmt.Errorf("template: %d %v %v", st, body, err)
	}
	id := body["id"].(string)
	var html strings.Builder
	html.WriteString(`<html><body><h1>Thanks, {{ customer.firstName }}!</h1><p>Order {{ order.id }} of {{ order.date }}.</p><table>`)
	for i := range 20 {
		fmt.Fprintf(&html, `<tr><td style="padding:4px">Item %d</td><td style="padding:4px;text-align:right">1</td></tr>`, i)
	}
	html.WriteString(`</table><p>Total {{ order.total }} {{ order.currency }}, shipped to {{ address.city }}.</p>` +
		`<a href="{{ links.track }}">Track it</a> <a href="{{ links.account }}">Your account</a>` +
		`<p>{{ support.phone }}</p></body></html>`)
	st, body, err = p.call("POST", "/v1/templates/"+id+"/versions", p.key, map[string]any{
		"subject": "Your order {{ order.id }}", "html": html.String(), "text": "Order {{ order.id }}: {{ order.total }}"})
	if err != nil || st != 201 {
		return "", nil, fmt.Errorf("template version: %d %v %v", st, body, err)
	}
	if st, body, err = p.call("POST", "/v1/templates/"+id+"/publish", p.key, map[string]any{"version": 1}); err != nil || st != 201 {
		return "", nil, fmt.Errorf("publish: %d %v %v", st, body, err)
	}
	vars := map[string]any{
		"customer": map[string]any{"firstName": "Ada"},
		"order":    map[string]any{"id": "A-1042", "date": "2026-11-21", "total": 129.5, "currency": "EUR"},
		"address":  map[string]any{"city": "Lyon"},
		"links":    map[string]any{"track": "https://shop.example/track/A-1042", "account": "https://shop.example/account"},
		"support":  map[string]any{"phone": "+33 4 00 00 00 00"},
	}
	return id, vars, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runRSA measures RSA-2048 PKCS#1 v1.5 signatures per second on every core: the ceiling of DKIM signing.
func runRSA(args []string) error {
	fs := flag.NewFlagSet("rsa", flag.ExitOnError)
	duration := fs.Duration("duration", 3*time.Second, "measured time")
	_ = fs.Parse(args)
	n, err := rsaSignatures(*duration)
	if err != nil {
		return err
	}
	fmt.Printf("rsa: %.0f RSA-2048 signatures/s; %s\n", n, machine())
	return nil
}

// rsaSignatures returns RSA-2048 PKCS#1 v1.5 signatures per second over d, one signer per core.
func rsaSignatures(d time.Duration) (float64, error) {
	n, _, err := rsaMeasure(d)
	return n, err
}

// rsaMeasure returns RSA-2048 PKCS#1 v1.5 signatures per second over d, one signer per core, and the CPU
// time one signature costs (this process's CPU time over the signatures made). The rate depends on what
// else the machine runs; the CPU cost hardly does, so it stays a fair yardstick on a busy machine.
func rsaMeasure(d time.Duration) (perSecond float64, cpuPerSignature time.Duration, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return 0, 0, err
	}
	digest := sha256.Sum256([]byte("postmill"))
	var n atomic.Int64
	cpu0 := selfCPU()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, digest[:]); err == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	cpu := selfCPU() - cpu0
	if n.Load() == 0 {
		return 0, 0, errors.New("no signature made")
	}
	return float64(n.Load()) / d.Seconds(), cpu / time.Duration(n.Load()), nil
}
