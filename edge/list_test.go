package edge_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// The page methods of the fake core. Each records its call with the query ("ListDomainsPage?2&c") and
// answers one page of what the bare-array method answers, with NextCursor "after-<cursor>" unless the
// cursor is "last".

func pageCall(name string, q ports.PageQuery) string {
	return fmt.Sprintf("%s?%d&%s", name, q.Limit, q.Cursor)
}

func nextOf(q ports.PageQuery) string {
	if q.Cursor == "last" {
		return ""
	}
	return "after-" + q.Cursor
}

func (f *fakeCore) ListDomainsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	f.record(pageCall("ListDomainsPage", q), "")
	list, err := f.ListDomains(ctx, orgID)
	return ports.Page[ports.Domain]{Data: list, NextCursor: nextOf(q)}, err
}

func (f *fakeCore) ListTemplatesPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Template], error) {
	f.record(pageCall("ListTemplatesPage", q), "")
	list, err := f.ListTemplates(ctx, orgID)
	return ports.Page[ports.Template]{Data: list, NextCursor: nextOf(q)}, err
}

func (f *fakeCore) ListTemplateVersions(ctx context.Context, orgID, templateID string, q ports.PageQuery) (ports.Page[ports.TemplateVersion], error) {
	t, err := f.templateFor(pageCall("ListTemplateVersions:"+templateID, q), orgID)
	if err != nil {
		return ports.Page[ports.TemplateVersion]{}, err
	}
	versions := slices.Clone(t.Versions)
	slices.Reverse(versions)
	return ports.Page[ports.TemplateVersion]{Data: versions, NextCursor: nextOf(q)}, nil
}

func (f *fakeCore) ListSuppressionsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Suppression], error) {
	f.record(pageCall("ListSuppressionsPage", q), "")
	list, err := f.ListSuppressions(ctx, orgID)
	return ports.Page[ports.Suppression]{Data: list, NextCursor: nextOf(q)}, err
}

func (f *fakeCore) ListEndpointsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	f.record(pageCall("ListEndpointsPage", q), "")
	list, err := f.ListEndpoints(ctx, orgID)
	return ports.Page[ports.WebhookEndpoint]{Data: list, NextCursor: nextOf(q)}, err
}

// callsSince copies the calls the fake recorded from the n-th on.
func callsSince(f *fakeCore, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[n:])
}

// TestListsKeepTheBareArrayAndPageOnRequest checks SPEC §9.2 on the four lists that had no paging: without
// limit and cursor the answer stays a bare array (the core's unpaged method), with either it is
// {data, nextCursor} from the page method with the query as given, and a limit out of 1-100 is a 400
// that never reaches the core.
func TestListsKeepTheBareArrayAndPageOnRequest(t *testing.T) {
	t.Parallel()
	routes := []struct {
		path, token, bare, page string
		items                   int
	}{
		{"/v1/domains", userToken, "ListDomains", "ListDomainsPage", 1},
		{"/v1/templates", userToken, "ListTemplates", "ListTemplatesPage", 2},
		{"/v1/suppressions", suppressionsReadKey, "ListSuppressions", "ListSuppressionsPage", 0},
		{"/v1/webhooks", webhooksReadKey, "ListEndpoints", "ListEndpointsPage", 2},
	}
	for _, rt := range routes {
		t.Run(rt.path, func(t *testing.T) {
			t.Parallel()
			fake := newFakeCore()
			if rt.items == 0 {
				fake.suppressions = []ports.Suppression{{ID: suppressionID, OrganizationID: userOrg, Address: "a@example.com", Scope: "tenant", Reason: "manual"}}
			}
			b := MustStartEdge(t, fake, nil)

			r := mustStatus(t, b.do(t, "GET", rt.path, rt.token, nil), 200)
			if r.list == nil || r.body != nil || !strings.HasPrefix(string(r.raw), "[") {
				t.Fatalf("without limit or cursor: %s, want a bare array", r.raw)
			}
			if b.fake.called(rt.bare) != 1 || slices.ContainsFunc(callsSince(fake, 0), func(c string) bool { return strings.Contains(c, "Page") }) {
				t.Fatalf("calls %v", callsSince(fake, 0))
			}

			r = mustStatus(t, b.do(t, "GET", rt.path+"?limit=2", rt.token, nil), 200)
			data, _ := r.body["data"].([]any)
			if r.body == nil || len(data) == 0 || r.body["nextCursor"] != "after-" {
				t.Fatalf("with limit: %s, want {data, nextCursor}", r.raw)
			}
			if b.fake.called(rt.page+"?2&") != 1 {
				t.Fatalf("calls %v, want %s?2&", callsSince(fake, 0), rt.page)
			}

			// A cursor alone asks for a page too; the core applies the default limit. The last page says
			// null.
			r = mustStatus(t, b.do(t, "GET", rt.path+"?cursor=last", rt.token, nil), 200)
			if next, ok := r.body["nextCursor"]; !ok || next != nil {
				t.Fatalf("last page: %s, want nextCursor null", r.raw)
			}
			if b.fake.called(rt.page+"?0&last") != 1 {
				t.Fatalf("calls %v", callsSince(fake, 0))
			}

			before := len(callsSince(fake, 0))
			for _, bad := range []string{"?limit=0", "?limit=101", "?limit=-1", "?limit=x"} {
				body := mustError(t, b.do(t, "GET", rt.path+bad, rt.token, nil), 400, "", "Validation failed")
				if got := detailPaths(t, body); !slices.Equal(got, []string{"limit"}) {
					t.Errorf("%s: details %v", bad, got)
				}
			}
			if calls := callsSince(fake, before); slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "List") }) {
				t.Errorf("a refused limit reached the core: %v", calls)
			}
			// The core's own refusal (a cursor it did not issue) keeps its shape.
			fake.mu.Lock()
			fake.domainErr = ports.ValidationError(ports.FieldViolation{Path: "cursor", Message: "invalid cursor"})
			fake.templateErr, fake.deliverabilityErr, fake.webhookErr = fake.domainErr, fake.domainErr, fake.domainErr
			fake.mu.Unlock()
			body := mustError(t, b.do(t, "GET", rt.path+"?cursor=nope", rt.token, nil), 400, "", "Validation failed")
			if got := detailPaths(t, body); !slices.Equal(got, []string{"cursor"}) {
				t.Errorf("bad cursor: details %v", got)
			}
		})
	}
}

// TestTemplateShowsNewestVersionsAndPagesTheRest: GET /v1/templates/{id} says whether older versions exist,
// and GET /v1/templates/{id}/versions pages through them newest first.
func TestTemplateShowsNewestVersionsAndPagesTheRest(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	fake.template.VersionsTruncated = true
	b := MustStartEdge(t, fake, nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/templates/"+templateID, userToken, nil), 200)
	if r.body["versionsTruncated"] != true {
		t.Fatalf("versionsTruncated missing: %s", r.raw)
	}
	fake.mu.Lock()
	fake.template.VersionsTruncated = false
	fake.mu.Unlock()
	r = mustStatus(t, b.do(t, "GET", "/v1/templates/"+templateID, userToken, nil), 200)
	if v, ok := r.body["versionsTruncated"]; !ok || v != false {
		t.Fatalf("versionsTruncated should be false and present: %s", r.raw)
	}

	r = mustStatus(t, b.do(t, "GET", "/v1/templates/"+strings.ToUpper(templateID)+"/versions?limit=2&cursor=djM", userToken, nil), 200)
	data, _ := r.body["data"].([]any)
	if len(data) != 2 || r.body["nextCursor"] != "after-djM" {
		t.Fatalf("versions page: %s", r.raw)
	}
	first, _ := data[0].(map[string]any)
	if first["version"] != float64(2) || first["templateId"] != templateID {
		t.Fatalf("versions are not newest first: %s", r.raw)
	}
	if b.fake.called("ListTemplateVersions:"+templateID+"?2&djM") != 1 {
		t.Fatalf("calls %v", callsSince(fake, 0))
	}
	// The default page size is 25; the version list is Session-only like the template itself.
	mustStatus(t, b.do(t, "GET", "/v1/templates/"+templateID+"/versions", userToken, nil), 200)
	if b.fake.called("ListTemplateVersions:"+templateID+"?25&") != 1 {
		t.Fatalf("calls %v", callsSince(fake, 0))
	}
	mustStatus(t, b.do(t, "GET", "/v1/templates/"+templateID+"/versions", templatesKey, nil), 401)
	mustError(t, b.do(t, "GET", "/v1/templates/"+templateID+"/versions?limit=101", userToken, nil), 400, "", "Validation failed")
	mustError(t, b.do(t, "GET", "/v1/templates/nope/versions", userToken, nil), 400, "", "Validation failed")

	fake.mu.Lock()
	fake.templateErr = ports.NotFound("template not found")
	fake.mu.Unlock()
	mustError(t, b.do(t, "GET", "/v1/templates/"+templateID+"/versions", userToken, nil), 404, "", "template not found")
}

// TestCreatePastTheBoundIs403: the core's refusal of a creation past a per-organization count keeps its
// machine word and its resource and limit fields, and a domain creation over its rate is the 429 of
// SPEC §7.
func TestCreatePastTheBoundIs403(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	b := MustStartEdge(t, fake, nil)
	fake.mu.Lock()
	fake.domainErr = ports.ResourceLimitReached(ports.ResourceDomains, "domains", 3, "POSTMILL_MAX_DOMAINS_PER_ORG")
	fake.webhookErr = ports.ResourceLimitReached(ports.ResourceWebhooks, "webhook endpoints", 20, "POSTMILL_MAX_WEBHOOKS_PER_ORG")
	fake.mu.Unlock()

	body := mustError(t, b.do(t, "POST", "/v1/domains", userToken, map[string]any{"domain": "mail.example.com"}), 403, "resource_limit_reached",
		"organization has reached its limit of 3 domains; delete one, or ask the platform operator to raise POSTMILL_MAX_DOMAINS_PER_ORG")
	if body["resource"] != "domains" || body["limit"] != float64(3) {
		t.Errorf("domain refusal fields: %v", body)
	}
	body = mustError(t, b.do(t, "POST", "/v1/webhooks", webhooksWriteKey, map[string]any{"url": "https://hooks.example.com/", "eventTypes": []string{"email.sent"}}),
		403, "resource_limit_reached", "")
	if body["resource"] != "webhooks" || body["limit"] != float64(20) {
		t.Errorf("webhook refusal fields: %v", body)
	}
}
