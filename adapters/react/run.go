package react

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"

	"github.com/postmill/postmill/ports"
)

const (
	// sampleInterval is how often the watchdog reads the render's CPU clock and the heap. Each reading
	// costs about a microsecond; at goja's allocation rate a render can allocate a few tens of megabytes
	// between two samples.
	sampleInterval = 5 * time.Millisecond
	// abandonAfter is how long RenderReact waits for an interrupted runtime to stop before it answers
	// anyway (see the package documentation: a native call is not interruptible).
	abandonAfter = time.Second
)

// regexpMatchTimeout bounds one match of a regular expression that goja runs with regexp2 (patterns with
// backreferences or lookaround; the rest run on Go's linear-time regexp). A match is a native call the
// watchdog cannot interrupt, and a backtracking pattern can run for years: when the timeout passes, goja
// reports no match. regexp2 reads the timeout from a package variable when a pattern is compiled; goja,
// used only here, is the only importer of regexp2 in Postmill.
const regexpMatchTimeout = time.Second

func init() { regexp2.DefaultMatchTimeout = regexpMatchTimeout }

// unsafeGlobals are removed before template code runs: each allocates its whole length in one native
// call, out of the memory watchdog's reach, and neither the bundle nor an email template needs binary data.
var unsafeGlobals = []string{
	"ArrayBuffer", "SharedArrayBuffer", "DataView", "Uint8Array", "Uint8ClampedArray", "Int8Array",
	"Uint16Array", "Int16Array", "Uint32Array", "Int32Array", "Float32Array", "Float64Array",
	"BigInt64Array", "BigUint64Array",
}

type outcome struct {
	html string
	err  error
}

// run renders prog in a fresh runtime while watching its CPU time, wall time, memory and ctx. The caller
// holds a slot; the goroutine running the template gives it back when the runtime stops, which may be
// after run returns.
func (r *Renderer) run(ctx context.Context, prog *goja.Program) (string, error) {
	vm := goja.New()
	done := make(chan outcome, 1)
	clocks := make(chan *threadClock, 1)
	watch := newMemoryWatch(r.cfg.MemoryLimit)
	go func() {
		defer func() { <-r.slots }()
		clock, unlock := startThreadClock()
		defer unlock()
		clocks <- clock
		html, err := r.execute(vm, prog)
		done <- outcome{html, err}
	}()
	clock := <-clocks

	wall := time.NewTimer(r.cfg.WallTimeLimit)
	defer wall.Stop()
	tick := time.NewTicker(sampleInterval)
	defer tick.Stop()
	var stop error
	for stop == nil {
		select {
		case o := <-done:
			return o.html, o.err
		case <-wall.C:
			stop = invalid("render exceeded the %v time limit", r.cfg.WallTimeLimit)
		case <-ctx.Done():
			stop = fmt.Errorf("react: render: %w", ctx.Err())
		case live := <-watch.collected:
			if watch.afterCollection(live) {
				stop = invalid("render exceeded the %d MiB memory limit", r.cfg.MemoryLimit>>20)
			}
		case <-tick.C:
			if clock.used() > r.cfg.CPUTimeLimit {
				stop = invalid("render exceeded the %v CPU time limit", r.cfg.CPUTimeLimit)
			} else if watch.sample() {
				stop = invalid("render exceeded the %d MiB memory limit", r.cfg.MemoryLimit>>20)
			}
		}
	}
	vm.Interrupt(stop)
	abandon := time.NewTimer(abandonAfter)
	defer abandon.Stop()
	select {
	case o := <-done:
		if o.err == nil {
			return o.html, nil // finished before the interrupt reached it
		}
	case <-abandon.C:
	}
	return "", stop
}

// execute runs the bundle, the glue and the template in vm and renders the default export. A panic inside
// goja becomes an error: a template must never take the process down.
func (r *Renderer) execute(vm *goja.Runtime, prog *goja.Program) (html string, err error) {
	defer func() {
		if p := recover(); p != nil {
			html, err = "", invalid("render failed: %v", p)
		}
	}()
	vm.SetMaxCallStackSize(r.cfg.MaxCallStack)
	if r.testHook != nil {
		r.testHook(vm)
	}
	if _, err := vm.RunProgram(r.bundle); err != nil {
		return "", fromJS(err)
	}
	global := vm.GlobalObject()
	for _, name := range unsafeGlobals {
		if err := global.Delete(name); err != nil {
			return "", err
		}
	}
	gv, err := vm.RunProgram(r.glue)
	if err != nil {
		return "", fromJS(err)
	}
	glue := gv.ToObject(vm)
	limit, ok := goja.AssertFunction(glue.Get("limit"))
	if !ok {
		return "", errors.New("react: glue has no limit function")
	}
	// A goja string takes one byte per character, or two when it holds any non-Latin-1 character; an
	// array element is an interface value of 16 bytes.
	maxChars, maxElements := vm.ToValue(r.cfg.MemoryLimit/2), vm.ToValue(r.cfg.MemoryLimit/16)
	if _, err := limit(goja.Undefined(), maxChars, maxElements); err != nil {
		return "", fromJS(err)
	}
	render, ok := goja.AssertFunction(glue.Get("render"))
	if !ok {
		return "", errors.New("react: glue has no render function")
	}
	module := vm.NewObject()
	exports := vm.NewObject()
	if err := module.Set("exports", exports); err != nil {
		return "", err
	}
	for name, v := range map[string]goja.Value{"require": glue.Get("require"), "module": module, "exports": exports} {
		if err := global.Set(name, v); err != nil {
			return "", err
		}
	}
	if _, err := vm.RunProgram(prog); err != nil {
		return "", fromJS(err)
	}
	out, err := render(goja.Undefined(), module.Get("exports"))
	if err != nil {
		return "", fromJS(err)
	}
	return Doctype + out.String(), nil
}

// fromJS turns what goja returns into the error RenderReact promises: the watchdog's own error for an
// interrupt, otherwise invalid_argument with the JavaScript error and where in the template it happened.
func fromJS(err error) error {
	var interrupted *goja.InterruptedError
	if errors.As(err, &interrupted) {
		if inner := interrupted.Unwrap(); inner != nil {
			return inner
		}
		return invalid("render interrupted")
	}
	var overflow *goja.StackOverflowError
	if errors.As(err, &overflow) {
		return invalid("maximum call stack size exceeded")
	}
	var exc *goja.Exception
	if errors.As(err, &exc) {
		msg := decodeReactError(exc.Value().String())
		if at := templatePosition(exc.Stack()); at != "" {
			msg += " (at " + at + ")"
		}
		return invalid("%s", msg)
	}
	var e *ports.Error
	if errors.As(err, &e) {
		return e
	}
	return invalid("%v", err)
}

// templatePosition is the innermost stack frame inside the template, as template.tsx:line:column of the
// source as written (goja maps positions through the inline source map).
func templatePosition(stack []goja.StackFrame) string {
	for _, f := range stack {
		if f.SrcName() != templateFile {
			continue
		}
		p := f.Position()
		if p.Line > 0 {
			// Positions mapped through a source map have 0-based columns.
			return fmt.Sprintf("%s:%d:%d", templateFile, p.Line, p.Column+1)
		}
	}
	return ""
}

// reactErrors are the messages of the production React errors a template is likely to cause, which the
// minified build replaces by a number and a link; %s is each args[] of the link in turn.
var reactErrors = map[string]string{
	"31":  "Objects are not valid as a React child (found: %s). If you meant to render a collection of children, use an array instead.",
	"130": "Element type is invalid: expected a string (for built-in components) or a class/function (for composite components) but got: %s.%s",
	"426": "A component suspended while rendering: asynchronous components and data loading are not supported in email templates",
}

// decodeReactError restores the message of a minified React error ("Minified React error #130; visit
// https://reactjs.org/docs/error-decoder.html?invariant=130&args[]=undefined&args[]= ...").
func decodeReactError(msg string) string {
	const marker = "Minified React error #"
	i := strings.Index(msg, marker)
	if i < 0 {
		return msg
	}
	rest := msg[i+len(marker):]
	code, _, _ := strings.Cut(rest, ";")
	format, ok := reactErrors[code]
	if !ok {
		return msg
	}
	var args []any
	if _, query, ok := strings.Cut(rest, "?"); ok {
		query, _, _ = strings.Cut(query, " ")
		for part := range strings.SplitSeq(query, "&") {
			if v, ok := strings.CutPrefix(part, "args[]="); ok {
				if u, err := url.QueryUnescape(v); err == nil {
					v = u
				}
				args = append(args, v)
			}
		}
	}
	for strings.Count(format, "%s") > len(args) {
		args = append(args, "")
	}
	return msg[:i] + fmt.Sprintf(format, args[:strings.Count(format, "%s")]...)
}

// memoryWatch decides whether a render has grown the heap past its bound (see the package documentation).
// Its methods are called from the watchdog loop only; a forced collection runs on a goroutine of its own so
// that the loop keeps checking time and ctx meanwhile.
type memoryWatch struct {
	limit      uint64
	base       uint64 // heap object bytes (live and not yet swept) when the render began
	cycles     uint64 // completed GC cycles when the render began
	trigger    uint64 // heap object bytes above which a collection is forced
	collecting bool
	collected  chan uint64 // the live heap after a forced collection
	samples    []metrics.Sample
}

const (
	metricObjects = "/memory/classes/heap/objects:bytes"
	metricLive    = "/gc/heap/live:bytes"
	metricCycles  = "/gc/cycles/total:gc-cycles"
)

func newMemoryWatch(limit int64) *memoryWatch {
	w := &memoryWatch{
		limit:     uint64(limit),
		collected: make(chan uint64, 1),
		samples:   []metrics.Sample{{Name: metricObjects}, {Name: metricLive}, {Name: metricCycles}},
	}
	metrics.Read(w.samples)
	w.base, w.cycles = w.samples[0].Value.Uint64(), w.samples[2].Value.Uint64()
	w.trigger = w.base + w.limit
	return w
}

// sample reports whether a collection that finished during the render found the live heap more than the
// limit above where the render began. When the heap, garbage included, has passed the trigger, it starts
// a collection whose live heap arrives on w.collected (at most one at a time, and at most once per limit's
// worth of allocation), so that garbage never counts.
func (w *memoryWatch) sample() bool {
	metrics.Read(w.samples)
	objects, live, cycles := w.samples[0].Value.Uint64(), w.samples[1].Value.Uint64(), w.samples[2].Value.Uint64()
	if cycles > w.cycles && live > w.base+w.limit {
		return true
	}
	if !w.collecting && objects > w.trigger {
		w.collecting = true
		go func() {
			runtime.GC()
			s := []metrics.Sample{{Name: metricLive}}
			metrics.Read(s)
			w.collected <- s[0].Value.Uint64()
		}()
	}
	return false
}

// afterCollection takes the live heap a forced collection found and reports whether it is past the bound.
func (w *memoryWatch) afterCollection(live uint64) bool {
	w.collecting = false
	w.trigger = live + w.limit
	return live > w.base+w.limit
}
