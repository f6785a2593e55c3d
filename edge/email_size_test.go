package edge_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/edge"
)

// sendBody writes a send body by hand (a map through json.Marshal would hold it twice more): the minimal
// send with extra raw JSON members, such as `"attachments":[...]`.
func sendBody(extra ...string) string {
	return `{"from":"ada@example.org","to":"bob@example.net","subject":"Hi","text":"hello"` +
		func() string {
			if len(extra) == 0 {
				return ""
			}
			return "," + strings.Join(extra, ",")
		}() + `}`
}

// attachmentsOf is an attachments member of n attachments of decoded bytes each, in content that is not
// base64 at all: were it decoded, the answer would be a base64 error rather than a size error.
func attachmentsOf(n, decoded int) string {
	content := hugeBase64(decoded)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `{"filename":"f.bin","contentType":"application/octet-stream","content":"` + content + `"}`
	}
	return `"attachments":[` + strings.Join(parts, ",") + `]`
}

// TestOversizedSendIsA400NamingTheBound: a send body over the route's bound that breaks an attachment or
// body size bound answers SPEC §8's 400 with the field's path, decided from lengths alone, not 413; a body
// over the bound that breaks none is still 413. The core is never called.
func TestOversizedSendIsA400NamingTheBound(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	tenMiB := 10 << 20

	cases := []struct {
		name, path, body string
		status           int
		details          []string
		message          string
	}{
		{"attachments over 25 MiB in total", "/v1/emails", sendBody(attachmentsOf(5, tenMiB)),
			400, []string{"attachments.2.content"}, "25 MiB"},
		{"one attachment of 60 MiB", "/v1/emails", sendBody(attachmentsOf(1, 60<<20)),
			400, []string{"attachments.0.content"}, "10 MiB"},
		{"html of 49 MiB", "/v1/emails", sendBody(`"html":"` + strings.Repeat("h", 49<<20) + `"`),
			400, []string{"html"}, "5 MiB"},
		{"nothing bounded, only large", "/v1/emails", sendBody(`"padding":"` + strings.Repeat("p", int(edge.SendMaxBodyBytes)) + `"`),
			413, nil, ""},
		{"a batch item's attachments", "/v1/emails/batch",
			`{"emails":[` + sendBody() + `,` + sendBody(attachmentsOf(6, tenMiB)) + `]}`,
			400, []string{"emails.1.attachments.2.content"}, "25 MiB"},
		{"a batch over its bound with nothing bounded", "/v1/emails/batch",
			`{"emails":[` + sendBody(`"padding":"`+strings.Repeat("p", int(edge.BatchMaxBodyBytes))+`"`) + `]}`,
			413, nil, ""},
	}
	for _, tc := range cases {
		if len(tc.body) <= int(edge.SendMaxBodyBytes) {
			t.Fatalf("%s: the body (%d bytes) is within the bound; the case tests nothing", tc.name, len(tc.body))
		}
		r := b.do(t, "POST", tc.path, sendKey, tc.body)
		if tc.status == 413 {
			mustError(t, r, 413, "Request Entity Too Large", "Request body is too large")
			continue
		}
		body := mustError(t, r, 400, "Bad Request", "Validation failed")
		if got := detailPaths(t, body); !slices.Equal(got, tc.details) || !strings.Contains(string(r.raw), tc.message) {
			t.Errorf("%s: %s, want details %v saying %q", tc.name, r.raw, tc.details, tc.message)
		}
	}
	if n := b.fake.called("Send") + b.fake.called("SendBatch"); n != 0 {
		t.Errorf("the core was called %d times", n)
	}
	// The same bounds within the route's bound read the same (the schema and Resolve answer there).
	r := b.do(t, "POST", "/v1/emails", sendKey, sendBody(attachmentsOf(3, 9<<20)))
	if got := detailPaths(t, mustError(t, r, 400, "", "Validation failed")); !slices.Equal(got, []string{"attachments.2.content"}) ||
		!strings.Contains(string(r.raw), "expected attachments to total at most 25 MiB after base64 decoding") {
		t.Errorf("within the bound: %s", r.raw)
	}
}
