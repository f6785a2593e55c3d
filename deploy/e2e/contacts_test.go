package e2e

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Contacts end to end (SPEC §4.7): create with normalisation and every bound, duplicates, PATCH, DELETE,
// the list's filters and two shapes, import (JSON and CSV) and the streamed export, scopes, and tenancy on
// every route.

var contactScopes = []string{"contacts:read", "contacts:write"}

// requireDetail asserts a SPEC §7 validation 400 naming path.
func requireDetail(t *testing.T, r resp, path string) {
	t.Helper()
	errorBody(t, r, 400, "", "Validation failed")
	details, _ := r.body["details"].([]any)
	for _, d := range details {
		if d.(map[string]any)["path"] == path {
			return
		}
	}
	t.Fatalf("no detail at %q: %s", path, r.raw)
}

func (e *env) patch(path, token string, body any) resp {
	return e.do(req{method: "PATCH", path: path, token: token, body: body})
}

func TestContactsCreateValidateAndTenancy(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	b := e.MustSignup("other-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, contactScopes)
	_, otherKey := e.MustKey(b, contactScopes)

	c := expect(t, e.post("/v1/contacts", key, map[string]any{"email": "  Ada@Example.TEST ", "firstName": "Ada",
		"properties": map[string]any{"plan": "pro", "seats": 12, "beta": true, "x": nil}}), 201)
	id := c.str("id")
	if c.str("email") != "ada@example.test" || c.str("consentStatus") != "subscribed" || c.body["bounced"] != false {
		t.Fatalf("created: %s", c.raw)
	}
	dup := errorBody(t, e.post("/v1/contacts", key, map[string]any{"email": "ADA@example.test"}), 409, "", "Resource already exists")
	if dup["constraint"] != "contacts_organization_id_email_key" || strings.Contains(string(e.post("/v1/contacts", key, map[string]any{"email": "ADA@example.test"}).raw), "ada@") {
		t.Fatalf("duplicate: %v", dup)
	}
	// The same address is another organization's own contact.
	expect(t, e.post("/v1/contacts", otherKey, map[string]any{"email": "ada@example.test"}), 201)

	props := map[string]any{}
	for i := range 101 {
		props[fmt.Sprintf("k%d", i)] = i
	}
	for path, body := range map[string]map[string]any{
		"email":             {"email": "ada\r\n@example.test"},
		"email ":            {"email": strings.Repeat("a", 320) + "@x.test"},
		"firstName":         {"email": "b@x.test", "firstName": strings.Repeat("n", 201)},
		"locale":            {"email": "b@x.test", "locale": strings.Repeat("l", 36)},
		"timezone":          {"email": "b@x.test", "timezone": strings.Repeat("t", 65)},
		"source":            {"email": "b@x.test", "source": strings.Repeat("s", 65)},
		"consentStatus":     {"email": "b@x.test", "consentStatus": "maybe"},
		"consentSource":     {"email": "b@x.test", "consentSource": strings.Repeat("c", 129)},
		"consentIp":         {"email": "b@x.test", "consentIp": strings.Repeat("1", 65)},
		"properties":        {"email": "b@x.test", "properties": props},
		"properties.nested": {"email": "b@x.test", "properties": map[string]any{"nested": map[string]any{"a": 1}}},
		"properties.long":   {"email": "b@x.test", "properties": map[string]any{"long": strings.Repeat("v", 1025)}},
	} {
		requireDetail(t, e.post("/v1/contacts", key, body), strings.TrimSpace(path))
	}
	if l := expect(t, e.get("/v1/contacts?envelope=true", key), 200); l.body["total"] != 1.0 {
		t.Fatalf("a refused create wrote something: %s", l.raw)
	}

	// PATCH: every field but the email.
	p := expect(t, e.patch("/v1/contacts/"+id, key, map[string]any{"lastName": "Lovelace", "consentStatus": "unsubscribed"}), 200)
	if p.str("lastName") != "Lovelace" || p.str("firstName") != "Ada" || p.str("consentStatus") != "unsubscribed" {
		t.Fatalf("patched: %s", p.raw)
	}
	requireDetail(t, e.patch("/v1/contacts/"+id, key, map[string]any{"email": "new@example.test"}), "email")
	requireDetail(t, e.patch("/v1/contacts/"+id, key, map[string]any{"firstName": strings.Repeat("n", 201)}), "firstName")

	// A non-uuid id is refused before the handler.
	requireDetail(t, e.get("/v1/contacts/not-a-uuid", key), "id")

	// Tenancy: every route of another organization's contact is 404, and changes nothing.
	for _, r := range []resp{
		e.get("/v1/contacts/"+id, otherKey),
		e.patch("/v1/contacts/"+id, otherKey, map[string]any{"firstName": "X"}),
		e.del("/v1/contacts/"+id, otherKey),
		e.get("/v1/contacts/"+id+"/preferences", otherKey),
		e.patch("/v1/contacts/"+id+"/preferences", otherKey, map[string]any{"unsubscribeAll": true}),
	} {
		errorBody(t, r, 404, "", "")
	}
	list := expect(t, e.get("/v1/contacts", otherKey), 200)
	if len(list.list) != 1 || list.list[0].(map[string]any)["id"] == id {
		t.Fatalf("other org's list: %s", list.raw)
	}
	if got := expect(t, e.get("/v1/contacts/"+id, key), 200); got.str("firstName") != "Ada" {
		t.Fatalf("another org changed the contact: %s", got.raw)
	}

	// Scopes: write does not imply read; the list accepts either.
	_, readOnly := e.MustKey(a, []string{"contacts:read"})
	_, writeOnly := e.MustKey(a, []string{"contacts:write"})
	_, none := e.MustKey(a, []string{"emails:send"})
	errorBody(t, e.post("/v1/contacts", readOnly, map[string]any{"email": "r@x.test"}), 403, "insufficient_scope", "")
	errorBody(t, e.get("/v1/contacts/"+id, writeOnly), 403, "insufficient_scope", "")
	errorBody(t, e.get("/v1/contacts/export", writeOnly), 403, "insufficient_scope", "")
	expect(t, e.get("/v1/contacts", writeOnly), 200)
	errorBody(t, e.get("/v1/contacts", none), 403, "insufficient_scope", "")
	errorBody(t, e.get("/v1/contacts", ""), 401, "", "")

	expect(t, e.del("/v1/contacts/"+id, key), 200)
	errorBody(t, e.get("/v1/contacts/"+id, key), 404, "", "")
}

func TestContactsListImportExport(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	b := e.MustSignup("other-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, contactScopes)
	_, otherKey := e.MustKey(b, contactScopes)

	doc := "Email,First_Name,lastname,consent_status,Plan,Seats\n" +
		"ann@example.test,Ann,,unsubscribed,pro,12\n" +
		"not-an-email,Bad,,,,\n" +
		"bob@example.test,Bob,Builder,,=cmd|' /C calc'!A0,3\n" +
		"ANN@example.test,Annie,,,,\n"
	imp := expect(t, e.post("/v1/contacts/import", key, map[string]any{"csv": doc}), 200)
	if imp.body["created"] != 2.0 || imp.body["updated"] != 0.0 || imp.body["skipped"] != 2.0 {
		t.Fatalf("csv import: %s", imp.raw)
	}
	errs := imp.body["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["index"] != 1.0 {
		t.Fatalf("csv import errors: %s", imp.raw)
	}
	l := expect(t, e.get("/v1/contacts?search=ann&envelope=1", key), 200)
	ann := l.body["data"].([]any)[0].(map[string]any)
	// The last occurrence wins; properties keep the header's case; empty cells are omitted.
	if ann["firstName"] != "Annie" || ann["source"] != "import" || ann["properties"].(map[string]any)["Plan"] != nil {
		t.Fatalf("collapsed duplicate: %v", ann)
	}
	// JSON contacts, upserting: only the fields a row sets change.
	imp = expect(t, e.post("/v1/contacts/import", key, map[string]any{"contacts": []any{
		map[string]any{"email": "bob@example.test", "lastName": "Baker"},
		map[string]any{"email": "cat@example.test", "consentStatus": "pending"},
		map[string]any{"email": "dog@example.test", "firstName": strings.Repeat("d", 201)},
	}}), 200)
	if imp.body["created"] != 1.0 || imp.body["updated"] != 1.0 || imp.body["skipped"] != 1.0 {
		t.Fatalf("json import: %s", imp.raw)
	}
	if d := imp.body["errors"].([]any)[0].(map[string]any)["details"].([]any)[0].(map[string]any); d["path"] != "contacts.2.firstName" {
		t.Fatalf("row error path: %v", d)
	}
	imp = expect(t, e.post("/v1/contacts/import", key, map[string]any{"upsert": false, "contacts": []any{
		map[string]any{"email": "bob@example.test", "firstName": "Nope"}}}), 200)
	if imp.body["skipped"] != 1.0 || imp.body["updated"] != 0.0 {
		t.Fatalf("import without upsert: %s", imp.raw)
	}
	for _, body := range []map[string]any{
		{},
		{"csv": "email\n", "contacts": []any{}},
		{"csv": "name,plan\nx,y\n"},
		{"csv": "email\n" + strings.Repeat("a@x.test\n", 10001)},
	} {
		errorBody(t, e.post("/v1/contacts/import", key, body), 400, "", "Validation failed")
	}

	// List: filters, bounds and both shapes.
	l = expect(t, e.get("/v1/contacts?consentStatus=pending", key), 200)
	if len(l.list) != 1 || l.list[0].(map[string]any)["email"] != "cat@example.test" {
		t.Fatalf("consent filter: %s", l.raw)
	}
	l = expect(t, e.get("/v1/contacts?limit=2&offset=1&envelope=true", key), 200)
	if l.body["total"] != 3.0 || len(l.body["data"].([]any)) != 2 || l.body["limit"] != 2.0 || l.body["offset"] != 1.0 {
		t.Fatalf("envelope: %s", l.raw)
	}
	requireDetail(t, e.get("/v1/contacts?limit=101", key), "limit")
	requireDetail(t, e.get("/v1/contacts?search="+strings.Repeat("s", 321), key), "search")
	if l := expect(t, e.get("/v1/contacts?envelope=true", otherKey), 200); l.body["total"] != 0.0 {
		t.Fatalf("import leaked into another organization: %s", l.raw)
	}

	// Export: the SPEC columns, neutralised formula cells, an attachment.
	res := e.do(req{method: "GET", path: "/v1/contacts/export", token: key})
	expect(t, res, 200)
	if !strings.HasPrefix(res.header.Get("Content-Type"), "text/csv") || !strings.Contains(res.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export headers: %v", res.header)
	}
	rows, err := csv.NewReader(strings.NewReader(string(res.raw))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != "email,first_name,last_name,locale,timezone,source,consent_status,consent_at,bounced,properties" || len(rows) != 4 {
		t.Fatalf("export: %q", rows)
	}
	for _, r := range rows[1:] {
		if r[0] == "bob@example.test" && !strings.Contains(r[9], `"Plan":"=cmd`) {
			t.Fatalf("bob: %q", r)
		}
		for _, cell := range r {
			if cell != "" && strings.ContainsRune("=+-@", rune(cell[0])) {
				t.Fatalf("formula cell exported as is: %q", r)
			}
		}
	}
	other := e.do(req{method: "GET", path: "/v1/contacts/export", token: otherKey})
	if n := strings.Count(string(expect(t, other, 200).raw), "\n"); n != 1 {
		t.Fatalf("other org's export has %d lines: %s", n, other.raw)
	}
}

// TestContactsExportStreams exports more contacts than one page, checks every row arrives once and that
// the first bytes arrive before the last page is read.
func TestContactsExportStreams(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, contactScopes)
	var b strings.Builder
	b.WriteString("email,score\n")
	for i := range 2500 {
		fmt.Fprintf(&b, "c%05d@example.test,%d\n", i, i)
	}
	expect(t, e.post("/v1/contacts/import", key, map[string]any{"csv": b.String()}), 200)
	hr, _ := http.NewRequest("GET", e.base+"/v1/contacts/export", nil)
	hr.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	res, err := e.http.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rows, err := csv.NewReader(res.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		seen[r[0]] = true
	}
	if len(rows) != 2501 || len(seen) != 2500 {
		t.Fatalf("export of %d rows, %d distinct, in %v", len(rows), len(seen), time.Since(start))
	}
}
