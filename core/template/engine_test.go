package template

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// mustCompile compiles src or fails the test.
func mustCompile(tb testing.TB, src string, mode Mode) *Compiled {
	tb.Helper()
	c, err := Compile(src, mode)
	if err != nil {
		tb.Fatalf("Compile(%q, %s): %v", src, mode, err)
	}
	return c
}

// jsonVars decodes a JSON object the way the edge decodes a send's variables.
func jsonVars(tb testing.TB, s string) map[string]any {
	tb.Helper()
	var vars map[string]any
	if err := json.Unmarshal([]byte(s), &vars); err != nil {
		tb.Fatalf("decode %s: %v", s, err)
	}
	return vars
}

func TestPlaceholderSyntax(t *testing.T) {
	t.Parallel()
	vars := jsonVars(t, `{"a": "A", "b": "B", "a_1": "A1", "_x": "X", "user": {"firstName": "Ada", "address": {"city": "Paris"}}}`)
	for _, tc := range []struct{ name, src, want string }{
		{"bare", "{{a}}", "A"},
		{"spaces", "{{ a }}", "A"},
		{"tabs and newlines", "{{\t a\n\r}}", "A"},
		{"dotted", "{{ user.firstName }}", "Ada"},
		{"deeply dotted", "{{user.address.city}}", "Paris"},
		{"underscore and digits", "{{a_1}}{{_x}}", "A1X"},
		{"literal around", "x{{a}}y{{b}}z", "xAyBz"},
		{"empty braces", "<{{}}>", "<>"},
		{"blank braces", "<{{ }}>", "<>"},
		{"trailing dot", "<{{a.}}>", "<>"},
		{"leading dot", "<{{.a}}>", "<>"},
		{"double dot", "<{{ a..b }}>", "<>"},
		{"space inside path", "<{{ user. firstName }}>", "<>"},
		{"digit first", "<{{1a}}>", "<>"},
		{"expression", "<{{ a + b }}>", "<>"},
		{"call", "<{{ a() }}>", "<>"},
		{"filter", "<{{ a | upper }}>", "<>"},
		{"index", "<{{ a[0] }}>", "<>"},
		{"non-ASCII identifier", "<{{ prénom }}>", "<>"},
		{"hyphen", "<{{ first-name }}>", "<>"},
		{"triple braces", "<{{{a}}}>", "<>"},
		{"triple open, double close", "<{{{a}}>", "<>"},
		{"extra closing brace", "{{a}}}", "A}"},
		{"css block", ".c{color:{{a}}}", ".c{color:A}"},
		{"nested opening pairs with first close", "<{{ a {{ b }}>", "<>"},
		{"nested then close", "{{ a {{ b }} }}", " }}"},
		{"unclosed", "{{ a", "{{ a"},
		{"unclosed single close", "{{ a }", "{{ a }"},
		{"unclosed after a placeholder", "{{a}} {{ b", "A {{ b"},
		{"lone braces", "{ a } {a}", "{ a } {a}"},
		{"missing variable", "<{{ nope }}>", "<>"},
		{"missing nested", "<{{ user.nope.deeper }}>", "<>"},
		{"through a string", "<{{ a.length }}>", "<>"},
		{"unicode literal", "héllo {{a}} ✓", "héllo A ✓"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []Mode{Text, HTML} {
				if got := mustCompile(t, tc.src, mode).Render(vars); got != tc.want {
					t.Errorf("%s: Render(%q) = %q, want %q", mode, tc.src, got, tc.want)
				}
			}
		})
	}
}

func TestValues(t *testing.T) {
	t.Parallel()
	vars := jsonVars(t, `{
		"int": 42, "neg": -7, "big": 12345678901234, "frac": 1.5, "tenth": 0.1, "zero": 0, "negzero": -0.0,
		"huge": 1e21, "tiny": 1e-7, "exp": 2.5e10,
		"yes": true, "no": false, "null": null, "list": [1, 2], "obj": {"k": "v"},
		"html": "<b>\"Tom\" & 'Jerry'</b>", "multi": "a\r\nb\nc"
	}`)
	vars["typed"] = map[string]any{"int": 3, "i64": int64(-4), "u8": uint8(5), "f32": float32(0.5),
		"num": json.Number("12.50"), "strs": map[string]string{"k": "<v>"}, "other": struct{}{}}
	for _, tc := range []struct{ src, want string }{
		{"{{int}}", "42"},
		{"{{neg}}", "-7"},
		{"{{big}}", "12345678901234"},
		{"{{frac}}", "1.5"},
		{"{{tenth}}", "0.1"},
		{"{{zero}}", "0"},
		{"{{negzero}}", "0"},
		{"{{huge}}", "1e+21"},
		{"{{tiny}}", "1e-07"},
		{"{{exp}}", "25000000000"},
		{"{{yes}}/{{no}}", "true/false"},
		{"[{{null}}]", "[]"},
		{"[{{list}}]", "[]"},
		{"[{{obj}}]", "[]"},
		{"{{obj.k}}", "v"},
		{"{{html}}", "&lt;b&gt;&#34;Tom&#34; &amp; &#39;Jerry&#39;&lt;/b&gt;"},
		{"{{typed.int}} {{typed.i64}} {{typed.u8}} {{typed.f32}}", "3 -4 5 0.5"},
		{"{{typed.num}}", "12.50"},
		{"{{typed.strs.k}}", "&lt;v&gt;"},
		{"[{{typed.other}}]", "[]"},
	} {
		if got := mustCompile(t, tc.src, Text).Render(vars); got != tc.want {
			t.Errorf("Render(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
	if got := mustCompile(t, "{{multi}}", Text).Render(vars); got != "a\r\nb\nc" {
		t.Errorf("text keeps line breaks: got %q", got)
	}
	if got := mustCompile(t, "Re: {{multi}}", Subject).Render(vars); got != "Re: a  b c" {
		t.Errorf("subject line breaks: got %q, want spaces", got)
	}
	if got := mustCompile(t, "{{html}}", Subject).Render(vars); !strings.HasPrefix(got, "&lt;b&gt;") {
		t.Errorf("subject values are HTML-escaped too: got %q", got)
	}
	if got := mustCompile(t, "Hi {{name}}", Subject).Render(nil); got != "Hi " {
		t.Errorf("nil variables: got %q", got)
	}
}

func TestSubjectRefusesLineBreaks(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"a\nb", "a\r\nb", "line\r"} {
		_, err := Compile(src, Subject)
		var syntax *SyntaxError
		if !errors.As(err, &syntax) || syntax.Msg != "must not contain CR or LF" {
			t.Errorf("Compile(%q, Subject) = %v, want the CR/LF error", src, err)
		}
	}
	if _, err := Compile("a\nb", Text); err != nil {
		t.Errorf("text may span lines: %v", err)
	}
}

func TestHTMLContexts(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"v":    `<script>alert("x")</script>`,
		"d":    "--!>",
		"sp":   "a b=c",
		"name": "Ada",
		"url":  "https://example.com/?a=1&b=2",
		"e":    "",
	}
	for _, tc := range []struct{ name, src, want string }{
		{"text", `<p>{{v}}</p>`, `<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</p>`},
		{"double-quoted attribute", `<p title="{{v}}">`, `<p title="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;">`},
		{"single-quoted attribute", `<p title='{{ name }}'>`, `<p title='Ada'>`},
		{"unquoted attribute is quoted", `<p title={{sp}} class=x>`, `<p title="a b=c" class=x>`},
		{"empty unquoted stays an empty value", `<p title={{e}} class=x>`, `<p title="" class=x>`},
		{"unquoted with literal around", `<p title=a{{name}}"b>`, `<p title="aAda&quot;b">`},
		{"url value escaped", `<a href="{{url}}">`, `<a href="https://example.com/?a=1&amp;b=2">`},
		{"comment escapes dashes", `<!-- {{d}} -->`, `<!-- &#45;&#45;&#33;&gt; -->`},
		{"conditional comment", `<!--[if mso]><v:rect href="{{name}}"/><![endif]-->`, `<!--[if mso]><v:rect href="Ada"/><![endif]-->`},
		{"title", `<title>{{v}}</title>`, `<title>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</title>`},
		{"textarea", `<textarea>{{name}}</textarea>`, `<textarea>Ada</textarea>`},
		{"script is still escaped", `<script>var n = "{{v}}";</script>`, `<script>var n = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;";</script>`},
		{"style", `<style>.a{color:{{name}}}</style>`, `<style>.a{color:Ada}</style>`},
		{"tag name", `<p{{name}}>x</p>`, `<p>x</p>`},
		{"attribute name", `<p {{name}}="x">`, `<p ="x">`},
		{"between attributes", `<p a=1 {{name}} b=2>`, `<p a=1  b=2>`},
		{"end tag", `</p{{name}}>`, `</p>`},
		{"end tag attribute", `</p title="{{name}}">`, `</p title="">`},
		{"doctype", `<!DOCTYPE {{name}}>`, `<!DOCTYPE >`},
		{"bogus comment", `<!{{name}}>x`, `<!>x`},
		{"processing instruction", `<?x {{name}}?>`, `<?x ?>`},
		{"srcdoc is a document", `<iframe srcdoc="{{v}}"></iframe>`, `<iframe srcdoc=""></iframe>`},
		{"after a less-than sign", `a <{{name}} b`, `a < b`},
		{"less-than then letters", `<{{name}}p onclick=x>`, `<p onclick=x>`},
		{"would-be end tag in title", `<title>x</ti{{name}}tle>`, `<title>x</title>`},
		{"would-be end tag in script", `<script>a</scr{{name}}ipt>`, `<script>a</script>`},
		{"script escape start", `<script><!-{{name}}-x</script>`, `<script><!--x</script>`},
		{"script dash neighbours", `<script>a-{{name}}; b{{name}}>c; d{{name}}-e; f{{name}}g</script>`, `<script>a-; b>c; d-e; fAdag</script>`},
		{"comment start", `<!--{{name}} x -->`, `<!-- x -->`},
		{"comment end joins", `<!-- a -{{name}}-> -->`, `<!-- a --> -->`},
		{"comment bang", `<!-- a --{{name}}!> b -->`, `<!-- a --!> b -->`},
		{"adjacent placeholders act as one", `<!-- a {{name}}{{name}} b -->`, `<!-- a AdaAda b -->`},
		{"cut-off tag dropped", `<p>{{name}}</p><a href="x`, `<p>Ada</p>`},
		{"cut-off tag with placeholder", `<p>{{name}}</p><a href="{{url}}`, `<p>Ada</p>`},
		{"void and self-closing", `<br/><img alt={{name}}/>`, `<br/><img alt="Ada/">`},
		{"entity in text", `<p>&amp;{{name}}</p>`, `<p>&amp;Ada</p>`},
		{"event handler attribute is escaped", `<p onclick="f('{{v}}')">`, `<p onclick="f('&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;')">`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := mustCompile(t, tc.src, HTML).Render(vars); got != tc.want {
				t.Errorf("Render(%q)\n got %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}

func TestHTMLWithoutPlaceholdersIsUnchanged(t *testing.T) {
	t.Parallel()
	src := `<!DOCTYPE html><html><head><title>T</title><style>a{color:red}</style></head>` +
		`<body><!--[if mso]><table><![endif]--><p class=x id='y' data-z="1">a &lt; b &amp; c</p>` +
		`<a href="https://example.com/x?y=1&amp;z=2">link</a><img src="cid:logo" alt=""/></body></html>`
	if got := mustCompile(t, src, HTML).Render(nil); got != src {
		t.Errorf("Render changed a template without placeholders:\n got %q\nwant %q", got, src)
	}
}

func TestURLAttributes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		value     string
		want      string
	}{
		{"javascript value", `<a href="{{u}}">`, "javascript:alert(1)", `<a href="">`},
		{"mixed case", `<a href="{{u}}">`, "JaVaScRiPt:alert(1)", `<a href="">`},
		{"leading whitespace", `<a href="{{u}}">`, " \tjavascript:alert(1)", `<a href="">`},
		{"control characters inside", `<a href="{{u}}">`, "java\x01scr\nipt:alert(1)", `<a href="">`},
		{"NUL is a character", `<img src="{{u}}">`, "data:image/png\x00,x", `<img src="">`},
		{"vbscript", `<a href="{{u}}">`, "vbscript:msgbox(1)", `<a href="">`},
		{"data html", `<a href="{{u}}">`, "data:text/html,<script>alert(1)</script>", `<a href="">`},
		{"data svg", `<img src="{{u}}">`, "data:image/svg+xml;base64,PHN2Zz4=", `<img src="">`},
		{"data png", `<img src="{{u}}">`, "data:image/png;base64,iVBO", `<img src="data:image/png;base64,iVBO">`},
		{"data jpeg", `<img src="{{u}}">`, "DATA:IMAGE/JPEG,x", `<img src="DATA:IMAGE/JPEG,x">`},
		{"data image prefix only", `<img src="{{u}}">`, "data:image/pngx,x", `<img src="">`},
		{"https", `<a href="{{u}}">`, "https://example.com/a:b", `<a href="https://example.com/a:b">`},
		{"mailto", `<a href="{{u}}">`, "mailto:a@example.com", `<a href="mailto:a@example.com">`},
		{"relative with colon later", `<a href="/{{u}}">`, "javascript:x", `<a href="/javascript:x">`},
		{"scheme built from literal and value", `<a href="java{{u}}">`, "script:alert(1)", `<a href="">`},
		{"scheme built from value and literal", `<a href="{{u}}script:alert(1)">`, "java", `<a href="">`},
		{"entity completed by value", `<a href="&#x6a{{u}}">`, ";avascript:x", `<a href="">`},
		{"unquoted", `<a href={{u}}>`, "javascript:x", `<a href="">`},
		{"xlink", `<svg><a xlink:href="{{u}}"></a></svg>`, "javascript:x", `<svg><a xlink:href=""></a></svg>`},
		{"form action", `<form action="{{u}}">`, "javascript:x", `<form action="">`},
		{"formaction", `<button formaction="{{u}}">`, "javascript:x", `<button formaction="">`},
		{"background", `<td background="{{u}}">`, "javascript:x", `<td background="">`},
		{"svg animation", `<svg><set attributeName="href" to="{{u}}"/></svg>`, "javascript:x", `<svg><set attributeName="href" to=""/></svg>`},
		{"srcset item", `<img srcset="a.png 1x, {{u}} 2x">`, "javascript:x", `<img srcset="">`},
		{"srcset images", `<img srcset="{{u}} 1x, b.png 2x">`, "data:image/png;base64,AA", `<img srcset="data:image/png;base64,AA 1x, b.png 2x">`},
		{"meta refresh", `<meta http-equiv="refresh" content="0; url={{u}}">`, "javascript:x", `<meta http-equiv="refresh" content="">`},
		{"meta refresh quoted", `<meta http-equiv="refresh" content="0;URL='{{u}}'">`, "javascript:x", `<meta http-equiv="refresh" content="">`},
		{"not a URL attribute", `<p title="{{u}}">`, "javascript:x", `<p title="javascript:x">`},
		{"text is not a URL", `<p>{{u}}</p>`, "javascript:x", `<p>javascript:x</p>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := mustCompile(t, tc.src, HTML).Render(map[string]any{"u": tc.value})
			if got != tc.want {
				t.Errorf("Render(%q) with %q\n got %q\nwant %q", tc.src, tc.value, got, tc.want)
			}
		})
	}
}

func TestLiteralURLAttributes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{`<a href="javascript:alert(1)">x</a>`, `<a href="">x</a>`},
		{`<a href='vbscript:x'>x</a>`, `<a href=''>x</a>`},
		{`<a href=javascript:x title=t>x</a>`, `<a href="" title=t>x</a>`},
		{`<a HREF="java&#x73;cript:x">`, `<a HREF="">`},
		{`<a href="java&Tab;script:x">`, `<a href="">`},
		{`<a href="javascript&colon;x">`, `<a href="">`},
		{`<a href="&#106;&#97;vascript:x">`, `<a href="">`},
		{`<a href="  javascript:x">`, `<a href="">`},
		{`<a href="https://ok" href="javascript:x">`, `<a href="https://ok" href="">`},
		{`<img src="data:text/html;base64,PHNjcmlwdD4=">`, `<img src="">`},
		{`<img src="data:image/gif;base64,R0lGOD">`, `<img src="data:image/gif;base64,R0lGOD">`},
		{`<object data="data:text/html,x"></object>`, `<object data=""></object>`},
		{`<p>javascript:alert(1)</p>`, `<p>javascript:alert(1)</p>`},
		{`<!-- <a href="javascript:x"> -->`, `<!-- <a href="javascript:x"> -->`},
		{`<style>a{background:url(javascript:x)}</style>`, `<style>a{background:url(javascript:x)}</style>`},
	} {
		if got := mustCompile(t, tc.src, HTML).Render(nil); got != tc.want {
			t.Errorf("Render(%q)\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

func TestDangerousScheme(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"javascript:", true},
		{"JAVASCRIPT:x", true},
		{"\x01java\tscript :x", true},
		{"java\x00script:x", false},
		{"data:image/gif\x00", true},
		{"vbscript:x", true},
		{"data:", true},
		{"data:,hello", true},
		{"data:text/plain,x", true},
		{"data:image/svg+xml,<svg>", true},
		{"data:image/png", false},
		{"data:image/png,", false},
		{"data:image/webp;base64,x", false},
		{"data:image/x-icon;base64,x", false},
		{"data:image/avif,x", false},
		{"data:image/bmp,x", false},
		{"data:image/jpg,x", false},
		{"data:image/tiff,x", true},
		{"http://x", false},
		{"", false},
		{"javascrip", false},
		{"xjavascript:", false},
	} {
		if got := dangerousScheme(tc.v); got != tc.want {
			t.Errorf("dangerousScheme(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestAmbiguousConstructsDoNotCompile(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`<svg><style><a href="javascript:x"></style></svg>`,
		"<math><mtext><style>\n<b></style>",
		`<select><xmp></select><a href="javascript:1"></xmp>`,
		`<svg></svg><p><script>if (a<b) {}</script>`,
		`<svg><![CDATA[ > ]]></svg>`,
	} {
		_, err := Compile(src, HTML)
		var syntax *SyntaxError
		if !errors.As(err, &syntax) || syntax.Line == 0 {
			t.Errorf("Compile(%q) = %v, want a located SyntaxError", src, err)
		}
	}
	for _, src := range []string{
		`<svg><style>.a{fill:red}</style><![CDATA[ x ]]></svg>`,
		`<script>if (a<b) {}</script><svg></svg>`,
	} {
		if _, err := Compile(src, HTML); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
	_, err := Compile("<p>\n  <svg><title>a<b</title>", HTML)
	var syntax *SyntaxError
	if !errors.As(err, &syntax) || syntax.Line != 2 || syntax.Column != 16 {
		t.Errorf("error position: %v, want line 2, column 16", err)
	}
}

func TestPlaceholdersList(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, `<a href="{{ url }}" {{ bad }}>{{ user.name }} {{ a + b }}</a>`, HTML)
	got := strings.Join(c.Placeholders(), ",")
	if got != "url,user.name" {
		t.Errorf("Placeholders() = %q, want url,user.name", got)
	}
}

func TestRenderConcurrently(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, `<a href="{{u}}">{{n}}</a>`, HTML)
	done := make(chan string)
	for i := range 8 {
		go func() {
			u := "https://example.com/"
			if i%2 == 0 {
				u = "javascript:x"
			}
			var last string
			for range 200 {
				last = c.Render(map[string]any{"u": u, "n": i})
			}
			done <- last
		}()
	}
	safe, blanked := 0, 0
	for range 8 {
		switch got := <-done; {
		case strings.HasPrefix(got, `<a href="https://example.com/">`):
			safe++
		case strings.HasPrefix(got, `<a href="">`):
			blanked++
		default:
			t.Errorf("unexpected render %q", got)
		}
	}
	if safe != 4 || blanked != 4 {
		t.Errorf("safe %d, blanked %d; want 4 and 4", safe, blanked)
	}
}
