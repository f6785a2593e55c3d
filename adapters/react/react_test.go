package react

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/postmill/postmill/ports"
)

// MustNew returns a Renderer for cfg or fails the test.
func MustNew(tb testing.TB, cfg Config) *Renderer {
	tb.Helper()
	r, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return r
}

// MustRender renders source and fails the test on an error.
func MustRender(tb testing.TB, r *Renderer, source string) string {
	tb.Helper()
	html, err := r.RenderReact(context.Background(), source)
	if err != nil {
		tb.Fatalf("RenderReact: %v", err)
	}
	return html
}

// MustFailRender renders source, expects an invalid_argument error and returns its message.
func MustFailRender(tb testing.TB, r *Renderer, source string) string {
	tb.Helper()
	html, err := r.RenderReact(context.Background(), source)
	if err == nil {
		tb.Fatalf("RenderReact succeeded, want an error; HTML: %.300s", html)
	}
	if code := ports.ErrorCode(err); code != ports.CodeInvalidArgument {
		tb.Fatalf("error code %q, want invalid_argument: %v", code, err)
	}
	msg := ports.ErrorMessage(err)
	if !strings.HasPrefix(msg, "reactSource: ") {
		tb.Fatalf("message %q does not start with reactSource: ", msg)
	}
	return msg
}

// modes are the two ways a Renderer runs a render: Config.Isolate off and on.
var modes = []struct {
	name    string
	isolate bool
}{{"in-process", false}, {"isolated", true}}

// forEachMode runs test as a parallel subtest per mode, with a Renderer for cfg in that mode.
func forEachMode(t *testing.T, cfg Config, test func(t *testing.T, r *Renderer)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.Isolate = m.isolate
			test(t, MustNew(t, c))
		})
	}
}

func assertContains(tb testing.TB, s string, wants ...string) {
	tb.Helper()
	for _, want := range wants {
		if !strings.Contains(s, want) {
			tb.Errorf("missing %q in:\n%s", want, s)
		}
	}
}

const welcomeTemplate = `import { Html, Head, Body, Container, Heading, Text, Button, Link, Img, Hr, Preview } from "@react-email/components";

interface Props {
  name: string;
  url: string;
  logo: string;
  user: { firstName: string };
}

export default function Welcome(props: Props) {
  const { name } = props;
  return (
    <Html lang="en">
      <Head />
      <Preview>Welcome aboard, {name}</Preview>
      <Body style={{ backgroundColor: "#ffffff", color: props.color }}>
        <Container>
          <Heading as="h2">Hi {props.user.firstName}!</Heading>
          <Text>Hello {name}, {"{{ literal }}"} & <b>{` + "`${props.url}?ref=mail`" + `}</b></Text>
          <Button href={props.url}>Confirm</Button>
          <Link href="{{ unsubscribe }}" title={'say "hi"'}>Unsubscribe</Link>
          <Img src={props.logo} alt="Logo" width="120" height="40" />
          <Hr />
        </Container>
      </Body>
    </Html>
  );
}
`

func TestRenderReactEmailComponents(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{}, func(t *testing.T, r *Renderer) {
		testEmailComponents(t, r)
	})
}

func testEmailComponents(t *testing.T, r *Renderer) {
	html := MustRender(t, r, welcomeTemplate)

	if !strings.HasPrefix(html, Doctype+`<html dir="ltr" lang="en">`) {
		t.Errorf("HTML does not start with the doctype and <html>: %.200s", html)
	}
	assertContains(t, html,
		`<head><meta content="text/html; charset=UTF-8" http-equiv="Content-Type"/>`,
		// Preview: hidden preheader text.
		`data-skip-in-text="true">Welcome aboard, {{ name }}`,
		// Body, with a placeholder inside a style object (Body copies the style to its table cell).
		`<body style="background-color:#ffffff">`,
		`<td style="background-color:#ffffff;color:{{ color }}">`,
		// Container is a centred presentation table.
		`role="presentation" style="max-width:37.5em"`,
		`<h2>Hi {{ user.firstName }}!</h2>`,
		// Text: a literal placeholder string survives, & is escaped, braces are not.
		`<p style="font-size:14px;line-height:24px;margin-top:16px;margin-bottom:16px">Hello {{ name }}, {{ literal }} &amp; <b>{{ url }}?ref=mail</b></p>`,
		`<a href="{{ url }}" style="line-height:100%;text-decoration:none;display:inline-block;max-width:100%;mso-padding-alt:0px" target="_blank">`,
		`>Confirm</span>`,
		`<a href="{{ unsubscribe }}" title="say &quot;hi&quot;" style="color:#067df7;text-decoration-line:none" target="_blank">Unsubscribe</a>`,
		`<img alt="Logo" height="40" src="{{ logo }}" style="display:block;outline:none;border:none;text-decoration:none" width="120"/>`,
		`<hr style="width:100%;border:none;border-top:1px solid #eaeaea"/>`,
		`</body></html>`,
	)
}

func TestRenderReactClassicAndHooks(t *testing.T) {
	t.Parallel()
	r := MustNew(t, Config{})
	html := MustRender(t, r, `import * as React from "react";

function Greeting({ who }: { who: string }) {
  const [greeting] = React.useState("Hello");
  return React.createElement("span", { title: who }, greeting, " ", who);
}

export default function Email(props) {
  const items = ["a", "b"];
  return (
    <>
      {React.createElement(Greeting, { who: props.name })}
      <ul>{items.map((i) => <li key={i}>{i}-{props.suffix}</li>)}</ul>
      {props.children === undefined ? <i>no children</i> : null}
      <p>{"x" + props.a.b.c}</p>
    </>
  );
}
`)
	assertContains(t, html,
		`<span title="{{ name }}">Hello {{ name }}</span>`,
		`<ul><li>a-{{ suffix }}</li><li>b-{{ suffix }}</li></ul>`,
		`<i>no children</i>`,
		`<p>x{{ a.b.c }}</p>`,
	)
}

func TestRenderReactIndividualPackagesAndMarkdown(t *testing.T) {
	t.Parallel()
	r := MustNew(t, Config{})
	html := MustRender(t, r, `import { Section } from "@react-email/section";
import { Markdown } from "@react-email/components";

export default function Email(props) {
  return (
    <Section>
      <Markdown>{"# Hi " + props.name + "\n\nSee *this*."}</Markdown>
    </Section>
  );
}
`)
	assertContains(t, html,
		`<table align="center" width="100%" border="0" cellPadding="0" cellSpacing="0" role="presentation">`,
		`>Hi {{ name }}</h1>`,
		`<em style="font-style:italic">this</em>`,
	)
}

func TestRenderReactErrors(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{MaxSourceBytes: 4096, MaxOutputBytes: 64 << 10}, testErrors)
}

func testErrors(t *testing.T, r *Renderer) {
	tests := []struct {
		name, source string
		want         []string
	}{
		{"syntax error", "export default function X() {\n  const a = 1;\n  return <p>{a</p>;\n}\n",
			[]string{"reactSource: template.tsx:3:", "Unterminated regular expression"}},
		{"unclosed tag", "export default function X() {\n  return <div><p>hi</div>;\n}\n",
			[]string{"template.tsx:2:", `Unexpected closing "div" tag does not match opening "p" tag`}},
		{"throw in component", "export default function X(props) {\n  if (props.name) {\n    throw new Error(\"boom \" + props.name);\n  }\n  return <p/>;\n}\n",
			[]string{"reactSource: Error: boom {{ name }} (at template.tsx:3:11)"}},
		{"throw at load", "throw new TypeError('nope');\nexport default () => <p/>;\n",
			[]string{"TypeError: nope (at template.tsx:1:7)"}},
		{"import fs", "import { readFileSync } from \"fs\";\nexport default () => <p>{readFileSync(\"/etc/passwd\", \"utf8\")}</p>;\n",
			[]string{`Error: module "fs" is not available`}},
		{"require child_process", "const cp = require(\"child_process\");\nexport default () => <p>{String(cp)}</p>;\n",
			[]string{`module "child_process" is not available`}},
		{"react-dom/server", "import { renderToString } from \"react-dom/server\";\nexport default () => <p>{renderToString(<b/>)}</p>;\n",
			[]string{`module "react-dom/server" is not available`}},
		{"setTimeout", "export default function X() { setTimeout(() => {}, 1); return <p/>; }\n",
			[]string{"ReferenceError: setTimeout is not defined"}},
		{"setInterval", "export default function X() { setInterval(() => {}, 1); return <p/>; }\n",
			[]string{"ReferenceError: setInterval is not defined"}},
		{"setImmediate", "export default function X() { setImmediate(() => {}); return <p/>; }\n",
			[]string{"ReferenceError: setImmediate is not defined"}},
		{"queueMicrotask", "export default function X() { queueMicrotask(() => {}); return <p/>; }\n",
			[]string{"ReferenceError: queueMicrotask is not defined"}},
		{"fetch", "export default function X() { fetch('http://127.0.0.1/'); return <p/>; }\n",
			[]string{"ReferenceError: fetch is not defined"}},
		{"XMLHttpRequest", "export default function X() { new XMLHttpRequest(); return <p/>; }\n",
			[]string{"ReferenceError: XMLHttpRequest is not defined"}},
		{"process", "export default function X() { return <p>{process.env.HOME}</p>; }\n",
			[]string{"ReferenceError: process is not defined"}},
		{"ArrayBuffer", "export default function X() { new ArrayBuffer(1 << 30); return <p/>; }\n",
			[]string{"ReferenceError: ArrayBuffer is not defined"}},
		{"huge repeat", "export default function X() { return <p>{'ab'.repeat(1 << 30)}</p>; }\n",
			[]string{"RangeError: String.prototype.repeat: 2147483648 characters are more than the 134217728 a render may use"}},
		{"sparse fill", "export default function X() { const a: number[] = []; a.length = 4e9; a.fill(0); return <p/>; }\n",
			[]string{"RangeError: Array.prototype.fill: 4000000000 elements are more than the 16777216 a render may use"}},
		{"array-like from", "export default function X() { Array.from({ length: 4e9 }); return <p/>; }\n",
			[]string{"RangeError: Array.from: 4000000000 elements"}},
		{"array-like apply", "export default function X() { Math.max.apply(null, { length: 4e9 } as any); return <p/>; }\n",
			[]string{"RangeError: Function.prototype.apply: 4000000000 elements"}},
		{"sparse keys", "export default function X() { const a: number[] = []; a.length = 4e9; Object.keys(a); return <p/>; }\n",
			[]string{"RangeError: Object.keys: 4000000000 elements"}},
		{"backtracking regexp", "export default function X() { return <p>{String(/^(a+)+\\1$/.test('a'.repeat(40) + 'b'))}</p>; }\n",
			nil}, // must render: the match gives up after regexpMatchTimeout
		{"wide join", "export default function X() { return <p>{new Array(1e6).join('x'.repeat(1000))}</p>; }\n",
			[]string{"RangeError: Array.prototype.join: 999999000 characters"}},
		{"huge padStart", "export default function X() { return <p>{'a'.padStart(1 << 30)}</p>; }\n",
			[]string{"RangeError: String.prototype.padStart"}},
		{"deep recursion", "function f(n: number): number { return f(n + 1) + 1; }\nexport default function X() { return <p>{f(0)}</p>; }\n",
			[]string{"reactSource: maximum call stack size exceeded"}},
		{"no default export", "export const X = () => <p/>;\n",
			[]string{"reactSource: TypeError: the default export must be a React component, got object"}},
		{"default export not a component", "export default 42;\n",
			[]string{"the default export must be a React component, got number"}},
		{"unknown component", "import { Nope } from \"@react-email/components\";\nexport default () => <Nope/>;\n",
			[]string{"Element type is invalid: expected a string (for built-in components) or a class/function (for composite components) but got: undefined."}},
		{"object child", "export default () => <p>{{ a: 1 }}</p>;\n",
			[]string{"Objects are not valid as a React child (found: object with keys {a})"}},
		{"async component", "export default async function X() { return <p/>; }\n",
			[]string{"Objects are not valid as a React child (found: [object Promise])"}},
		{"placeholder map", "export default (props) => <ul>{props.items.map((i) => <li>{i}</li>)}</ul>;\n",
			[]string{"TypeError: props.items.map(): template variables are placeholders ({{ items }}) filled in at send time"}},
		{"placeholder toUpperCase", "export default ({ user }) => <p>{user.name.toUpperCase()}</p>;\n",
			[]string{"props.user.name.toUpperCase()"}},
		{"tailwind", "import { Tailwind, Text } from \"@react-email/components\";\nexport default () => <Tailwind><Text className=\"p-4\">x</Text></Tailwind>;\n",
			[]string{"Tailwind (@react-email/tailwind) is not available in Postmill's React Email renderer"}},
		{"code block package", "import { CodeBlock } from \"@react-email/code-block\";\nexport default () => <CodeBlock code=\"x\" language=\"js\"/>;\n",
			[]string{`module "@react-email/code-block" is not available`}},
		{"source too large", "export default () => <p>" + strings.Repeat("x", 5000) + "</p>;\n",
			[]string{"reactSource: source is 5030 bytes, more than the 4096 allowed"}},
		{"output too large", "export default () => <p>{'x'.repeat(70000)}</p>;\n",
			[]string{"reactSource: rendered HTML is", "more than the 65536 allowed"}},
		{"source map file", "export default () => <p/>;\n//# sourceMappingURL=/etc/passwd\n",
			nil}, // must render: the comment is neither followed nor an error
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.want == nil {
				MustRender(t, r, tt.source)
				return
			}
			msg := MustFailRender(t, r, tt.source)
			assertContains(t, msg, tt.want...)
		})
	}
}

func TestRenderReactTimeLimit(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{CPUTimeLimit: 300 * time.Millisecond, WallTimeLimit: time.Minute}, func(t *testing.T, r *Renderer) {
		for name, source := range map[string]string{
			"in component": "export default function X() { while (true) {} }\n",
			"at load":      "while (true) {}\nexport default () => <p/>;\n",
			"catching":     "export default function X() { for (;;) { try { while (true) {} } catch (e) {} } }\n",
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				msg := MustFailRender(t, r, source)
				if msg != "reactSource: render exceeded the 300ms CPU time limit" {
					t.Errorf("message %q", msg)
				}
			})
		}
	})
}

func TestRenderReactCPUClockIgnoresWaiting(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("per-thread CPU clocks are read on Linux only")
	}
	r := MustNew(t, Config{CPUTimeLimit: 300 * time.Millisecond, WallTimeLimit: time.Minute})
	r.testHook = func(vm *goja.Runtime) {
		// A native call that waits without using CPU: a second of it must not count as CPU time.
		if err := vm.Set("wait", func() { time.Sleep(time.Second) }); err != nil {
			t.Errorf("set wait: %v", err)
		}
	}
	html := MustRender(t, r, "export default function X() { (globalThis as any).wait(); return <p>waited</p>; }\n")
	assertContains(t, html, "<p>waited</p>")
}

func TestRenderReactWallTimeLimitAbandonsStuckRuntime(t *testing.T) {
	t.Parallel()
	r := MustNew(t, Config{MaxConcurrent: 1, WallTimeLimit: 200 * time.Millisecond})
	release := make(chan struct{})
	r.testHook = func(vm *goja.Runtime) {
		// A native call that ignores interrupts, like a long Array.prototype.join would.
		if err := vm.Set("stuck", func() { <-release }); err != nil {
			t.Errorf("set stuck: %v", err)
		}
	}
	msg := MustFailRender(t, r, "export default function X() { (globalThis as any).stuck(); return <p/>; }\n")
	if msg != "reactSource: render exceeded the 200ms time limit" {
		t.Errorf("message %q", msg)
	}
	// The stuck runtime keeps its slot until it stops, so runaway renders never exceed MaxConcurrent.
	if n := len(r.slots); n != 1 {
		t.Errorf("%d slots in use while the abandoned runtime runs, want 1", n)
	}
	close(release)
	assertContains(t, MustRender(t, r, "export default () => <p>free</p>;\n"), "<p>free</p>")
}

func TestRenderReactMemoryLimit(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{MemoryLimit: 64 << 20, CPUTimeLimit: time.Minute}, func(t *testing.T, r *Renderer) {
		msg := MustFailRender(t, r, `export default function X() {
  const a: string[] = [];
  for (;;) a.push("x".repeat(1 << 20) + a.length);
}
`)
		if msg != "reactSource: render exceeded the 64 MiB memory limit" {
			t.Errorf("message %q", msg)
		}
		// The process and the renderer are still fine.
		assertContains(t, MustRender(t, r, "export default () => <p>ok</p>;\n"), "<p>ok</p>")
	})
}

func TestRenderReactContextCanceled(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{CPUTimeLimit: time.Minute}, func(t *testing.T, r *Renderer) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for len(r.slots) == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, err := r.RenderReact(ctx, "export default function X() { while (true) {} }\n")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestRenderReactWaitsForSlot(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{MaxConcurrent: 1, CPUTimeLimit: time.Minute}, testWaitsForSlot)
}

func testWaitsForSlot(t *testing.T, r *Renderer) {
	busy, stop := context.WithCancel(context.Background())
	defer stop()
	first := make(chan error, 1)
	go func() {
		_, err := r.RenderReact(busy, "export default function X() { while (true) {} }\n")
		first <- err
	}()
	for len(r.slots) == 0 {
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.RenderReact(ctx, "export default () => <p/>;\n")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for a render slot") {
		t.Fatalf("err = %v, want a canceled wait for a slot", err)
	}

	stop()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first render: %v", err)
	}
	// The slot is free again once the interrupted runtime has stopped.
	assertContains(t, MustRender(t, r, "export default () => <p>next</p>;\n"), "<p>next</p>")
}

func TestRenderReactIsolation(t *testing.T) {
	t.Parallel()
	forEachMode(t, Config{}, testIsolation)
}

func testIsolation(t *testing.T, r *Renderer) {
	MustRender(t, r, `import * as React from "react";
(globalThis as any).leaked = "yes";
(React as any).leaked = "yes";
require("@react-email/components").Text = () => "hijacked";
(String.prototype as any).leaked = "yes";
Object.prototype.toString = () => "hijacked";
export default () => <p>first</p>;
`)
	html := MustRender(t, r, `import * as React from "react";
import { Text } from "@react-email/components";
export default () => (
  <Text>
    {typeof (globalThis as any).leaked}|{typeof (React as any).leaked}|{typeof ("" as any).leaked}|{Object.prototype.toString.call([])}
  </Text>
);
`)
	assertContains(t, html, `>undefined|undefined|undefined|[object Array]</p>`)
}

func TestRenderReactRecoversPanic(t *testing.T) {
	t.Parallel()
	r := MustNew(t, Config{})
	r.testHook = func(vm *goja.Runtime) {
		if err := vm.Set("explode", func() { panic("engine bug") }); err != nil {
			t.Errorf("set explode: %v", err)
		}
	}
	msg := MustFailRender(t, r, "export default function X() { (globalThis as any).explode(); return <p/>; }\n")
	if msg != "reactSource: render failed: engine bug" {
		t.Errorf("message %q", msg)
	}
	assertContains(t, MustRender(t, r, "export default () => <p>after</p>;\n"), "<p>after</p>")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{CPUTimeLimit: -1}, {WallTimeLimit: -1}, {MemoryLimit: -1}, {MaxSourceBytes: -1}, {MaxOutputBytes: -1},
		{MaxConcurrent: -1}, {MaxCallStack: -1},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	r := MustNew(t, Config{})
	want := Config{
		CPUTimeLimit: DefaultCPUTimeLimit, WallTimeLimit: 10 * time.Second, MemoryLimit: DefaultMemoryLimit, MaxSourceBytes: DefaultMaxSourceBytes,
		MaxOutputBytes: DefaultMaxOutputBytes, MaxConcurrent: DefaultMaxConcurrent, MaxCallStack: DefaultMaxCallStack,
	}
	if r.cfg != want {
		t.Errorf("defaults %+v, want %+v", r.cfg, want)
	}
}

func TestDecodeReactError(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Error: Minified React error #130; visit https://reactjs.org/docs/error-decoder.html?invariant=130&args[]=undefined&args[]= for the full message",
			"Error: Element type is invalid: expected a string (for built-in components) or a class/function (for composite components) but got: undefined."},
		{"Error: Minified React error #31; visit https://reactjs.org/docs/error-decoder.html?invariant=31&args[]=object%20with%20keys%20%7Ba%7D for the full message",
			"Error: Objects are not valid as a React child (found: object with keys {a}). If you meant to render a collection of children, use an array instead."},
		{"Error: Minified React error #999; visit https://reactjs.org/docs/error-decoder.html?invariant=999 for the full message",
			"Error: Minified React error #999; visit https://reactjs.org/docs/error-decoder.html?invariant=999 for the full message"},
		{"Error: plain", "Error: plain"},
	}
	for _, tt := range tests {
		if got := decodeReactError(tt.in); got != tt.want {
			t.Errorf("decodeReactError(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// BenchmarkRender measures a whole render of a typical template: esbuild transform, a fresh runtime, the
// bundle's start-up, the template and renderToStaticMarkup.
func BenchmarkRender(b *testing.B) {
	r := MustNew(b, Config{MaxConcurrent: 1})
	ctx := context.Background()
	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		if _, err := r.RenderReact(ctx, welcomeTemplate); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// reportCPU reports the process's CPU time per operation since start: on a busy machine, CPU per render
// says more than wall-clock time per render.
func reportCPU(b *testing.B, start time.Duration) {
	if start >= 0 {
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

// BenchmarkBundleStart measures the part of a render that pooling runtimes would save: a fresh runtime
// running the precompiled bundle and the glue.
func BenchmarkBundleStart(b *testing.B) {
	r := MustNew(b, Config{})
	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		vm := goja.New()
		if _, err := vm.RunProgram(r.bundle); err != nil {
			b.Fatal(err)
		}
		if _, err := vm.RunProgram(r.glue); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkCompileBundle measures what New does once: compiling the embedded bundle.
func BenchmarkCompileBundle(b *testing.B) {
	cpu := processCPU(b)
	for b.Loop() {
		if _, err := compileTrusted("react-email.js", bundleSource); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}
