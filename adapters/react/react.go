// Package react is the ports.ReactRenderer: it renders React Email templates (TSX using
// @react-email/components) to HTML at version creation, so that a template version stores plain HTML whose
// {{ placeholders }} are interpolated at send time like any other (SPEC §4.4). A render runs either in the
// calling process or, with Config.Isolate (what Postmill's server uses), in a child process of its own
// under hard limits.
//
// # Pipeline
//
// The source is transformed with esbuild's Go API (TSX, automatic JSX runtime, CommonJS, lowered to
// ES2017) and run in a fresh goja runtime per render. The runtime first runs the embedded bundle
// (bundle/react-email.js: React 18.3.1, react-dom/server's synchronous renderer and the @react-email
// component packages; see bundle/VERSIONS and deploy/scripts/react-bundle.sh), compiled once in New and
// shared by every runtime. The template's default export is rendered with renderToStaticMarkup and the
// XHTML 1.0 Transitional doctype that React Email's own render puts in front.
//
// Props: variables are unknown when a version is created, so the component receives props in which every
// property is a placeholder: props.name renders as "{{ name }}", props.user.firstName as
// "{{ user.firstName }}", in text and in attributes alike (React escapes & < > " and ', never braces). A
// placeholder is truthy, turns into its text in template literals and concatenation, and cannot be
// transformed: calling a string or array method on it (props.items.map, props.name.toUpperCase) is a
// render error that says so, since the value only exists at send time. Spreading the props object
// (<Inner {...props} />) passes nothing, as it has no own properties: pass placeholders by name.
//
// # Sandbox
//
// Template code sees the ECMAScript built-ins and nothing else: no timers (setTimeout, setInterval,
// setImmediate, queueMicrotask), no fetch or XMLHttpRequest, no process, no file system; require knows only
// react, react/jsx-runtime, @react-email/components and the individual @react-email/<component> packages
// (any other name: `module "fs" is not available`). Source maps are read only when inline, never from a
// file. A runtime serves one render and is dropped, so nothing a template sets is visible to the next one.
// CodeBlock and Tailwind are not in the bundle (each needs tens of seconds of CPU to load in goja); using
// them is a render error that names them.
//
// # Bounds
//
// Time: the render (bundle start-up included) runs on a goroutine locked to its OS thread, and a watchdog
// reads that thread's CPU clock every few milliseconds: past Config.CPUTimeLimit the runtime is
// interrupted. CPU time, unlike wall-clock time, does not run out because the machine is busy; the
// wall-clock Config.WallTimeLimit is a backstop for a starved render, and ctx ending interrupts the render
// too. (Outside Linux the CPU clock is wall-clock time.) goja checks for an interrupt between instructions,
// so one long native call runs to its end first; when the runtime has not stopped a second after the
// interrupt, RenderReact answers anyway and the runtime keeps its concurrency slot until it stops, so
// runaway renders never occupy more than Config.MaxConcurrent goroutines. A regular expression match that
// backtracks gives up (as no match) after a second.
//
// Memory, in process: goja has no allocator hook, so the bound is enforced from outside. While a render
// runs, the watchdog samples the Go heap (runtime/metrics). When the heap, garbage included, has grown by
// more than Config.MemoryLimit since the render began, it forces a garbage collection (on another
// goroutine, at most once per MemoryLimit of allocation) so that garbage does not count; when a collection
// finds the live heap more than MemoryLimit above where the render began, the runtime is interrupted.
// Precision, honestly: the heap is the process's, so growth caused by other goroutines (a concurrent render
// included) counts against the render that is running; between two samples and during a collection a
// render keeps allocating, so the heap can pass the bound by tens to a couple of hundred megabytes before
// the interrupt lands (a 64 MiB bound was seen to peak near 230 MB of resident memory); and a single native
// call allocates all it needs before any sample sees it. Against that last case the built-ins that build
// a whole string or array in one call from a length the template chooses (String repeat, padStart,
// padEnd and split, Array.from, Array.prototype methods on a sparse array of 4e9 holes,
// Function.prototype.apply with an array-like, Object.keys of an array) refuse more than MemoryLimit/2
// characters or MemoryLimit/16 elements, and ArrayBuffer and the typed arrays are removed. Not every path
// is covered (spreading a huge sparse array, a replace whose replacement multiplies the string): in
// process, those can take gigabytes before anything stops them. The JavaScript call stack is bounded (deep
// recursion is an error, not a crash), and source and output sizes are capped.
//
// # Process isolation
//
// With Config.Isolate, RenderReact starts the current executable (os.Executable) with the hidden argument
// ChildArg for each render, and that executable's main calls ServeChild first thing. The parent writes one
// JSON request (the source and the bounds) to the child's stdin and reads one JSON result ({"html"} or
// {"error": {code, message}}) from its stdout. The child's environment is built, not inherited: only
// GOMAXPROCS=2 and MALLOC_ARENA_MAX=1, so no secret key or database URL reaches template code; it is
// handed stdin, stdout and stderr, and on Linux closes any other descriptor it inherited. It then limits
// itself, before touching the source, with hard (soft = hard) rlimits: RLIMIT_AS at the address space it has
// mapped (about 1.3 GiB of mostly untouched reservations by the Go runtime, measured at run time) plus
// MemoryLimit plus 128 MiB for the runtime's own growth (see childAddressAllowance), and RLIMIT_CPU at its
// CPU time so far plus twice CPUTimeLimit plus a second; it also sets its Go memory limit to its memory in
// use plus MemoryLimit. Then it renders with the in-process code and watchdogs above, which still give the
// precise messages, in a heap that holds nothing but the one render.
//
// What that makes real: a render can never grow the server's memory, and its child's address space
// cannot pass the limit, whatever the allocation (a single native call included): the Go runtime in the
// child fails to map memory and dies with "fatal error: out of memory". The parent turns a child that
// died without a result into invalid_argument "reactSource: render exceeded the N MiB memory limit", or
// the CPU message when the kernel killed it at RLIMIT_CPU. The parent kills the child when ctx ends
// (the context's error) or WallTimeLimit plus a 3-second start-up allowance passes (the time-limit
// message); on Linux the child is also killed if the parent dies (Pdeathsig). Config.MaxConcurrent
// bounds how many children run at once; a slot is given back only once its child has exited. In numbers: the limit is on
// address space, not resident memory, so a render stops at most MemoryLimit + 128 MiB above the child's
// start (its resident memory grows by no more than that), and the in-child watchdog usually stops it at
// MemoryLimit of live heap first. The cost is a process start and a bundle compile per render: about 35 ms
// of wall-clock time and 45 ms of CPU for a typical template, against 10 ms in process. Outside Linux the
// child sets no rlimits (only the Go memory limit), so there isolation protects the parent's heap but the
// child's own bound is the in-process watchdog's.
//
// Every failure caused by the template (compile error with its line:column, a thrown error, a bound
// exceeded, even a panic inside goja) is a ports.Error with code invalid_argument and a message that
// starts with "reactSource: ".
package react

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	DefaultCPUTimeLimit = 2 * time.Second
	// DefaultWallTimeFactor sets the default WallTimeLimit as a multiple of CPUTimeLimit.
	DefaultWallTimeFactor = 5
	DefaultMemoryLimit    = 256 << 20
	DefaultMaxSourceBytes = 512 << 10
	DefaultMaxOutputBytes = 4 << 20
	DefaultMaxConcurrent  = 2
	// DefaultMaxCallStack is deep enough for any React tree an email has (each element costs a few frames)
	// and keeps runaway recursion far below the Go stack limit, whose overflow would kill the process.
	DefaultMaxCallStack = 4096
)

// Doctype is what React Email's render writes before the markup; email clients still key their rendering
// mode on it.
const Doctype = `<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">`

// Config bounds each render. Zero values take the defaults.
type Config struct {
	// CPUTimeLimit is the CPU time a render may use (on Linux the clock of the thread it runs on; elsewhere
	// wall-clock time); default DefaultCPUTimeLimit.
	CPUTimeLimit time.Duration
	// WallTimeLimit is the longest a render may take once it has a slot, a backstop for a render starved
	// of CPU; default DefaultWallTimeFactor times CPUTimeLimit.
	WallTimeLimit time.Duration
	// MemoryLimit is how far the Go heap may grow during a render, in bytes; default DefaultMemoryLimit.
	// With Isolate it also sets the child's address-space limit. See the package documentation for how
	// precise each is.
	MemoryLimit int64
	// MaxSourceBytes caps the TSX source; default DefaultMaxSourceBytes.
	MaxSourceBytes int
	// MaxOutputBytes caps the rendered HTML; default DefaultMaxOutputBytes.
	MaxOutputBytes int
	// MaxConcurrent is how many renders run at once; more callers wait for a slot or for their context.
	// Default DefaultMaxConcurrent: a render is CPU-bound, and templates are created far less often than
	// mail is sent.
	MaxConcurrent int
	// MaxCallStack is the JavaScript call stack depth; default DefaultMaxCallStack.
	MaxCallStack int
	// Isolate runs each render in a child process of the current executable, under an address-space and a
	// CPU-time rlimit, so that no template can grow the server's own memory (see the package
	// documentation). The executable must call ServeChild when started with ChildArg.
	Isolate bool
}

// Validate rejects negative bounds, so that a misconfigured deployment fails at start rather than at the
// first template.
func (c Config) Validate() error {
	if c.CPUTimeLimit < 0 || c.WallTimeLimit < 0 || c.MemoryLimit < 0 || c.MaxSourceBytes < 0 ||
		c.MaxOutputBytes < 0 || c.MaxConcurrent < 0 || c.MaxCallStack < 0 {
		return errors.New("react: limits must not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.CPUTimeLimit == 0 {
		c.CPUTimeLimit = DefaultCPUTimeLimit
	}
	if c.WallTimeLimit == 0 {
		c.WallTimeLimit = DefaultWallTimeFactor * c.CPUTimeLimit
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.MaxSourceBytes == 0 {
		c.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxCallStack == 0 {
		c.MaxCallStack = DefaultMaxCallStack
	}
	return c
}

//go:embed bundle/react-email.js
var bundleSource string

//go:embed glue.js
var glueSource string

// Renderer renders React Email templates. It is safe for concurrent use; each render runs in a runtime of
// its own.
type Renderer struct {
	cfg    Config
	bundle *goja.Program // nil when isolated: only children run the bundle
	glue   *goja.Program
	slots  chan struct{}
	// command starts a child when isolated: the current executable and ChildArg.
	command []string
	// childGrace is how long past WallTimeLimit the parent waits before it kills a child.
	childGrace time.Duration
	// testHook, when set, prepares each runtime before the bundle runs (tests only).
	testHook func(*goja.Runtime)
}

var _ ports.ReactRenderer = (*Renderer)(nil)

// New compiles the embedded bundle once (a few tens of milliseconds of CPU), so that each render only runs
// the compiled program. When cfg.Isolate is set it compiles nothing (each child compiles the bundle for
// its one render) and finds the current executable, so that a deployment that cannot start children fails
// at start.
func New(cfg Config) (*Renderer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Isolate {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("react: find the executable for render processes: %w", err)
		}
		return &Renderer{
			cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrent), command: []string{exe, ChildArg}, childGrace: childStartAllowance,
		}, nil
	}
	bundle, err := compileTrusted("react-email.js", bundleSource)
	if err != nil {
		return nil, fmt.Errorf("react: compile bundle: %w", err)
	}
	glue, err := compileTrusted("glue.js", glueSource)
	if err != nil {
		return nil, fmt.Errorf("react: compile glue: %w", err)
	}
	return &Renderer{cfg: cfg, bundle: bundle, glue: glue, slots: make(chan struct{}, cfg.MaxConcurrent)}, nil
}

// compileTrusted compiles code shipped in the binary; it has no source map to load.
func compileTrusted(name, src string) (*goja.Program, error) {
	ast, err := goja.Parse(name, src, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, err
	}
	return goja.CompileAST(ast, false)
}

// RenderReact implements ports.ReactRenderer. Errors: invalid_argument ("reactSource: ...") for anything the
// source causes; the context's error when ctx ends while waiting for a slot or rendering.
func (r *Renderer) RenderReact(ctx context.Context, source string) (string, error) {
	if len(source) > r.cfg.MaxSourceBytes {
		return "", invalid("source is %d bytes, more than the %d allowed", len(source), r.cfg.MaxSourceBytes)
	}
	// Compiling waits for a slot too: esbuild and goja's compiler are CPU work the template chooses.
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("react: waiting for a render slot: %w", ctx.Err())
	}
	var html string
	var err error
	if r.cfg.Isolate {
		html, err = r.renderInChild(ctx, source)
		<-r.slots
	} else {
		html, err = r.renderHere(ctx, source)
	}
	if err != nil {
		return "", err
	}
	if len(html) > r.cfg.MaxOutputBytes {
		return "", invalid("rendered HTML is %d bytes, more than the %d allowed", len(html), r.cfg.MaxOutputBytes)
	}
	return html, nil
}

// renderHere compiles and runs source in this process. The caller holds a slot, which the render gives back
// when its runtime stops.
func (r *Renderer) renderHere(ctx context.Context, source string) (string, error) {
	prog, err := compile(source)
	if err != nil {
		<-r.slots
		return "", err
	}
	return r.run(ctx, prog)
}

// invalid is the error of everything a template causes: SPEC §7's 400 with the text the author needs.
func invalid(format string, args ...any) *ports.Error {
	return ports.Errorf(ports.CodeInvalidArgument, "reactSource: "+format, args...)
}
