package edge_test

import (
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
		"verifiedAt": nil, "createdAt": "2026-11-01T00:02:03Z"} {
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
