package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// Bounds across the whole platform: paged lists through the edge, the core and the store (in one process
// and split over the Connect hop), per-organization counts under concurrent creates, the domain creation
// rate, and the size bounds of a send.

// walkPages follows a list route page by page with limit and returns the ids in the order seen, failing on
// a page larger than limit or a cursor on a page that is not full.
func walkPages(t *testing.T, e *env, path, token string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatalf("%s: more than 20 pages", path)
		}
		q := fmt.Sprintf("%s?limit=%d", path, limit)
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := expect(t, e.get(q, token), 200)
		data, ok := r.body["data"].([]any)
		if !ok || len(data) > limit {
			t.Fatalf("%s: %s, want a page of at most %d", q, r.raw, limit)
		}
		for _, d := range data {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			if _, present := r.body["nextCursor"]; !present {
				t.Fatalf("%s: no nextCursor field: %s", q, r.raw)
			}
			return ids
		}
		if len(data) != limit {
			t.Fatalf("%s: a page of %d with a cursor", q, len(data))
		}
		cursor = next
	}
}

// checkPagedLists fills one organization with five of each listed resource and checks every list: the
// bare array still answers (SPEC §9.2), pages of two walk the same rows in the same order, another
// organization sees none of them, and limits or cursors the API does not issue are 400s.
func checkPagedLists(t *testing.T, e *env) {
	t.Helper()
	a := e.MustSignup("pages-"+randomHex(t, 4)+"@example.com", "")
	b := e.MustSignup("pages-"+randomHex(t, 4)+"@example.com", "")
	_, key := e.MustKey(a, []string{"templates:write", "suppressions:write", "webhooks:write"})
	_, keyB := e.MustKey(b, []string{"suppressions:read", "webhooks:read"})
	for i := range 5 {
		expect(t, e.post("/v1/suppressions", key, map[string]any{"address": fmt.Sprintf("s%d@example.com", i)}), 201)
		expect(t, e.post("/v1/templates", key, map[string]any{"name": fmt.Sprintf("t%d", i)}), 201)
		expect(t, e.post("/v1/webhooks", key, map[string]any{"url": fmt.Sprintf("https://hooks.example.com/%d", i), "eventTypes": []string{"email.sent"}}), 201)
		expect(t, e.post("/v1/domains", a.access, map[string]any{"domain": fmt.Sprintf("d%d.pages.example", i)}), 201)
	}
	for _, l := range []struct{ path, token, tokenB string }{
		{"/v1/suppressions", key, keyB},
		{"/v1/templates", a.access, b.access},
		{"/v1/webhooks", key, keyB},
		{"/v1/domains", a.access, b.access},
	} {
		bare := expect(t, e.get(l.path, l.token), 200)
		if bare.list == nil || len(bare.list) != 5 {
			t.Fatalf("%s without limit: %s, want a bare array of 5", l.path, bare.raw)
		}
		var want []string
		for _, item := range bare.list {
			want = append(want, item.(map[string]any)["id"].(string))
		}
		if got := walkPages(t, e, l.path, l.token, 2); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: pages of 2 gave %v, the bare array %v", l.path, got, want)
		}
		if got := walkPages(t, e, l.path, l.tokenB, 2); len(got) != 0 {
			t.Errorf("%s: another organization's pages show %v", l.path, got)
		}
		if r := expect(t, e.get(l.path, l.tokenB), 200); r.list == nil || len(r.list) != 0 {
			t.Errorf("%s: another organization's array: %s", l.path, r.raw)
		}
		for _, bad := range []string{"?limit=0", "?limit=101", "?cursor=not-a-cursor", "?limit=2&cursor=AAAA"} {
			body := errorBody(t, e.get(l.path+bad, l.token), 400, "", "Validation failed")
			if d, _ := body["details"].([]any); len(d) != 1 {
				t.Errorf("%s%s: details %v", l.path, bad, body["details"])
			}
		}
	}
}

func TestListPagingInOneProcess(t *testing.T) {
	t.Parallel()
	checkPagedLists(t, MustStartAll(t))
}

// TestListPagingOverTheSplit runs the same lists through an edge that reaches its core over Connect, so
// the page methods, their queries and their cursors cross the hop.
func TestListPagingOverTheSplit(t *testing.T) {
	t.Parallel()
	coreCfg := testConfig(t, pgtest.URL(t))
	core := MustStart(t, coreCfg, "core")
	edgeCfg := testConfig(t, "")
	edgeCfg.SecretKeys, edgeCfg.CoreURL = coreCfg.SecretKeys, core.app.RPCURL()
	e := MustStart(t, edgeCfg, "edge")
	checkPagedLists(t, e)

	// A template's newest 50 versions on the template, the rest through the version pages.
	a := e.MustSignup("versions@example.com", "")
	_, key := e.MustKey(a, []string{"templates:write"})
	id := expect(t, e.post("/v1/templates", key, map[string]any{"name": "many versions"}), 201).str("id")
	for i := 1; i <= 53; i++ {
		expect(t, e.post("/v1/templates/"+id+"/versions", key, map[string]any{"subject": fmt.Sprintf("v%d", i), "text": "t"}), 201)
	}
	tpl := expect(t, e.get("/v1/templates/"+id, a.access), 200)
	versions, _ := tpl.body["versions"].([]any)
	if len(versions) != 50 || tpl.body["versionsTruncated"] != true ||
		versions[0].(map[string]any)["version"] != float64(4) || versions[49].(map[string]any)["version"] != float64(53) {
		t.Fatalf("template: %d versions, truncated %v", len(versions), tpl.body["versionsTruncated"])
	}
	all := walkPages(t, e, "/v1/templates/"+id+"/versions", a.access, 20)
	if len(all) != 53 {
		t.Fatalf("version pages hold %d versions, want 53", len(all))
	}
	first := expect(t, e.get("/v1/templates/"+id+"/versions?limit=1", a.access), 200)
	if v := first.body["data"].([]any)[0].(map[string]any)["version"]; v != float64(53) {
		t.Fatalf("the first version page starts at %v, want the newest", v)
	}
	b := e.MustSignup("versions-other@example.com", "")
	errorBody(t, e.get("/v1/templates/"+id+"/versions", b.access), 404, "", "")
}

// TestPerOrganizationLimitsHoldUnderConcurrentCreates configures small bounds and fires creates at once:
// exactly the bound succeeds, every other answer is the 403 that names the limit, revoking a key makes
// room for one more, and the domain creation rate answers 429 like verify.
func TestPerOrganizationLimitsHoldUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, pgtest.URL(t))
	cfg.MaxDomainsPerOrg, cfg.MaxWebhooksPerOrg, cfg.MaxAPIKeysPerOrg = 2, 3, 4
	e := MustStart(t, cfg, "all")
	a := e.MustSignup("limits@example.com", "")
	keyID, key := e.MustKey(a, []string{"webhooks:write"}) // the first of the 4 keys

	burst := func(n int, create func(i int) resp) (created int, refused []resp) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := create(i)
				mu.Lock()
				defer mu.Unlock()
				switch r.status {
				case http.StatusCreated:
					created++
				default:
					refused = append(refused, r)
				}
			})
		}
		wg.Wait()
		return created, refused
	}
	check := func(what string, created, want int, refused []resp, resource string, limit int) {
		t.Helper()
		if created != want {
			t.Errorf("%s: %d created, want %d", what, created, want)
		}
		for _, r := range refused {
			body := errorBody(t, r, 403, "resource_limit_reached", "")
			if body["resource"] != resource || body["limit"] != float64(limit) || !strings.Contains(r.str("message"), fmt.Sprint(limit)) {
				t.Errorf("%s refusal: %s", what, r.raw)
			}
		}
	}

	created, refused := burst(8, func(i int) resp {
		return e.post("/v1/webhooks", key, map[string]any{"url": fmt.Sprintf("https://hooks.example.com/%d", i), "eventTypes": []string{"email.sent"}})
	})
	check("webhooks", created, 3, refused, "webhooks", 3)

	created, refused = burst(6, func(i int) resp {
		return e.post("/v1/api-keys", a.access, map[string]any{"name": fmt.Sprintf("k%d", i)})
	})
	check("api keys", created, 3, refused, "api_keys", 4)
	if !strings.Contains(refused[0].str("message"), "POSTMILL_MAX_API_KEYS_PER_ORG") {
		t.Errorf("the refusal does not say how to raise the limit: %s", refused[0].raw)
	}
	expect(t, e.del("/v1/api-keys/"+keyID, a.access), 200)
	expect(t, e.post("/v1/api-keys", a.access, map[string]any{"name": "after a revoke"}), 201)
	errorBody(t, e.post("/v1/api-keys", a.access, map[string]any{"name": "over again"}), 403, "resource_limit_reached", "")

	created, refused = burst(5, func(i int) resp {
		return e.post("/v1/domains", a.access, map[string]any{"domain": fmt.Sprintf("d%d.limits.example", i)})
	})
	check("domains", created, 2, refused, "domains", 2)
	held := expect(t, e.get("/v1/domains", a.access), 200)
	if len(held.list) != 2 {
		t.Fatalf("the organization holds %d domains, want 2", len(held.list))
	}
	// Another organization has its own counts.
	b := e.MustSignup("limits-other@example.com", "")
	expect(t, e.post("/v1/domains", b.access, map[string]any{"domain": "d.other.example"}), 201)

	// Domain creation has no rate limit (SPEC §8 limits three routes): however many attempts in a row, each
	// is answered on its merits (5 so far).
	for i := range 8 {
		errorBody(t, e.post("/v1/domains", a.access, map[string]any{"domain": fmt.Sprintf("late%d.limits.example", i)}), 403, "resource_limit_reached", "")
		errorBody(t, e.post("/v1/domains", a.access, map[string]any{"domain": "nodot"}), 400, "", "Validation failed")
	}
	// A name it holds is a conflict before the bound is counted (which two of the burst won varies).
	errorBody(t, e.post("/v1/domains", a.access, map[string]any{"domain": held.list[0].(map[string]any)["domain"]}), 409, "", "Resource already exists")
}

// TestSendSizeBoundsAreValidationErrors sends bodies over each bound through the real platform: the body
// over the route's bound with 30 MiB of attachments and the bounds SPEC §8 leaves open are 400s naming the
// field, for a single send and for each batch item alike; nothing is sent.
func TestSendSizeBoundsAreValidationErrors(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("sizes@example.com", "")
	_, key := e.MustKey(a, []string{"emails:send", "emails:read"})
	send := func(path string, body any) resp {
		return e.do(req{method: "POST", path: path, token: key, body: body})
	}
	base := func() map[string]any {
		return map[string]any{"from": "ada@sizes.example", "to": "bob@example.net", "subject": "Hi", "text": "hello"}
	}
	with := func(k string, v any) map[string]any { m := base(); m[k] = v; return m }

	// Five attachments of 10 MiB: 66 MiB of base64, over the 48 MiB bound, and over 25 MiB in total at the
	// third. Valid base64 this time: the platform measures, it does not decode.
	content := strings.Repeat("QUJD", (10<<20)/3)
	var atts strings.Builder
	for i := range 5 {
		if i > 0 {
			atts.WriteByte(',')
		}
		atts.WriteString(`{"filename":"f.bin","contentType":"application/octet-stream","content":"` + content + `"}`)
	}
	body := `{"from":"ada@sizes.example","to":"bob@example.net","subject":"Hi","text":"hello","attachments":[` + atts.String() + `]}`
	r := errorBody(t, send("/v1/emails", body), 400, "Bad Request", "Validation failed")
	if d := r["details"].([]any); len(d) != 1 || d[0].(map[string]any)["path"] != "attachments.2.content" {
		t.Errorf("30 MiB of attachments: %v", r["details"])
	}

	recipients := make([]string, 51)
	for i := range recipients {
		recipients[i] = fmt.Sprintf("r%d@example.net", i)
	}
	tags := map[string]any{}
	for i := range 51 {
		tags[fmt.Sprint("t", i)] = "v"
	}
	for name, tc := range map[string]struct {
		body map[string]any
		path string
	}{
		"51 recipients":         {with("to", recipients), ""},
		"a subject of 999":      {with("subject", strings.Repeat("s", 999)), "subject"},
		"51 tags":               {with("tags", tags), "tags"},
		"metadata over 16 KiB":  {with("metadata", map[string]any{"x": strings.Repeat("m", 16<<10)}), "metadata"},
		"html over 5 MiB":       {with("html", strings.Repeat("h", 5<<20+1)), "html"},
		"a header over a line":  {with("headers", map[string]string{"X-Long": strings.Repeat("v", 998)}), "headers.X-Long"},
		"a filename over 255":   {with("attachments", []map[string]any{{"filename": strings.Repeat("f", 256), "contentType": "text/plain", "content": "aGk="}}), "attachments.0.filename"},
		"a content type of 256": {with("attachments", []map[string]any{{"filename": "f", "contentType": strings.Repeat("c", 256), "content": "aGk="}}), "attachments.0.contentType"},
	} {
		r := errorBody(t, send("/v1/emails", tc.body), 400, "Bad Request", "Validation failed")
		d, _ := r["details"].([]any)
		if len(d) != 1 || d[0].(map[string]any)["path"] != tc.path {
			t.Errorf("%s: details %v, want one at %q", name, r["details"], tc.path)
		}
	}

	// In a batch each item meets the same bounds and fails alone.
	batch := expect(t, send("/v1/emails/batch", map[string]any{"emails": []any{
		with("subject", strings.Repeat("s", 999)), with("to", recipients), base(),
	}}), 202)
	results, _ := batch.body["results"].([]any)
	if len(results) != 3 {
		t.Fatalf("batch: %s", batch.raw)
	}
	for i, want := range []string{"subject: must be at most 998 characters", "at most 50 addresses"} {
		if msg, _ := results[i].(map[string]any)["error"].(string); !strings.Contains(msg, want) {
			t.Errorf("batch item %d: %v, want an error saying %q", i, results[i], want)
		}
	}
	if msg, _ := results[2].(map[string]any)["error"].(string); strings.Contains(msg, "Validation") {
		t.Errorf("the valid item failed validation: %v", results[2])
	}
	if l := expect(t, e.get("/v1/emails", a.access), 200); len(l.body["data"].([]any)) != 0 {
		t.Errorf("messages were created: %s", l.raw)
	}
}
