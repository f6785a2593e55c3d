package edge_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// get fetches path with the given request headers, without the client's transparent gzip.
func get(tb testing.TB, b *testBundle, path string, headers ...string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest("GET", b.srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return res, body
}

// checkBrowserHeaders asserts the headers every response carries, HTML ones above all.
func checkBrowserHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	for name, want := range map[string]string{
		"default-src":     "'self'",
		"script-src":      "'self'",
		"style-src":       "'self'",
		"object-src":      "'none'",
		"base-uri":        "'none'",
		"frame-ancestors": "'none'",
	} {
		if directives[name] != want {
			t.Errorf("%s: CSP %s is %q, want %q (policy %q)", what, name, directives[name], want, csp)
		}
	}
	if strings.Contains(csp, "unsafe-") || strings.Contains(csp, "http:") || strings.Contains(csp, "https:") || strings.Contains(csp, "*") {
		t.Errorf("%s: CSP allows inline or eval code or another origin: %q", what, csp)
	}
	for name, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %s is %q, want %q", what, name, got, want)
		}
	}
}

func TestBrowserHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	res, page := get(t, b, "/docs")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/docs: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	checkBrowserHeaders(t, "/docs", res.Header)

	// JSON, the spec, errors from huma and from the mux, assets, health: the same headers everywhere.
	for _, p := range []string{"/v1/openapi.json", "/v1/emails/not-a-uuid", "/nope", "/docs/assets/docs.js", "/healthz"} {
		res, _ := get(t, b, p, "Authorization", "Bearer "+sendKey)
		checkBrowserHeaders(t, p, res.Header)
	}

	// The policy holds for the page as written: no inline script or handler, nothing from another origin.
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(page), -1) {
		if !strings.Contains(tag, `src="/docs/assets/`) {
			t.Errorf("/docs has a script that is not an embedded file: %s", tag)
		}
	}
	if regexp.MustCompile(`<script[^>]*>[^<\s]`).Match(page) || regexp.MustCompile(`\son[a-z]+=`).Match(page) ||
		strings.Contains(string(page), "style=") {
		t.Error("/docs carries inline script, event handlers or style attributes the policy refuses")
	}
	if m := regexp.MustCompile(`(src|href)="(https?:)?//`).Find(page); m != nil {
		t.Errorf("/docs loads from another origin: %s", m)
	}
}

func TestDocsAssetsAreEmbedded(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	_, page := get(t, b, "/docs")
	refs := regexp.MustCompile(`(?:src|href)="(/docs/assets/[^"]+)"`).FindAllSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("/docs references %d assets, want the viewer's script and stylesheet and docs.js: %s", len(refs), page)
	}
	if !bytes.Contains(page, []byte(`data-spec-url="/v1/openapi.json"`)) {
		t.Errorf("/docs does not point the viewer at /v1/openapi.json: %s", page)
	}
	for _, ref := range refs {
		p := string(ref[1])
		res, body := get(t, b, p)
		if res.StatusCode != 200 || len(body) == 0 {
			t.Errorf("%s: %d, %d bytes", p, res.StatusCode, len(body))
			continue
		}
		wantType := map[bool]string{true: "text/css", false: "text/javascript"}[strings.HasSuffix(p, ".css")]
		if !strings.HasPrefix(res.Header.Get("Content-Type"), wantType) {
			t.Errorf("%s: Content-Type %q, want %s", p, res.Header.Get("Content-Type"), wantType)
		}
		etag := res.Header.Get("ETag")
		if etag == "" || res.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: ETag %q, Cache-Control %q", p, etag, res.Header.Get("Cache-Control"))
			continue
		}
		if res, _ := get(t, b, p, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match: %d, want 304", p, res.StatusCode)
		}
	}

	// The viewer's script is large; clients that accept gzip get it compressed, byte for byte the same.
	const bundle = "/docs/assets/swagger-ui/swagger-ui-bundle.js"
	_, plain := get(t, b, bundle)
	res, zipped := get(t, b, bundle, "Accept-Encoding", "gzip, deflate")
	if res.Header.Get("Content-Encoding") != "gzip" || len(zipped) >= len(plain)/2 {
		t.Fatalf("gzip: Content-Encoding %q, %d of %d bytes", res.Header.Get("Content-Encoding"), len(zipped), len(plain))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, plain) {
		t.Errorf("gzip body does not decode to the script (err %v)", err)
	}
	if !strings.Contains(res.Header.Get("Vary"), "Accept-Encoding") {
		t.Errorf("Vary %q", res.Header.Get("Vary"))
	}
	if res, _ := get(t, b, bundle, "Accept-Encoding", "gzip;q=0"); res.Header.Get("Content-Encoding") != "" {
		t.Error("gzip sent to a client that refused it")
	}

	// The licence travels with the viewer; unknown files are the usual 404.
	if res, body := get(t, b, "/docs/assets/swagger-ui/LICENSE"); res.StatusCode != 200 || !bytes.Contains(body, []byte("Apache License")) {
		t.Errorf("LICENSE: %d", res.StatusCode)
	}
	mustError(t, b.do(t, "GET", "/docs/assets/nope.js", "", nil), 404, "Not Found", "")
	mustError(t, b.do(t, "GET", "/docs/assets/../server.go", "", nil), 404, "", "")
}
