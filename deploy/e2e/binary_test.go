package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// mustBinary builds deploy/cmd/postmill once per test run, exactly as the README does.
func mustBinary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "postmill-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "postmill")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/postmill/postmill/deploy/cmd/postmill")
		cmd.Stderr = os.Stderr
		binErr = cmd.Run()
	})
	if binErr != nil {
		tb.Fatalf("building postmill: %v", binErr)
	}
	return binPath
}

// proc is a running postmill process.
type proc struct {
	cmd   *exec.Cmd
	addrs map[string]string // service → address, from the "listening" log lines
	mu    sync.Mutex        // guards logs and addrs, written by the goroutine reading stderr
	logs  *bytes.Buffer
	done  chan error
}

// MustServe runs `postmill serve --target=targets` with env and waits until its listeners are up.
func MustServe(tb testing.TB, targets string, env map[string]string) *proc {
	tb.Helper()
	p, err := serve(tb, targets, env)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// errPortTaken is serve's error when the process exited because an address it was given was taken
// meanwhile (a port freeAddr found free can be handed to another socket before the process binds it).
var errPortTaken = errors.New("an address was taken before postmill bound it")

// serve is MustServe with the early exit of the process as an error (errPortTaken when a listener's
// address was in use), so that a caller that chose the addresses can choose again.
func serve(tb testing.TB, targets string, env map[string]string) (*proc, error) {
	tb.Helper()
	cmd := exec.Command(mustBinary(tb), "serve", "--target="+targets)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, addrs: map[string]string{}, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil {
				if rec["msg"] == "listening" {
					p.addrs[rec["service"].(string)] = rec["addr"].(string)
				}
				if rec["msg"] == "postmill started" {
					once.Do(func() { close(started) })
				}
			}
			p.mu.Unlock()
		}
		p.done <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	select {
	case <-started:
	case err := <-p.done:
		if strings.Contains(p.logText(), "address already in use") {
			return nil, fmt.Errorf("%w: %v\n%s", errPortTaken, err, p.logText())
		}
		return nil, fmt.Errorf("postmill exited early: %v\n%s", err, p.logText())
	case <-time.After(90 * time.Second):
		return nil, fmt.Errorf("postmill did not start\n%s", p.logText())
	}
	return p, nil
}

// logText is everything the process logged so far.
func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func baseEnv(tb testing.TB, databaseURL string) map[string]string {
	return map[string]string{
		"POSTMILL_DATABASE_URL":    databaseURL,
		"POSTMILL_HTTP_ADDR":       "127.0.0.1:0",
		"POSTMILL_METRICS_ADDR":    "127.0.0.1:0",
		"POSTMILL_RPC_ADDR":        "127.0.0.1:0",
		"POSTMILL_SUBMISSION_ADDR": "127.0.0.1:0",
		"POSTMILL_SMTP_ADDR":       "127.0.0.1:0",
		"POSTMILL_SECRET_KEY":      randomHex(tb, 32),
		"POSTMILL_DATA_DIR":        tb.TempDir(),
		"POSTMILL_ADMIN_EMAILS":    "root@admin.example",
		"POSTMILL_TRUSTED_PROXIES": "127.0.0.1",

		// Admin routes without enrolling 2FA first; TestAdminRoutesRequireTwoFactor checks the default.
		"POSTMILL_ADMIN_REQUIRE_2FA": "false",
	}
}

// secretShapes matches refresh tokens (rt_ + 43 base64url) and JWTs (base64url JSON header, a dot, payload).
var secretShapes = regexp.MustCompile(`rt_[A-Za-z0-9_-]{40,}|eyJ[A-Za-z0-9_-]{10,}\.eyJ`)

// scenario runs the account flow a new user would try and returns a comparable transcript: status codes
// and the sorted field names of each answer (ids and tokens differ between runs; shapes must not).
func scenario(tb testing.TB, e *env) []string {
	tb.Helper()
	var out []string
	note := func(step string, r resp) {
		keys := make([]string, 0, len(r.body))
		for k := range r.body {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if r.list != nil {
			keys = append(keys, fmt.Sprintf("list:%d", len(r.list)))
		}
		extra := ""
		if s := r.str("error"); s != "" {
			extra = " error=" + s + " message=" + r.str("message")
		}
		out = append(out, fmt.Sprintf("%s %d %v%s", step, r.status, keys, extra))
	}
	a := e.MustSignup("split@example.com", "")
	note("dup-signup", e.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": nextClientIP()},
		body: map[string]any{"email": "split@example.com", "password": "long enough"}}))
	note("bad-signup", e.do(req{method: "POST", path: "/v1/auth/signup", header: map[string]string{"X-Forwarded-For": nextClientIP()},
		body: map[string]any{"email": "nope", "password": "x"}}))
	note("login-wrong", e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": "wrong password"}))
	note("login", e.post("/v1/auth/login", "", map[string]any{"email": a.email, "password": a.password}))
	note("refresh", e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": a.refresh}))
	note("refresh-reuse", e.post("/v1/auth/refresh", "", map[string]any{"refreshToken": a.refresh}))
	note("org", e.get("/v1/organization", a.access))
	note("enroll", e.post("/v1/auth/2fa/enroll", a.access, map[string]any{"password": a.password}))
	k := e.post("/v1/api-keys", a.access, map[string]any{"name": "k", "scopes": []string{"emails:send"}})
	note("key", k)
	note("key-bad-scope", e.post("/v1/api-keys", a.access, map[string]any{"name": "k", "scopes": []string{"nope"}}))
	note("keys", e.get("/v1/api-keys", a.access))
	note("scope-403", e.get("/v1/billing/subscription", k.str("token")))
	note("revoke", e.del("/v1/api-keys/"+k.str("id"), a.access))
	note("revoked-401", e.get("/v1/billing/subscription", k.str("token")))
	note("smtp", e.post("/v1/smtp-credentials", a.access, nil))
	note("smtps", e.get("/v1/smtp-credentials", a.access))
	note("admin-403", e.get("/v1/admin/organizations", a.access))
	note("unknown", e.get("/v1/nope", a.access))

	// Templates, suppressions and the feedback lists cross the Connect hop as well.
	wk := e.post("/v1/api-keys", a.access, map[string]any{"name": "w", "scopes": []string{"templates:write", "suppressions:write", "emails:read"}})
	tok := wk.str("token")
	tpl := e.post("/v1/templates", tok, map[string]any{"name": "split"})
	note("template", tpl)
	note("template-version", e.post("/v1/templates/"+tpl.str("id")+"/versions", tok, map[string]any{"subject": "Hi {{ name }}", "html": "<p>{{ name }}</p>"}))
	note("template-version-400", e.post("/v1/templates/"+tpl.str("id")+"/versions", tok, map[string]any{"subject": "Hi"}))
	note("template-publish-404", e.post("/v1/templates/"+tpl.str("id")+"/publish", tok, map[string]any{"version": 9}))
	note("template-publish", e.post("/v1/templates/"+tpl.str("id")+"/publish", tok, map[string]any{"version": 1}))
	note("template-get", e.get("/v1/templates/"+tpl.str("id"), a.access))
	note("suppression", e.post("/v1/suppressions", tok, map[string]any{"address": "x@example.com"}))
	note("suppression-global-403", e.post("/v1/suppressions", tok, map[string]any{"address": "x@example.com", "scope": "global"}))
	note("suppressions", e.get("/v1/suppressions", tok))
	note("bounces", e.get("/v1/bounces", tok))
	note("complaints-bad-cursor", e.get("/v1/complaints?cursor=nope", tok))
	return out
}

func TestSplitEdgeAndCoreAnswerLikeAll(t *testing.T) {
	t.Parallel()
	// One process with every tier.
	all := MustServe(t, "all", baseEnv(t, pgtest.URL(t)))
	eAll := &env{t: t, base: "http://" + all.addrs["edge-http"], http: &http.Client{Timeout: 30 * time.Second}}

	// The same platform as two processes: the core (with its database) and an edge that reaches it over
	// authenticated Connect.
	split := baseEnv(t, pgtest.URL(t))
	core := MustServe(t, "core", split)
	if core.addrs["edge-http"] != "" {
		t.Fatal("--target=core started the edge")
	}
	edgeEnv := map[string]string{}
	for k, v := range split {
		edgeEnv[k] = v
	}
	delete(edgeEnv, "POSTMILL_DATABASE_URL") // the edge needs no database
	edgeEnv["POSTMILL_CORE_URL"] = "http://" + core.addrs["core-rpc"]
	edgeProc := MustServe(t, "edge", edgeEnv)
	if edgeProc.addrs["core-rpc"] != "" {
		t.Fatal("--target=edge started the core")
	}
	eSplit := &env{t: t, base: "http://" + edgeProc.addrs["edge-http"], http: &http.Client{Timeout: 30 * time.Second}}
	expect(t, eSplit.get("/readyz", ""), 200)

	got, want := scenario(t, eSplit), scenario(t, eAll)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("split deployment answers differently\nsplit:\n%s\n\nall:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Secrets never reach the logs: the scenario used passwords, API keys, refresh tokens, access JWTs and
	// SMTP passwords; none of them, nor their recognisable prefixes, appears in any process's log.
	for name, p := range map[string]*proc{"all": all, "core": core, "edge": edgeProc} {
		logs := p.logText()
		for _, secret := range []string{"correct horse battery", "long enough", "svc_live_", "whsec_"} {
			if strings.Contains(logs, secret) {
				t.Errorf("the %s process logged %q", name, secret)
			}
		}
		if m := secretShapes.FindString(logs); m != "" {
			t.Errorf("the %s process logged a token: %q", name, m)
		}
	}

	// The core's RPC port refuses callers without the derived token.
	for _, auth := range []string{"", "Bearer wrong"} {
		hr, _ := http.NewRequest("POST", "http://"+core.addrs["core-rpc"]+"/postmill.organization.v1.OrganizationService/ListOrganizations", strings.NewReader("{}"))
		hr.Header.Set("Content-Type", "application/json")
		if auth != "" {
			hr.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "unauthenticated") {
			t.Errorf("rpc with %q: %d %s", auth, res.StatusCode, body)
		}
	}

	// An inbound-only process asks the core over Connect which recipients it takes: the feedback mailbox
	// yes, anything else no.
	inEnv := map[string]string{}
	for k, v := range edgeEnv {
		inEnv[k] = v
	}
	inProc := MustServe(t, "inbound", inEnv)
	mx, err := smtp.Dial(inProc.addrs["smtp-inbound"])
	if err != nil {
		t.Fatalf("dial the inbound process: %v", err)
	}
	if err := mx.Mail("", nil); err != nil {
		t.Fatal(err)
	}
	if err := mx.Rcpt("fbl@bounces.postmill.local", nil); err != nil {
		t.Errorf("RCPT of the feedback address through the split core: %v", err)
	}
	if err := mx.Rcpt("someone@bounce.example.com", nil); err == nil || !isSMTPCode(err, 550) {
		t.Errorf("RCPT of an unknown address: %v, want 550", err)
	}
	_ = mx.Quit()

	// Stopping the core makes the edge unready, not broken: /readyz answers from a check at most a second
	// old, so it turns 503 within moments.
	_ = core.cmd.Process.Signal(syscall.SIGTERM)
	<-core.done
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := eSplit.get("/readyz", "")
		if r.status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("readyz with the core gone: %d", r.status)
			break
		}
	}
}

func TestSIGTERMDrainsAndExitsCleanly(t *testing.T) {
	t.Parallel()
	p := MustServe(t, "all", baseEnv(t, pgtest.URL(t)))
	for _, svc := range []string{"edge-http", "core-rpc"} {
		if p.addrs[svc] == "" {
			t.Fatalf("no %s listener\n%s", svc, p.logText())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("did not stop after SIGTERM")
	}
	for _, want := range []string{"shutting down: draining", "tier stopped", "postmill stopped"} {
		if !strings.Contains(p.logText(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func TestMigrateCommandAndMissingDatabase(t *testing.T) {
	t.Parallel()
	bin := mustBinary(t)
	url := pgtest.URL(t)
	for range 2 { // twice: the second run has nothing to do
		cmd := exec.Command(bin, "migrate")
		cmd.Env = []string{"POSTMILL_DATABASE_URL=" + url, "POSTMILL_DATA_DIR=" + t.TempDir()}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("migrate: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"POSTMILL_DATA_DIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "POSTMILL_DATABASE_URL") {
		t.Errorf("serve without a database: %v %s", err, out)
	}
	cmd = exec.Command(bin, "serve", "--target=edge,bogus")
	cmd.Env = []string{"POSTMILL_DATA_DIR=" + t.TempDir()}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "bogus") {
		t.Errorf("unknown target: %v %s", err, out)
	}
}
