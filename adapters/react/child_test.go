package react

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/postmill/postmill/ports"
)

// MustNewIsolated returns an isolated Renderer for cfg whose children run this test binary in mode (see
// childMode; "" is ServeChild).
func MustNewIsolated(tb testing.TB, cfg Config, mode string) *Renderer {
	tb.Helper()
	cfg.Isolate = true
	r := MustNew(tb, cfg)
	if mode != "" {
		r.command = append(slices.Clip(r.command), mode)
	}
	return r
}

// goMapped is the memory the Go runtime has mapped from the operating system for this process, released
// pages included: it never shrinks by much, so it shows whether an allocation ever happened here.
func goMapped() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestRenderIsolatedRunaways(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the address-space limit is set on Linux only")
	}
	r := MustNewIsolated(t, Config{MemoryLimit: 64 << 20, CPUTimeLimit: 20 * time.Second}, "")
	before := goMapped()
	for name, source := range map[string]string{
		// One native call each, out of the reach of the heap watchdog: in this process they would
		// allocate gigabytes (16 GB of array elements; 4 Gi characters) before anything could stop them.
		"sparse spread":   "export default function X() { const a: number[] = []; a.length = 1e9; const b = [...a]; return <p>{b.length}</p>; }\n",
		"replace blow-up": "export default function X() { const s = 'x'.repeat(1 << 16); return <p>{s.replace(/x/g, 'y'.repeat(1 << 16)).length}</p>; }\n",
		"concat loop":     "export default function X() { let s = 'x'.repeat(1 << 20); for (;;) s = s + s; }\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msg := MustFailRender(t, r, source)
			if msg != "reactSource: render exceeded the 64 MiB memory limit" {
				t.Errorf("message %q", msg)
			}
		})
	}
	t.Cleanup(func() {
		// Other tests render in this process meanwhile (the in-process memory test peaks at a few
		// hundred megabytes), hence the margin; a runaway that ran here would pass it many times over.
		if grown := goMapped() - before; grown > 1<<30 {
			t.Errorf("this process mapped %d MiB more during the runaway renders", grown>>20)
		}
	})
}

func TestRenderIsolatedWithinMemoryLimit(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("the race detector's shadow memory counts against the child's address space")
	}
	// A render that keeps a good part of MemoryLimit live fits in the child's address space: the
	// allowance for the Go runtime is not too tight.
	r := MustNewIsolated(t, Config{MemoryLimit: 64 << 20, CPUTimeLimit: time.Minute}, "")
	html := MustRender(t, r, `export default function X() {
  const a: string[] = [];
  for (let i = 0; i < 40; i++) a.push("x".repeat(1 << 20) + i);
  let garbage = 0;
  for (let i = 0; i < 200; i++) garbage += ("y".repeat(1 << 20) + i).length;
  return <p>{[a.length, a[39].length, garbage].join(" ")}</p>;
}
`)
	assertContains(t, html, "<p>40 1048578 209715690</p>")
}

func TestRenderIsolatedChildCPULimit(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_CPU is set on Linux only")
	}
	// The child spins where no watchdog can interrupt it: the kernel kills it at RLIMIT_CPU.
	r := MustNewIsolated(t, Config{CPUTimeLimit: 100 * time.Millisecond, WallTimeLimit: time.Minute}, "spin")
	msg := MustFailRender(t, r, "export default () => <p/>;\n")
	if msg != "reactSource: render exceeded the 100ms CPU time limit" {
		t.Errorf("message %q", msg)
	}
}

func TestRenderIsolatedWallTimeLimit(t *testing.T) {
	t.Parallel()
	r := MustNewIsolated(t, Config{MaxConcurrent: 1, WallTimeLimit: 50 * time.Millisecond}, "hang")
	r.childGrace = 50 * time.Millisecond
	msg := MustFailRender(t, r, "export default () => <p/>;\n")
	if msg != "reactSource: render exceeded the 50ms time limit" {
		t.Errorf("message %q", msg)
	}
	// The killed child has given its slot back.
	if n := len(r.slots); n != 0 {
		t.Errorf("%d slots in use after the render", n)
	}
}

func TestRenderIsolatedContextEndsHungChild(t *testing.T) {
	t.Parallel()
	r := MustNewIsolated(t, Config{WallTimeLimit: time.Hour}, "hang")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := r.RenderReact(ctx, "export default () => <p/>;\n")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestRenderIsolatedChildWithoutResult(t *testing.T) {
	t.Parallel()
	// A child that exits cleanly without a result is Postmill's fault, not the template's.
	r := MustNewIsolated(t, Config{}, "silent")
	_, err := r.RenderReact(context.Background(), "export default () => <p/>;\n")
	if err == nil || ports.ErrorCode(err) != ports.CodeInternal {
		t.Fatalf("err = %v, want an internal error", err)
	}
	if !strings.Contains(err.Error(), "exited without a result") {
		t.Errorf("err = %v", err)
	}
}

func TestRenderIsolatedChildMissing(t *testing.T) {
	t.Parallel()
	r := MustNewIsolated(t, Config{}, "")
	r.command = []string{t.TempDir() + "/missing", ChildArg}
	_, err := r.RenderReact(context.Background(), "export default () => <p/>;\n")
	if err == nil || ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "start the render process") {
		t.Fatalf("err = %v, want an internal error starting the child", err)
	}
	if n := len(r.slots); n != 0 {
		t.Errorf("%d slots in use after the failed start", n)
	}
}

func TestRenderIsolatedChildInheritsNothing(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("open descriptors are listed from /proc")
	}
	if len(os.Environ()) == 0 {
		t.Fatal("this test needs an environment to not pass on")
	}
	// A descriptor without close-on-exec, as a shell or a supervisor may leave open: every exec passes it
	// on. (Children of concurrent tests inherit it too; they close it like this one.)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if _, err := unix.FcntlInt(pr.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}

	r := MustNewIsolated(t, Config{}, "inspect")
	out := MustRender(t, r, "export default () => <p/>;\n")
	env, fds, _ := strings.Cut(out, "\nfds=")
	if want := strings.Join(childEnv(), "\n"); env != want {
		t.Errorf("child environment:\n%s\nwant:\n%s", env, want)
	}
	if fds != "0,1,2" {
		t.Errorf("child has descriptors %s open without close-on-exec, want only 0,1,2", fds)
	}
}

func TestNewIsolated(t *testing.T) {
	t.Parallel()
	r := MustNew(t, Config{Isolate: true})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.command, []string{exe, ChildArg}) {
		t.Errorf("command %q, want %q", r.command, []string{exe, ChildArg})
	}
	if r.bundle != nil {
		t.Error("an isolated Renderer compiled the bundle it never runs")
	}
}

func TestServeChildBadRequest(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := ServeChild(strings.NewReader("{not json"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"code":"internal"`) || !strings.Contains(out.String(), "read render request") {
		t.Errorf("result %s", out.String())
	}
}

func TestCappedBuffer(t *testing.T) {
	t.Parallel()
	b := &cappedBuffer{max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.buf.String(); got != "abcde" || !b.truncated {
		t.Errorf("kept %q, truncated %v", got, b.truncated)
	}
}

// BenchmarkRenderIsolated measures a whole isolated render of a typical template: starting the child,
// which compiles the bundle, transforms and renders, and reading its result. cpu-ms/op counts this
// process only; child-cpu-ms/op the children.
func BenchmarkRenderIsolated(b *testing.B) {
	r := MustNewIsolated(b, Config{MaxConcurrent: 1}, "")
	ctx := context.Background()
	cpu, children := processCPU(b), childrenCPU(b)
	for b.Loop() {
		if _, err := r.RenderReact(ctx, welcomeTemplate); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	if children >= 0 {
		b.ReportMetric(float64(childrenCPU(b)-children)/float64(b.N)/1e6, "child-cpu-ms/op")
	}
}
