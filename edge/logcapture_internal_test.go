package edge

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/postmill/postmill/ports"
)

func bufferOf(s string) *boundedBuffer {
	b := &boundedBuffer{limit: ports.MaxLoggedBody}
	b.keep([]byte(s))
	return b
}

func TestMaskURLPassword(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pa55@hooks.example.com/in?x=1":  "https://user:***@hooks.example.com/in?x=1",
		"http://user:p%40ss:w@hooks.example.com:8443": "http://user:***@hooks.example.com:8443",
		"https://a:b@c:d@hooks.example.com/":          "https://a:***@hooks.example.com/",
		"https://:secret@hooks.example.com":           "https://:***@hooks.example.com",
		"https://user@hooks.example.com/in":           "https://user@hooks.example.com/in",
		"https://hooks.example.com/in?next=a:b@c":     "https://hooks.example.com/in?next=a:b@c",
		"https://hooks.example.com/a:b@c#x:y@z":       "https://hooks.example.com/a:b@c#x:y@z",
		"not a url":                                   "not a url",
		`<a href="https://u:p@x.example/">`:           `<a href="https://u:p@x.example/">`, // text holding a URL is no URL
	} {
		if got := maskURLPassword(in); got != want {
			t.Errorf("maskURLPassword(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoggedBodyRedactsSecrets(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, ``},
		{`{"email":"a@example.com","password":"hunter2"}`, `{"email":"a@example.com","password":"[redacted]"}`},
		{`{"token":"svc_live_x.y","id":"k1"}`, `{"id":"k1","token":"[redacted]"}`},
		{`{"attachments":[{"filename":"a.pdf","content":"QUJD"}],"signing_secret":"s","refreshToken":"r"}`,
			`{"attachments":[{"content":"[redacted]","filename":"a.pdf"}],"refreshToken":"[redacted]","signing_secret":"[redacted]"}`},
		{`{"code":"123456","statusCode":400,"n":1.50}`, `{"code":"[redacted]","n":1.50,"statusCode":400}`},
		{`[{"apiKey":"x"}]`, `[{"apiKey":"[redacted]"}]`},
		// The TOTP enrolment answer: the seed is in the URL too, under any field name.
		{`{"otpauthUrl":"otpauth://totp/Postmill:a@example.com?issuer=Postmill&secret=FDK6ETAMBJHL"}`, `{"otpauthUrl":"[redacted]"}`},
		{`{"link":"OTPAUTH://totp/x?secret=ABC","n":["https://x.example/p?id=1&Token=t","https://x.example/p?id=1"]}`,
			`{"link":"[redacted]","n":["[redacted]","https://x.example/p?id=1"]}`},
		// A webhook receiver's Basic credentials in the URL; a user name alone, or an @ in the path, is no secret.
		{`{"url":"https://hook:pa55@hooks.example.com/in","eventTypes":["email.sent"]}`,
			`{"eventTypes":["email.sent"],"url":"[redacted]"}`},
		{`{"url":"https://hook@hooks.example.com/in","u":"https://hooks.example.com/a:b@c"}`,
			`{"u":"https://hooks.example.com/a:b@c","url":"https://hook@hooks.example.com/in"}`},
	} {
		if got := loggedBody(bufferOf(c.in), "application/json"); got != c.want {
			t.Errorf("loggedBody(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := loggedBody(bufferOf("a=1&password=x"), "application/x-www-form-urlencoded"); strings.Contains(got, "password") {
		t.Errorf("a body that is not JSON is logged as %q", got)
	}
	big := `{"html":"` + strings.Repeat("x", ports.MaxLoggedBody) + `","password":"p"}`
	if got := loggedBody(bufferOf(big), "application/json"); strings.Contains(got, "password") || len(got) > 100 {
		t.Errorf("a body over the bound is logged as %.100q", got)
	}
}

func TestTruncatedIP(t *testing.T) {
	for in, want := range map[string]string{"192.0.2.77": "192.0.2.0", "2001:db8:1:2:3::9": "2001:db8:1::"} {
		if got := truncatedIP(netip.MustParseAddr(in)); got != want {
			t.Errorf("truncatedIP(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestLogBufferDropsWhenFull shows that offering never waits: with nobody shipping, rows past the buffer's
// capacity are dropped and counted.
func TestLogBufferDropsWhenFull(t *testing.T) {
	sh := &logShipper{rows: make(chan ports.RequestLog, 3), dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "d"})}
	for range 5 {
		sh.offer(ports.RequestLog{})
	}
	if got := testutil.ToFloat64(sh.dropped); got != 2 {
		t.Errorf("dropped %v, want 2", got)
	}
}
