package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// The shell examples of README.md and docs/*.md are run against the real binary in local mode, so that
// a doc that stops matching the code fails the build.
//
// The rules a doc follows (docs/testing.md, Doc examples, says the same for writers):
//   - Every ```sh, ```bash and ```console block is run, in order, one bash process per file, so shell
//     variables carry from one block to the next. In a console block only the lines starting with "$ "
//     are commands.
//   - `<!-- not run: reason -->` on the line before a block excludes it; the reason is required.
//   - A line `[VAR=value …] make run` is not run: the test starts Postmill itself, as make run would
//     (local mode), with those assignments added to its environment.
//   - Every curl answering 400 or more fails the example (the test runs curl with --fail-with-body), unless
//     the line before the block says `<!-- run: HTTP errors expected -->`.
//   - `# expect: TEXT` inside a block: the block's output (stdout and stderr) must contain TEXT.
//   - The fixed addresses the docs use are replaced by free ones of the test's instance (docsAddrs).
//
// Files whose examples are an operator's commands rather than requests to a running instance are listed
// in docsNotCovered with the reason.

// docsNotCovered are the doc files whose shell blocks the test does not run, and why.
var docsNotCovered = map[string]string{
	"docs/operations.md": "building, migrating and splitting the binary across machines, TLS files and secrets: commands for an operator's machines",
	"docs/benchmarks.md": "the benchmark harness, which takes minutes and a machine of its own",
	"docs/testing.md":    "running test suites and fuzzers, which this test is part of",
}

// docsAddrs are the addresses the docs name, as make run's defaults; each is replaced by a free port.
var docsAddrs = []struct{ doc, env string }{
	{"127.0.0.1:8080", "POSTMILL_HTTP_ADDR"},
	{"127.0.0.1:2525", "POSTMILL_SMTP_ADDR"},
	{"127.0.0.1:1587", "POSTMILL_SUBMISSION_ADDR"},
	{"127.0.0.1:1025", "POSTMILL_CATCHER_ADDR"},
	{"127.0.0.1:8765", ""}, // the webhook receiver the walkthroughs start
}

// docBlock is one shell example.
type docBlock struct {
	line    int      // of the opening fence, 1-based
	lines   []string // the commands, make run lines removed
	expects []string
	httpErr bool // HTTP errors expected
}

var (
	fenceOpen = regexp.MustCompile("^```(sh|bash|console)\\s*$")
	notRun    = regexp.MustCompile(`^<!--\s*not run:\s*(\S.*?)\s*-->$`)
	httpErrOK = regexp.MustCompile(`^<!--\s*run:\s*HTTP errors expected\s*-->$`)
	makeRun   = regexp.MustCompile(`^\s*((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)make run\b`)
	expectRe  = regexp.MustCompile(`^\s*# expect: (.+?)\s*$`)
)

// parseDoc returns the runnable blocks of a Markdown file and the environment its make run lines ask for.
func parseDoc(t *testing.T, path string) ([]docBlock, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks  []docBlock
		env     = map[string]string{}
		prev    string // the last non-blank line outside a block
		cur     *docBlock
		console bool
		n       int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		if cur == nil {
			if m := fenceOpen.FindStringSubmatch(line); m != nil {
				if strings.HasPrefix(prev, "<!--") && strings.Contains(prev, "not run") && !notRun.MatchString(prev) {
					t.Errorf("%s:%d: a not-run marker needs a reason: %s", path, n-1, prev)
				}
				cur = &docBlock{line: n, httpErr: httpErrOK.MatchString(prev)}
				console = m[1] == "console"
				if notRun.MatchString(prev) {
					cur = &docBlock{line: -1} // skipped until its closing fence
				}
				continue
			}
			if strings.TrimSpace(line) != "" {
				prev = strings.TrimSpace(line)
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			if cur.line > 0 {
				blocks = append(blocks, *cur)
			}
			cur, prev = nil, ""
			continue
		}
		if cur.line < 0 {
			continue
		}
		if console {
			cmd, ok := strings.CutPrefix(line, "$ ")
			if !ok {
				continue
			}
			line = cmd
		}
		if m := expectRe.FindStringSubmatch(line); m != nil {
			cur.expects = append(cur.expects, m[1])
		}
		if m := makeRun.FindStringSubmatch(line); m != nil {
			for _, kv := range strings.Fields(m[1]) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			continue
		}
		cur.lines = append(cur.lines, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s: a code block is never closed", path)
	}
	return blocks, env
}

// TestDocsExamplesRun runs every doc file's shell examples against a local-mode instance of its own.
func TestDocsExamplesRun(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the doc examples need %s", tool)
			}
			t.Skipf("the doc examples need %s, which is not installed", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	covered := 0
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		if _, skip := docsNotCovered[rel]; skip {
			continue
		}
		blocks, env := parseDoc(t, path)
		if len(blocks) == 0 {
			continue
		}
		covered++
		t.Run(strings.TrimSuffix(filepath.Base(rel), ".md"), func(t *testing.T) {
			t.Parallel()
			runDocExamples(t, rel, blocks, env)
		})
	}
	// The files the brief of this test names must keep examples; a file emptied of them would pass.
	if covered < 7 {
		t.Errorf("only %d doc files have runnable examples", covered)
	}
}

// curlFailing makes an HTTP error fail the example: curl's --fail-with-body, unless the example already
// chose -f or --fail (curl refuses both together).
const curlFailing = `curl() {
	local a
	for a in "$@"; do
		case $a in --fail* | -[!-]*f*) command curl "$@"; return ;; esac
	done
	command curl --fail-with-body "$@"
}
`

// runDocExamples starts Postmill in local mode and runs one file's blocks in one bash process.
func runDocExamples(t *testing.T, rel string, blocks []docBlock, extra map[string]string) {
	env := baseEnv(t, pgtest.URL(t))
	env["POSTMILL_LOCAL"] = "true"
	env["POSTMILL_METRICS_ADDR"] = "127.0.0.1:0"
	env["POSTMILL_TRUSTED_PROXIES"] = ""
	var (
		p     *proc
		subst map[string]string
	)
	// The examples name fixed addresses, so each gets a free port; a port can be taken between the check
	// and the bind, and then the addresses are chosen again.
	for attempt := 1; ; attempt++ {
		env["POSTMILL_LOCAL_DNS_ADDR"] = freeAddr(t)
		subst = map[string]string{}
		for _, a := range docsAddrs {
			addr := freeAddr(t)
			subst[a.doc] = addr
			if a.env != "" {
				env[a.env] = addr
			}
		}
		for k, v := range extra {
			env[k] = v
		}
		var err error
		if p, err = serve(t, "all", env); err == nil {
			break
		} else if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v", attempt, errPortTaken)
	}

	dir := t.TempDir()
	var script strings.Builder
	script.WriteString("set -euo pipefail\ncd " + strconv.Quote(dir) + "\n")
	for i, b := range blocks {
		if b.httpErr {
			script.WriteString("curl() { command curl \"$@\"; }\n")
		} else {
			script.WriteString(curlFailing)
		}
		fmt.Fprintf(&script, "echo '@@docs-block %d@@'\n", i)
		text := strings.Join(b.lines, "\n")
		for doc, addr := range subst {
			text = strings.ReplaceAll(text, doc, addr)
		}
		script.WriteString(text + "\n")
	}
	fmt.Fprintf(&script, "echo '@@docs-block %d@@'\n", len(blocks))

	scriptPath := filepath.Join(dir, "examples.sh")
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The output goes through a pipe (an example may write to /dev/stderr, which would truncate a file);
	// background processes the examples start hold it open until the process group is killed.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var outBuf strings.Builder
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			outBuf.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	cmd := exec.Command("bash", scriptPath)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		runErr = fmt.Errorf("still running after 2 minutes")
	}
	// Receivers the examples started in the background go with the process group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Fatal("the examples' output pipe stayed open after their processes were killed")
	}
	pr.Close()
	t.Logf("%s: %d blocks in %s", rel, len(blocks), time.Since(start).Round(100*time.Millisecond))

	raw := outBuf.String()
	segments := splitDocOutput(raw)
	last := -1
	for i := range blocks {
		if _, ok := segments[i]; ok {
			last = i
		}
	}
	_, finished := segments[len(blocks)]
	if runErr != nil || !finished {
		b := blocks[max(last, 0)]
		var files strings.Builder // what the examples wrote, such as a webhook receiver's log
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			fmt.Fprintf(&files, "--- %s (tail):\n%s\n", filepath.Base(l), tail(string(data), 20))
		}
		t.Fatalf("%s:%d: the example failed (%v); its output:\n%s\n%s--- postmill's log (tail):\n%s",
			rel, b.line, runErr, segments[last], files.String(), tail(p.logText(), 40))
	}
	for i, b := range blocks {
		for _, want := range b.expects {
			if !strings.Contains(segments[i], want) {
				t.Errorf("%s:%d: the output lacks %q:\n%s", rel, b.line, want, segments[i])
			}
		}
	}
}

// splitDocOutput cuts the script's output at the block markers: block index → its output. The script
// ends with the marker of index len(blocks), so that index is present when it ran to its end.
func splitDocOutput(out string) map[int]string {
	segs := map[int]string{}
	cur := -1
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "@@docs-block "); ok {
			if cur >= 0 {
				segs[cur] = b.String()
			}
			b.Reset()
			cur, _ = strconv.Atoi(strings.TrimSuffix(n, "@@"))
			continue
		}
		b.WriteString(line)
	}
	if cur >= 0 {
		segs[cur] = b.String()
	}
	return segs
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
