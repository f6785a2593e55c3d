package edge_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestDomainRoutesShapes(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/domains", userToken, nil), 200)
	if len(r.list) != 1 {
		t.Fatalf("list: %s", r.raw)
	}
	listed := r.list[0].(map[string]any)
	if _, ok := listed["records"]; ok {
		t.Errorf("the list carries records: %s", r.raw)
	}
	for k, want := range map[string]any{"id": domainID, "domain": "example.org", "status": "pending", "region": "eu-west-1",
		"verifiedAt": nil, "createdAt": "2026-11-01T00:02:03Z", "openTracking": false, "clickTracking": false} {
		if v, ok := listed[k]; !ok || v != want {
			t.Errorf("list item %s = %v (present %v), want %v", k, v, ok, want)
		}
	}

	r = mustStatus(t, b.do(t, "POST", "/v1/domains", userToken, map[string]any{"domain": "  Example.ORG "}), 201)
	if b.fake.called("CreateDomain:  Example.ORG ") != 1 {
		t.Errorf("the core normalises the name; the edge passes it as given: %v", b.fake.calls)
	}
	records, _ := r.body["records"].([]any)
	if len(records) != 5 || r.body["domain"] != "example.org" {
		t.Fatalf("create: %s", r.raw)
	}
	spf := records[0].(map[string]any)
	for k, want := range map[string]any{"id": recordID, "type": "SPF", "host": "example.org", "value": "v=spf1 include:spf.postmill.local ~all",
		"ttl": float64(3600), "required": true, "verified": true, "checkedAt": "2026-11-20T09:00:00Z"} {
		if spf[k] != want {
			t.Errorf("record %s = %v, want %v", k, spf[k], want)
		}
	}
	if dmarc := records[2].(map[string]any); dmarc["required"] != false || dmarc["checkedAt"] != nil || dmarc["verified"] != false {
		t.Errorf("unchecked recommended record: %v", dmarc)
	}

	r = mustStatus(t, b.do(t, "GET", "/v1/domains/"+strings.ToUpper(domainID), userToken, nil), 200)
	if recs, _ := r.body["records"].([]any); len(recs) != 5 || b.fake.called("GetDomain:"+domainID) != 1 {
		t.Errorf("get (id canonicalised?): %s %v", r.raw, b.fake.calls)
	}
	r = mustStatus(t, b.do(t, "GET", "/v1/domains/"+domainID+"/dns-records", userToken, nil), 200)
	if len(r.list) != 5 || r.list[1].(map[string]any)["type"] != "DKIM" {
		t.Errorf("dns-records: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/domains/"+domainID+"/verify", userToken, nil), 201)
	if r.body["status"] != "verified" || r.body["verifiedAt"] != "2026-11-21T08:00:00Z" || len(r.body["records"].([]any)) != 5 {
		t.Errorf("verify: %s", r.raw)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/domains/"+domainID+"/suspend", userToken, nil), 201)
	if _, ok := r.body["records"]; ok || r.body["status"] != "suspended" {
		t.Errorf("suspend answers the domain without records: %s", r.raw)
	}

	// Nothing of the key pair but the published p= value ever leaves, and never the tenant id.
	for _, path := range []string{"/v1/domains", "/v1/domains/" + domainID, "/v1/domains/" + domainID + "/dns-records"} {
		raw := string(b.do(t, "GET", path, userToken, nil).raw)
		if strings.Contains(raw, dkimSecret) || strings.Contains(strings.ToLower(raw), "private") || strings.Contains(raw, userOrg) {
			t.Errorf("%s leaks key material or the organization id: %s", path, raw)
		}
	}
	if got := b.fake.lastOrgID(); got != userOrg {
		t.Errorf("domain calls used organization %s", got)
	}
}

func TestDomainRoutesErrors(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	// Session only: an API key never reaches the core.
	mustError(t, b.do(t, "GET", "/v1/domains", starKey, nil), 401, "Unauthorized", "")
	mustError(t, b.do(t, "POST", "/v1/domains", userToken, map[string]any{}), 400, "Bad Request", "Validation failed")
	mustError(t, b.do(t, "POST", "/v1/domains", userToken, map[string]any{"domain": ""}), 400, "Bad Request", "Validation failed")
	mustError(t, b.do(t, "GET", "/v1/domains/not-a-uuid", userToken, nil), 400, "", "Validation failed")
	if n := b.fake.called("ListDomains"); n != 0 {
		t.Errorf("core reached %d times", n)
	}

	cases := []struct {
		err     error
		status  int
		errWord string
		message string
		field   string
		want    any
	}{
		{ports.AlreadyExists("domains_org_name_key"), 409, "Conflict", "Resource already exists", "constraint", "domains_org_name_key"},
		{ports.ValidationError(ports.FieldViolation{Path: "domain", Message: "expected a dotted name"}), 400, "Bad Request", "Validation failed", "", nil},
		{ports.NotFound("domain not found"), 404, "Not Found", "domain not found", "", nil},
		{ports.RateLimited(1234), 429, "Too Many Requests", ports.MessageRateLimitExceeded, "retryAfterSeconds", float64(1234)},
	}
	for _, c := range cases {
		fake := newFakeCore()
		fake.domainErr = c.err
		b := MustStartEdge(t, fake, nil)
		var r response
		switch c.status {
		case 409, 400:
			r = b.do(t, "POST", "/v1/domains", userToken, map[string]any{"domain": "example.org"})
		default:
			r = b.do(t, "POST", "/v1/domains/"+domainID+"/verify", userToken, nil)
		}
		body := mustError(t, r, c.status, c.errWord, c.message)
		if c.field != "" && body[c.field] != c.want {
			t.Errorf("%d: %s = %v, want %v: %s", c.status, c.field, body[c.field], c.want, r.raw)
		}
	}
}

// domainKeys are the keys of the list variant; the with-records variant adds records.
var domainKeys = []string{"id", "domain", "status", "region", "verifiedAt", "openTracking", "clickTracking", "createdAt"}

func TestDomainTrackingSettingsInEveryAnswer(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.domain.OpenTracking = true
	b := MustStartEdge(t, fake, nil)
	withRecords := append(slices.Clone(domainKeys), "records")

	r := mustStatus(t, b.do(t, "GET", "/v1/domains", userToken, nil), 200)
	if len(r.list) != 1 {
		t.Fatalf("list: %s", r.raw)
	}
	listed := r.list[0].(map[string]any)
	mustKeys(t, "listed domain", listed, domainKeys...)
	if listed["openTracking"] != true || listed["clickTracking"] != false {
		t.Errorf("listed tracking: %v", listed)
	}
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		keys         []string
	}{
		{"POST", "/v1/domains", map[string]any{"domain": "example.org"}, 201, withRecords},
		{"GET", "/v1/domains/" + domainID, nil, 200, withRecords},
		{"POST", "/v1/domains/" + domainID + "/verify", nil, 201, withRecords},
		{"POST", "/v1/domains/" + domainID + "/suspend", nil, 201, domainKeys},
		{"PATCH", "/v1/domains/" + domainID, map[string]any{}, 200, domainKeys},
	} {
		r := mustStatus(t, b.do(t, c.method, c.path, userToken, c.body), c.status)
		mustKeys(t, c.method+" "+c.path, r.body, c.keys...)
		if r.body["openTracking"] != true || r.body["clickTracking"] != false {
			t.Errorf("%s %s tracking: %s", c.method, c.path, r.raw)
		}
	}
}

func TestDomainPatchTracking(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	path := "/v1/domains/" + domainID

	r := mustStatus(t, b.do(t, "PATCH", "/v1/domains/{"+strings.ToUpper(domainID)+"}", userToken,
		map[string]any{"openTracking": true, "organizationId": otherOrg}), 200)
	if r.body["openTracking"] != true || r.body["clickTracking"] != false || r.body["id"] != domainID {
		t.Errorf("patch open: %s", r.raw)
	}
	if _, ok := r.body["records"]; ok {
		t.Errorf("patch answers the domain without records (SPEC §2: only create, get one and verify carry them): %s", r.raw)
	}
	if b.fake.called("UpdateDomainTracking:"+domainID) != 1 || b.fake.lastOrgID() != userOrg {
		t.Errorf("patch reached the core as %v for %s", b.fake.calls, b.fake.lastOrgID())
	}
	r = mustStatus(t, b.do(t, "PATCH", path, userToken, map[string]any{"clickTracking": true, "openTracking": false}), 200)
	if r.body["openTracking"] != false || r.body["clickTracking"] != true {
		t.Errorf("patch both: %s", r.raw)
	}
	// {} changes nothing and answers the domain; null counts as absent, never as off.
	r = mustStatus(t, b.do(t, "PATCH", path, userToken, map[string]any{}), 200)
	if r.body["id"] != domainID {
		t.Errorf("empty patch: %s", r.raw)
	}
	mustStatus(t, b.do(t, "PATCH", path, userToken, map[string]any{"openTracking": nil, "clickTracking": true}), 200)
	b.fake.mu.Lock()
	updates := slices.Clone(b.fake.trackingUpdates)
	b.fake.mu.Unlock()
	want := []ports.TrackingSettings{
		{OpenTracking: ptr(true)},
		{OpenTracking: ptr(false), ClickTracking: ptr(true)},
		{},
		{ClickTracking: ptr(true)},
	}
	if len(updates) != len(want) {
		t.Fatalf("updates reaching the core: %+v", updates)
	}
	for i := range want {
		if !equalBoolPtr(updates[i].OpenTracking, want[i].OpenTracking) || !equalBoolPtr(updates[i].ClickTracking, want[i].ClickTracking) {
			t.Errorf("update %d reached the core as open=%v click=%v", i, show(updates[i].OpenTracking), show(updates[i].ClickTracking))
		}
	}
}

func TestDomainPatchErrors(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), nil)
	path := "/v1/domains/" + domainID

	mustError(t, b.do(t, "PATCH", path, "", map[string]any{}), 401, "Unauthorized", "")
	mustError(t, b.do(t, "PATCH", path, starKey, map[string]any{}), 401, "Unauthorized", "")
	for _, c := range []struct {
		name  string
		path  string
		body  any
		paths []string
	}{
		{"a string is not a boolean", path, map[string]any{"clickTracking": "yes"}, []string{"clickTracking"}},
		{"a number is not a boolean", path, map[string]any{"openTracking": 1}, []string{"openTracking"}},
		{"id not a uuid", "/v1/domains/not-a-uuid", map[string]any{"openTracking": true}, []string{"id"}},
	} {
		r := b.do(t, "PATCH", c.path, userToken, c.body)
		if got := detailPaths(t, mustError(t, r, 400, "Bad Request", "Validation failed")); !slices.Equal(got, c.paths) {
			t.Errorf("%s: detail paths %v, want %v: %s", c.name, got, c.paths, r.raw)
		}
	}
	if got := detailPaths(t, mustError(t, b.do(t, "PATCH", path, userToken, nil), 400, "Bad Request", "Validation failed")); !slices.Equal(got, []string{""}) {
		t.Errorf("a missing body's details %v, want one at the body", got)
	}
	mustError(t, b.do(t, "PATCH", path, userToken, `{"openTracking":`), 400, "Bad Request", "")
	if n := b.fake.calledWith("UpdateDomainTracking"); n != 0 {
		t.Errorf("invalid patches reached the core %d times", n)
	}

	fake := newFakeCore()
	fake.domainErr = ports.NotFound("domain not found")
	b = MustStartEdge(t, fake, nil)
	mustError(t, b.do(t, "PATCH", path, userToken, map[string]any{"openTracking": true}), 404, "Not Found", "domain not found")
}

func equalBoolPtr(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func show(p *bool) string {
	if p == nil {
		return "absent"
	}
	if *p {
		return "true"
	}
	return "false"
}
