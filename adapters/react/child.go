package react

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/postmill/postmill/ports"
)

// ChildArg is the hidden first argument that makes a binary holding this package serve one isolated render
// instead of doing its usual work: its main (or a test binary's TestMain) must call ServeChild when
// os.Args[1] is ChildArg, before it reads any configuration. It is not a command users type, so usage
// texts do not list it.
const ChildArg = "__postmill-react-render"

const (
	// childEnvGOMAXPROCS bounds the child's Go scheduler: one render thread, the watchdog and the garbage
	// collector need no more, and every OS thread costs address space under the child's limit.
	childEnvGOMAXPROCS = "2"
	// childStartAllowance is added to WallTimeLimit for the parent's own kill of a child: the child's start
	// (exec, the Go runtime, compiling the bundle) and the watchdog's abandonAfter happen outside the
	// limit the child measures, and the child's own message is the more precise one.
	childStartAllowance = 3 * time.Second
	// maxChildRequest caps what ServeChild reads before it has its limits: the parent writes the source
	// (at most MaxSourceBytes) and the bounds, so this is only a guard against a stray writer.
	maxChildRequest = 64 << 20
	// maxChildStderr is how much of the child's standard error the parent keeps, from the start: a Go fatal
	// error names the failure in its first lines, before the goroutine stacks.
	maxChildStderr = 4 << 10
)

// childRequest is what the parent writes to the child's standard input: one JSON object, then EOF.
type childRequest struct {
	Config Config `json:"config"`
	Source string `json:"source"`
}

// childResult is the one JSON object a child writes to its standard output: the HTML, or the error.
type childResult struct {
	HTML  string      `json:"html,omitempty"`
	Error *childError `json:"error,omitempty"`
}

// childError carries a ports.Error's code and message across the process boundary.
type childError struct {
	Code    ports.Code `json:"code"`
	Message string     `json:"message"`
}

// ServeChild is the child side of an isolated render. It closes any descriptor it inherited beyond stdin,
// stdout and stderr, reads one request from stdin, puts the hard limits on its own process (see
// limitChild: address space and CPU time; both steps on Linux only), renders in process with the existing
// watchdogs and writes one JSON result to stdout. Template failures are results, not
// errors: the returned error says only that no result could be written, and the caller then exits with a
// non-zero status. The caller must exit soon after ServeChild returns, since a runtime abandoned in a
// native call may still be running.
func ServeChild(stdin io.Reader, stdout io.Writer) error {
	return serveChild(stdin, stdout, nil)
}

// serveChild is ServeChild with a hook that replaces the render once the limits are set (tests only).
func serveChild(stdin io.Reader, stdout io.Writer, hook func()) error {
	if err := closeInheritedFiles(); err != nil {
		return writeChildResult(stdout, "", fmt.Errorf("react: close inherited files: %w", err))
	}
	var req childRequest
	if err := json.NewDecoder(io.LimitReader(stdin, maxChildRequest)).Decode(&req); err != nil {
		return writeChildResult(stdout, "", fmt.Errorf("react: read render request: %w", err))
	}
	cfg := req.Config
	cfg.Isolate, cfg.MaxConcurrent = false, 1
	r, err := New(cfg)
	if err != nil {
		return writeChildResult(stdout, "", err)
	}
	// The limits come after compiling the bundle (trusted work, the same in every render) and before
	// anything touches the template's source.
	if err := limitChild(r.cfg); err != nil {
		return writeChildResult(stdout, "", fmt.Errorf("react: limit the render process: %w", err))
	}
	if hook != nil {
		hook()
	}
	html, err := r.RenderReact(context.Background(), req.Source)
	return writeChildResult(stdout, html, err)
}

func writeChildResult(w io.Writer, html string, err error) error {
	res := childResult{HTML: html}
	if err != nil {
		res = childResult{Error: &childError{Code: ports.ErrorCode(err), Message: err.Error()}}
		var e *ports.Error
		if errors.As(err, &e) {
			res.Error.Message = e.Message
		}
		if res.Error.Code == "" {
			res.Error.Code = ports.CodeInternal
		}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("react: write render result: %w", err)
	}
	return nil
}

// childEnv is the child's whole environment: nothing of the parent's (no secret keys, database URLs or
// proxies), only what shapes the Go runtime.
func childEnv() []string {
	return []string{
		"GOMAXPROCS=" + childEnvGOMAXPROCS,
		// In a binary built with cgo, glibc gives threads that call malloc arenas of their own, each a
		// 64 MiB reservation of address space: one arena keeps the child's address space predictable.
		"MALLOC_ARENA_MAX=1",
	}
}

// childCmd is the command of one isolated render. Its environment is set (a nil Env would inherit the
// parent's). It is handed no file descriptors beyond stdin, stdout and stderr: ExtraFiles is empty and Go
// opens every descriptor of its own close-on-exec; one the parent inherited without close-on-exec would
// still pass, and the child closes it (closeInheritedFiles).
func (r *Renderer) childCmd(req []byte, stdout, stderr io.Writer) *exec.Cmd {
	cmd := exec.Command(r.command[0], r.command[1:]...)
	cmd.Env = childEnv()
	cmd.Dir = string(os.PathSeparator)
	cmd.Stdin = bytes.NewReader(req)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = childSysProcAttr()
	// The child never starts processes of its own, so its pipes close when it exits; this only bounds a
	// wait on them if that ever changed.
	cmd.WaitDelay = time.Second
	return cmd
}

// renderInChild runs one render in a child process (see the package documentation). The caller holds a
// slot, which it gives back when renderInChild returns: by then the child has exited.
func (r *Renderer) renderInChild(ctx context.Context, source string) (string, error) {
	req, err := json.Marshal(childRequest{Config: r.cfg, Source: source})
	if err != nil {
		return "", fmt.Errorf("react: encode render request: %w", err)
	}
	// json escapes at most every byte of the HTML six times (\u00XX); more is not a result of the child's.
	stdout := &cappedBuffer{max: 6*r.cfg.MaxOutputBytes + 64<<10}
	stderr := &cappedBuffer{max: maxChildStderr}
	cmd := r.childCmd(req, stdout, stderr)

	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		// Pdeathsig (Linux) fires when the thread that started the child exits, not the process: keep this
		// goroutine on its thread until the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return "", fmt.Errorf("react: start the render process: %w", err)
	}

	wall := time.NewTimer(r.cfg.WallTimeLimit + r.childGrace)
	defer wall.Stop()
	var stop error
	select {
	case <-waited:
	case <-wall.C:
		stop = invalid("render exceeded the %v time limit", r.cfg.WallTimeLimit)
	case <-ctx.Done():
		stop = fmt.Errorf("react: render: %w", ctx.Err())
	}
	if stop != nil {
		_ = cmd.Process.Kill() // fails only when the child has already exited
		<-waited
		return "", stop
	}
	return r.childOutcome(cmd.ProcessState, stdout, stderr)
}

// childOutcome reads what a child that exited by itself left: its result, or the way it died.
func (r *Renderer) childOutcome(state *os.ProcessState, stdout, stderr *cappedBuffer) (string, error) {
	var res childResult
	if !stdout.truncated && json.Unmarshal(stdout.buf.Bytes(), &res) == nil {
		switch {
		case res.Error != nil:
			return "", ports.Errorf(res.Error.Code, "%s", res.Error.Message)
		case res.HTML != "":
			return res.HTML, nil
		}
	}
	if state.Success() {
		return "", fmt.Errorf("react: the render process exited without a result (%d bytes of output): %s",
			stdout.buf.Len(), bytes.TrimSpace(stderr.buf.Bytes()))
	}
	// The kernel kills a process that reaches its RLIMIT_CPU with SIGKILL (Go ignores the SIGXCPU sent at
	// the soft limit); nothing else here sends the child a signal once it runs.
	if killedAtCPULimit(state) && state.UserTime()+state.SystemTime() >= r.cfg.CPUTimeLimit {
		return "", invalid("render exceeded the %v CPU time limit", r.cfg.CPUTimeLimit)
	}
	// Past its address-space limit, a Go process cannot map memory and dies with a fatal "out of
	// memory" (exit status 2); a failed thread creation or a stack that cannot grow ends the same way.
	return "", invalid("render exceeded the %d MiB memory limit", r.cfg.MemoryLimit>>20)
}

// cappedBuffer keeps the first max bytes written to it and drops the rest, so that a child writing without
// end can neither grow the parent's heap nor block on a full pipe.
type cappedBuffer struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		b.truncated = true
		return len(p), nil
	}
	return b.buf.Write(p)
}
