package edge_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// templateWrites are the Key routes of SPEC §4.4 with bodies that pass validation.
var templateWrites = []struct {
	method, path string
	body         map[string]any
	call         string // the core method it reaches
}{
	{"POST", "/v1/templates", map[string]any{"name": "Welcome"}, "CreateTemplate"},
	{"POST", "/v1/templates/" + templateID + "/versions", map[string]any{"subject": "Hi", "text": "Hello"}, "CreateTemplateVersion"},
	{"POST", "/v1/templates/" + templateID + "/publish", map[string]any{"version": 1}, "PublishTemplate"},
}

// templateReads are the Session routes of SPEC §4.4.
var templateReads = []struct{ path, call string }{
	{"/v1/templates", "ListTemplates"},
	{"/v1/templates/" + templateID, "GetTemplate"},
}

var templateKeys = []string{"id", "name", "currentVersion", "createdAt", "updatedAt"}

var versionKeys = []string{"id", "templateId", "version", "subject", "html", "text", "reactSource", "createdAt"}

func TestTemplateRoutesAuthentication(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	for _, rt := range templateWrites {
		mustError(t, b.do(t, rt.method, rt.path, "", rt.body), 401, "Unauthorized", "")
		// Writes take an API key (SPEC §5): a session is the wrong credential.
		mustError(t, b.do(t, rt.method, rt.path, userToken, rt.body), 401, "Unauthorized", "")
		got := mustError(t, b.do(t, rt.method, rt.path, sendKey, rt.body), 403, "insufficient_scope", "")
		if req, _ := got["requiredScopes"].([]any); !slices.Equal(req, []any{"templates:write"}) {
			t.Errorf("%s %s: requiredScopes %v", rt.method, rt.path, got["requiredScopes"])
		}
		if n := b.fake.calledWith(rt.call); n != 0 {
			t.Fatalf("%s reached the core %d times without a permitted credential", rt.call, n)
		}
		for _, key := range []string{templatesKey, starKey} {
			mustStatus(t, b.do(t, rt.method, rt.path, key, rt.body), 201)
		}
	}

	for _, rt := range templateReads {
		mustError(t, b.do(t, "GET", rt.path, "", nil), 401, "Unauthorized", "")
		// Reads take a session (SPEC §5), even for a key that may write templates.
		mustError(t, b.do(t, "GET", rt.path, templatesKey, nil), 401, "Unauthorized", "")
		mustError(t, b.do(t, "GET", rt.path, starKey, nil), 401, "Unauthorized", "")
		if n := b.fake.calledWith(rt.call); n != 0 {
			t.Fatalf("%s reached the core %d times without a session", rt.call, n)
		}
		mustStatus(t, b.do(t, "GET", rt.path, userToken, nil), 200)
	}
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("template calls used organization %s", got)
	}
}

func TestTemplateRoutesShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	// Create: currentVersion is null, and an organization id in the body is ignored.
	r := mustStatus(t, b.do(t, "POST", "/v1/templates", templatesKey, map[string]any{"name": "Order shipped", "organizationId": otherOrg}), 201)
	mustKeys(t, "created template", r.body, templateKeys...)
	if v, ok := r.body["currentVersion"]; !ok || v != nil {
		t.Errorf("currentVersion after create = %v (present %v), want null", v, ok)
	}
	if r.body["id"] != templateID || r.body["name"] != "Order shipped" || r.body["createdAt"] != "2026-11-10T08:00:00Z" ||
		r.body["updatedAt"] != "2026-11-10T08:00:00Z" {
		t.Errorf("create: %s", r.raw)
	}
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("create used organization %s, want the key's", got)
	}

	// A version: absent bodies are null, the id is canonicalised, the fields reach the core as given.
	r = mustStatus(t, b.do(t, "POST", "/v1/templates/{"+strings.ToUpper(templateID)+"}/versions", templatesKey,
		map[string]any{"subject": "Shipped, {{ user.firstName }}", "text": "Your order is on its way"}), 201)
	mustKeys(t, "version", r.body, versionKeys...)
	for k, want := range map[string]any{
		"templateId": templateID, "version": float64(3), "subject": "Shipped, {{ user.firstName }}",
		"text": "Your order is on its way", "html": nil, "reactSource": nil, "createdAt": "2026-11-22T09:00:00Z",
	} {
		if v, ok := r.body[k]; !ok || v != want {
			t.Errorf("version %s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	if b.fake.called("CreateTemplateVersion:"+templateID) != 1 {
		t.Errorf("version reached the core as %v", b.fake.calls)
	}

	// A React version answers the HTML it rendered to and the source.
	src := "export default function Email() { return <Html><p>Hi</p></Html> }"
	r = mustStatus(t, b.do(t, "POST", "/v1/templates/"+templateID+"/versions", templatesKey,
		map[string]any{"subject": "React", "reactSource": src}), 201)
	if r.body["reactSource"] != src || r.body["html"] != "<html><body>rendered</body></html>" || r.body["text"] != nil {
		t.Errorf("react version: %s", r.raw)
	}
	b.fake.mu.Lock()
	versions := slices.Clone(b.fake.newVersions)
	b.fake.mu.Unlock()
	if !slices.Equal(versions, []ports.NewTemplateVersion{
		{Subject: "Shipped, {{ user.firstName }}", Text: "Your order is on its way"},
		{Subject: "React", ReactSource: src},
	}) {
		t.Errorf("versions reaching the core: %+v", versions)
	}

	// Publish answers the template with its new current version.
	r = mustStatus(t, b.do(t, "POST", "/v1/templates/"+templateID+"/publish", templatesKey, map[string]any{"version": 2}), 201)
	mustKeys(t, "published template", r.body, templateKeys...)
	if r.body["currentVersion"] != float64(2) || r.body["id"] != templateID {
		t.Errorf("publish: %s", r.raw)
	}
	b.fake.mu.Lock()
	publishes := slices.Clone(b.fake.publishes)
	b.fake.mu.Unlock()
	if !slices.Equal(publishes, []int{2}) {
		t.Errorf("publishes reaching the core: %v", publishes)
	}

	// The list is a bare array without versions (SPEC §9.2); a template never published shows null.
	r = mustStatus(t, b.do(t, "GET", "/v1/templates", userToken, nil), 200)
	if len(r.list) != 2 {
		t.Fatalf("list: %s", r.raw)
	}
	first, second := r.list[0].(map[string]any), r.list[1].(map[string]any)
	mustKeys(t, "listed template", first, templateKeys...)
	if first["id"] != templateID || first["currentVersion"] != float64(1) || second["name"] != "older" || second["currentVersion"] != nil {
		t.Errorf("list (order kept?): %s", r.raw)
	}

	// Get: the template with its versions, oldest first, in the same version shape.
	r = mustStatus(t, b.do(t, "GET", "/v1/templates/"+strings.ToUpper(templateID), userToken, nil), 200)
	mustKeys(t, "template", r.body, append(slices.Clone(templateKeys), "versions", "versionsTruncated")...)
	if r.body["currentVersion"] != float64(1) || b.fake.called("GetTemplate:"+templateID) != 1 {
		t.Errorf("get (id canonicalised?): %s %v", r.raw, b.fake.calls)
	}
	listed, _ := r.body["versions"].([]any)
	if len(listed) != 2 {
		t.Fatalf("versions: %s", r.raw)
	}
	v1, v2 := listed[0].(map[string]any), listed[1].(map[string]any)
	mustKeys(t, "listed version", v1, versionKeys...)
	if v1["version"] != float64(1) || v1["html"] != nil || v1["reactSource"] != nil || v1["text"] != "Hi {{ user.firstName }}" ||
		v1["createdAt"] != "2026-11-10T09:05:00Z" {
		t.Errorf("first version: %v", v1)
	}
	if v2["version"] != float64(2) || v2["text"] != nil || v2["html"] != "<p>rendered</p>" || v2["id"] != versionID2 {
		t.Errorf("second version: %v", v2)
	}
	if strings.Contains(string(r.raw), userOrg) {
		t.Errorf("the template leaks the organization id: %s", r.raw)
	}
}

func TestTemplateWithoutVersionsListsEmptyVersions(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.template.Versions, fake.template.CurrentVersion = nil, nil
	b := MustStartEdge(t, fake, nil)
	r := mustStatus(t, b.do(t, "GET", "/v1/templates/"+templateID, userToken, nil), 200)
	if v, ok := r.body["versions"].([]any); !ok || len(v) != 0 || r.body["currentVersion"] != nil {
		t.Errorf("a template without versions: %s", r.raw)
	}
}

func TestTemplateValidation(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	versions := "/v1/templates/" + templateID + "/versions"
	publish := "/v1/templates/" + templateID + "/publish"
	cases := []struct {
		name, path string
		body       any
		paths      []string
	}{
		{"name missing", "/v1/templates", map[string]any{}, []string{"name"}},
		{"name empty", "/v1/templates", map[string]any{"name": ""}, []string{"name"}},
		{"name of 121 characters", "/v1/templates", map[string]any{"name": strings.Repeat("n", 121)}, []string{"name"}},
		{"name not a string", "/v1/templates", map[string]any{"name": 7}, []string{"name"}},
		{"subject missing", versions, map[string]any{"text": "t"}, []string{"subject"}},
		{"subject empty", versions, map[string]any{"subject": "", "text": "t"}, []string{"subject"}},
		{"subject with a line break", versions, map[string]any{"subject": "Hi\r\nBcc: x@example.com", "text": "t"}, []string{"subject"}},
		{"html not a string", versions, map[string]any{"subject": "s", "html": 1}, []string{"html"}},
		{"version missing", publish, map[string]any{}, []string{"version"}},
		{"version zero", publish, map[string]any{"version": 0}, []string{"version"}},
		{"version as a string", publish, map[string]any{"version": "1"}, []string{"version"}},
		{"version not an integer", publish, map[string]any{"version": 1.5}, []string{"version"}},
		{"version id not a uuid", "/v1/templates/not-a-uuid/versions", map[string]any{"subject": "s", "text": "t"}, []string{"id"}},
		{"publish id not a uuid", "/v1/templates/not-a-uuid/publish", map[string]any{"version": 1}, []string{"id"}},
	}
	for _, c := range cases {
		r := b.do(t, "POST", c.path, templatesKey, c.body)
		body := mustError(t, r, 400, "Bad Request", "Validation failed")
		if got := detailPaths(t, body); !slices.Equal(got, c.paths) {
			t.Errorf("%s: detail paths %v, want %v: %s", c.name, got, c.paths, r.raw)
		}
	}
	mustError(t, b.do(t, "GET", "/v1/templates/not-a-uuid", userToken, nil), 400, "", "Validation failed")
	if n := b.fake.calledWith("CreateTemplate") + b.fake.calledWith("PublishTemplate") + b.fake.calledWith("GetTemplate"); n != 0 {
		t.Errorf("the core was reached %d times with invalid input: %v", n, b.fake.calls)
	}

	// The bounds are 1-120 characters, not bytes.
	mustStatus(t, b.do(t, "POST", "/v1/templates", templatesKey, map[string]any{"name": strings.Repeat("é", 120)}), 201)
	mustStatus(t, b.do(t, "POST", "/v1/templates", templatesKey, map[string]any{"name": "x"}), 201)
	b.fake.mu.Lock()
	names := slices.Clone(b.fake.tplNames)
	b.fake.mu.Unlock()
	if !slices.Equal(names, []string{strings.Repeat("é", 120), "x"}) {
		t.Errorf("names reaching the core: %q", names)
	}
}

// TestTemplateCoreErrorsPassThrough checks that the rules the schema cannot express come back from the core
// in the SPEC §7 shape, with their details, and that unknown templates and versions are 404s.
func TestTemplateCoreErrorsPassThrough(t *testing.T) {
	t.Parallel()
	crossField := newFakeCore()
	crossField.templateErr = ports.ValidationError(ports.FieldViolation{Message: "one of html, text or reactSource is required"})
	b := MustStartEdge(t, crossField, nil)
	r := b.do(t, "POST", "/v1/templates/"+templateID+"/versions", templatesKey, map[string]any{"subject": "Only a subject"})
	body := mustError(t, r, 400, "Bad Request", "Validation failed")
	details, _ := body["details"].([]any)
	if len(details) != 1 || details[0].(map[string]any)["path"] != "" ||
		details[0].(map[string]any)["message"] != "one of html, text or reactSource is required" {
		t.Errorf("cross-field rule: %s", r.raw)
	}
	if crossField.called("CreateTemplateVersion:"+templateID) != 1 {
		t.Error("a body with only a subject did not reach the core, which owns the cross-field rule")
	}

	missing := newFakeCore()
	missing.templateErr = ports.NotFound("template not found")
	b = MustStartEdge(t, missing, nil)
	for _, rt := range templateWrites[1:] {
		mustError(t, b.do(t, rt.method, rt.path, templatesKey, rt.body), 404, "Not Found", "template not found")
	}
	mustError(t, b.do(t, "GET", "/v1/templates/"+templateID, userToken, nil), 404, "Not Found", "template not found")
}

func TestTemplateVersionBodyBound(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	// Above the general 1 MiB bound: a large HTML version is accepted, the same size elsewhere is not.
	big := strings.Repeat("x", 2<<20)
	mustStatus(t, b.do(t, "POST", "/v1/templates/"+templateID+"/versions", templatesKey, map[string]any{"subject": "Big", "html": big}), 201)
	mustError(t, b.do(t, "POST", "/v1/templates", templatesKey, map[string]any{"name": big}), 413, "Request Entity Too Large", "")

	over := strings.Repeat("x", int(edge.TemplateMaxBodyBytes))
	mustError(t, b.do(t, "POST", "/v1/templates/"+templateID+"/versions", templatesKey, map[string]any{"subject": "Too big", "html": over}),
		413, "Request Entity Too Large", "")
	if n := b.fake.called("CreateTemplateVersion:" + templateID); n != 1 {
		t.Errorf("CreateTemplateVersion called %d times, want only for the body within the bound", n)
	}
}

func TestOpenAPITemplateSchemas(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	create := mustSchema(t, b, "CreateTemplateRequest")
	if name := property(t, create, "name"); name["minLength"] != float64(1) || name["maxLength"] != float64(120) {
		t.Errorf("name documented as %v", name)
	}
	version := mustSchema(t, b, "CreateTemplateVersionRequest")
	if req, _ := version["required"].([]any); !slices.Equal(req, []any{"subject"}) {
		t.Errorf("version body requires %v, want only subject", req)
	}
	if p := property(t, mustSchema(t, b, "PublishTemplateRequest"), "version"); p["type"] != "integer" || p["minimum"] != float64(1) {
		t.Errorf("publish version documented as %v", p)
	}
	// Optional bodies of a version are documented as nullable, the way they are rendered.
	resp := mustSchema(t, b, "TemplateVersionResponse")
	for _, f := range []string{"html", "text", "reactSource"} {
		if typ, _ := property(t, resp, f)["type"].([]any); !slices.Equal(typ, []any{"string", "null"}) {
			t.Errorf("%s documented with type %v, want [string null]", f, property(t, resp, f)["type"])
		}
	}
	if typ, _ := property(t, mustSchema(t, b, "TemplateResponse"), "currentVersion")["type"].([]any); !slices.Equal(typ, []any{"integer", "null"}) {
		t.Errorf("currentVersion documented with type %v", typ)
	}
}
