package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/core/marketing"
	"github.com/postmill/postmill/core/secret"
)

// Topics end to end (SPEC §4.8, §4.11): bounds and key immutability, subscribe by email and by contact,
// double opt-in held pending until POST /p/confirm (the GET page changes nothing), the preference page in
// HTML and JSON, bad tokens, scopes, and tenancy on every route.

var topicScopes = []string{"topics:read", "topics:write", "contacts:read", "contacts:write", "segments:read"}

func TestTopicsDoubleOptInAndPreferences(t *testing.T) {
	t.Parallel()
	e := MustStartAll(t)
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	b := e.MustSignup("other-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, topicScopes)
	_, otherKey := e.MustKey(b, topicScopes)

	news := expect(t, e.post("/v1/topics", key, map[string]any{"key": "news", "name": "News", "doubleOptIn": true}), 201)
	newsID := news.str("id")
	deals := expect(t, e.post("/v1/topics", key, map[string]any{"key": "deals", "name": "Deals"}), 201)
	dealsID := deals.str("id")
	errorBody(t, e.post("/v1/topics", key, map[string]any{"key": "news", "name": "Again"}), 409, "", "Resource already exists")
	for path, body := range map[string]map[string]any{
		"key":         {"key": "Bad Key", "name": "x"},
		"key ":        {"key": strings.Repeat("k", 65), "name": "x"},
		"name":        {"key": "ok"},
		"name ":       {"key": "ok", "name": strings.Repeat("n", 201)},
		"description": {"key": "ok", "name": "x", "description": strings.Repeat("d", 2001)},
	} {
		requireDetail(t, e.post("/v1/topics", key, body), strings.TrimSpace(path))
	}
	requireDetail(t, e.patch("/v1/topics/"+newsID, key, map[string]any{"key": "renamed"}), "key")
	if p := expect(t, e.patch("/v1/topics/"+newsID, key, map[string]any{"description": "Monthly"}), 200); p.str("key") != "news" || p.str("description") != "Monthly" {
		t.Fatalf("patch: %s", p.raw)
	}

	// Double opt-in: a new email creates a pending contact and a pending subscription.
	sub := expect(t, e.post("/v1/topics/"+newsID+"/subscribe", key, map[string]any{"email": "Reader@Example.test",
		"consentSource": "footer form", "consentIp": "192.0.2.7"}), 200)
	s := sub.body["subscription"].(map[string]any)
	token, _ := sub.body["confirmToken"].(string)
	if s["status"] != "pending" || token == "" || s["email"] != "reader@example.test" || s["consentSource"] != "footer form" {
		t.Fatalf("subscribe: %s", sub.raw)
	}
	contactID := s["contactId"].(string)
	for _, id := range []string{contactID} {
		if strings.Contains(token, id) || strings.Contains(token, "reader") {
			t.Fatalf("token shows an id or the address: %s", token)
		}
	}
	rule := map[string]any{"rule": map[string]any{"field": "topic.news", "cmp": "eq"}}
	if p := expect(t, e.post("/v1/segments/preview", key, rule), 200); p.body["count"] != 0.0 {
		t.Fatalf("a pending subscription counts for topic.news: %s", p.raw)
	}
	// GET /p/confirm shows a page and changes nothing.
	page := e.do(req{method: "GET", path: "/p/confirm/" + token})
	expect(t, page, 200)
	if !strings.Contains(string(page.raw), "<form method=\"post\"") || strings.Contains(string(page.raw), "<script") ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "default-src") {
		t.Fatalf("confirm page: %s %v", page.raw, page.header)
	}
	if p := expect(t, e.post("/v1/segments/preview", key, rule), 200); p.body["count"] != 0.0 {
		t.Fatalf("GET /p/confirm confirmed: %s", p.raw)
	}
	conf := e.do(req{method: "POST", path: "/p/confirm/" + token, header: map[string]string{"Accept": "application/json"}})
	if expect(t, conf, 200); conf.body["confirmed"] != true || conf.body["topic"] != "news" {
		t.Fatalf("confirm: %s", conf.raw)
	}
	if p := expect(t, e.post("/v1/segments/preview", key, rule), 200); p.body["count"] != 1.0 {
		t.Fatalf("after confirmation: %s", p.raw)
	}
	c := expect(t, e.get("/v1/contacts/"+contactID, key), 200)
	if c.str("consentStatus") != "subscribed" {
		t.Fatalf("confirmed contact: %s", c.raw)
	}
	// Subscribing again to a confirmed double opt-in topic keeps it subscribed.
	if again := expect(t, e.post("/v1/topics/"+newsID+"/subscribe", key, map[string]any{"contactId": contactID}), 200); again.body["subscription"].(map[string]any)["status"] != "subscribed" || again.body["confirmToken"] != nil {
		t.Fatalf("resubscribe: %s", again.raw)
	}
	// A plain topic subscribes at once.
	d := expect(t, e.post("/v1/topics/"+dealsID+"/subscribe", key, map[string]any{"contactId": contactID}), 200)
	if d.body["subscription"].(map[string]any)["status"] != "subscribed" || d.body["confirmToken"] != nil {
		t.Fatalf("plain subscribe: %s", d.raw)
	}
	requireDetail(t, e.post("/v1/topics/"+dealsID+"/subscribe", key, map[string]any{}), "")
	requireDetail(t, e.post("/v1/topics/"+dealsID+"/subscribe", key, map[string]any{"email": "x@y.test", "contactId": contactID}), "")
	requireDetail(t, e.post("/v1/topics/"+dealsID+"/subscribe", key, map[string]any{"contactId": "nope"}), "contactId")

	// Preferences through the API.
	prefs := expect(t, e.get("/v1/contacts/"+contactID+"/preferences", key), 200)
	if len(prefs.body["topics"].([]any)) != 2 {
		t.Fatalf("preferences: %s", prefs.raw)
	}
	requireDetail(t, e.patch("/v1/contacts/"+contactID+"/preferences", key, map[string]any{"topics": []any{map[string]any{"key": "nope", "subscribed": true}}}), "topics.0.key")
	up := expect(t, e.patch("/v1/contacts/"+contactID+"/preferences", key, map[string]any{"topics": []any{map[string]any{"key": "deals", "subscribed": false}}}), 200)
	for _, tp := range up.body["topics"].([]any) {
		if tp := tp.(map[string]any); tp["key"] == "deals" && tp["subscribed"] != false {
			t.Fatalf("deals after leaving: %s", up.raw)
		}
	}
	// Unsubscribing from all turns every topic off, named or not; subscribing to one topic afterwards
	// brings back that topic only.
	expect(t, e.patch("/v1/contacts/"+contactID+"/preferences", key, map[string]any{"topics": []any{map[string]any{"key": "deals", "subscribed": true}}}), 200)
	all := expect(t, e.patch("/v1/contacts/"+contactID+"/preferences", key, map[string]any{"unsubscribeAll": true}), 200)
	if all.str("consentStatus") != "unsubscribed" {
		t.Fatalf("after unsubscribeAll: %s", all.raw)
	}
	one := expect(t, e.patch("/v1/contacts/"+contactID+"/preferences", key, map[string]any{"topics": []any{map[string]any{"key": "deals", "subscribed": true}}}), 200)
	states := map[string]any{}
	for _, tp := range one.body["topics"].([]any) {
		states[tp.(map[string]any)["key"].(string)] = tp.(map[string]any)["subscribed"]
	}
	if states["deals"] != true || states["news"] != false || one.str("consentStatus") != "subscribed" {
		t.Fatalf("after unsubscribeAll and then deals alone: %s", one.raw)
	}
	if p := expect(t, e.post("/v1/segments/preview", key, rule), 200); p.body["count"] != 0.0 {
		t.Fatalf("topic.news counts the contact again after unsubscribeAll and a subscription to deals: %s", p.raw)
	}
	expect(t, e.patch("/v1/contacts/"+contactID+"/preferences", key, map[string]any{"topics": []any{map[string]any{"key": "news", "subscribed": true}}}), 200)

	// Unsubscribe through the API.
	u := expect(t, e.post("/v1/topics/"+newsID+"/unsubscribe", key, map[string]any{"contactId": contactID}), 200)
	if u.body["subscription"].(map[string]any)["status"] != "unsubscribed" {
		t.Fatalf("unsubscribe: %s", u.raw)
	}
	// A confirm token no longer confirms an unsubscribed subscription.
	errorBody(t, e.do(req{method: "POST", path: "/p/confirm/" + token, header: map[string]string{"Accept": "application/json"}}), 400, "", "invalid token")

	// Bad tokens: one 400 page revealing nothing, whatever is wrong.
	for _, bad := range []string{"x", strings.Repeat("A", 600), token[:len(token)-3] + "AAA", url.PathEscape("../../v1")} {
		for _, path := range []string{"/p/confirm/", "/p/prefs/"} {
			r := e.do(req{method: "GET", path: path + bad})
			if r.status != 400 && r.status != 404 {
				t.Fatalf("%s%s: %d", path, bad, r.status)
			}
			if strings.Contains(string(r.raw), "news") || strings.Contains(string(r.raw), "reader") {
				t.Fatalf("bad token page reveals something: %s", r.raw)
			}
		}
	}
	// A confirm token is not a preference token.
	errorBody(t, e.do(req{method: "GET", path: "/p/prefs/" + token, header: map[string]string{"Accept": "application/json"}}), 400, "", "invalid token")

	// Tenancy of every topic route.
	for _, r := range []resp{
		e.get("/v1/topics/"+newsID, otherKey),
		e.patch("/v1/topics/"+newsID, otherKey, map[string]any{"name": "X"}),
		e.del("/v1/topics/"+newsID, otherKey),
		e.post("/v1/topics/"+newsID+"/subscribe", otherKey, map[string]any{"email": "z@example.test"}),
		e.post("/v1/topics/"+newsID+"/unsubscribe", otherKey, map[string]any{"contactId": contactID}),
	} {
		errorBody(t, r, 404, "", "")
	}
	// Another organization's topic cannot take this organization's contact.
	other := expect(t, e.post("/v1/topics", otherKey, map[string]any{"key": "news", "name": "Theirs"}), 201)
	errorBody(t, e.post("/v1/topics/"+other.str("id")+"/subscribe", otherKey, map[string]any{"contactId": contactID}), 404, "", "")
	if l := expect(t, e.get("/v1/topics", otherKey), 200); len(l.list) != 1 {
		t.Fatalf("other org's topics: %s", l.raw)
	}

	// Scopes.
	_, readOnly := e.MustKey(a, []string{"topics:read"})
	_, writeOnly := e.MustKey(a, []string{"topics:write"})
	errorBody(t, e.post("/v1/topics", readOnly, map[string]any{"key": "x", "name": "x"}), 403, "insufficient_scope", "")
	errorBody(t, e.get("/v1/topics/"+newsID, writeOnly), 403, "insufficient_scope", "")
	expect(t, e.get("/v1/topics", writeOnly), 200)
	expect(t, e.del("/v1/topics/"+dealsID, key), 200)
	errorBody(t, e.get("/v1/topics/"+dealsID, key), 404, "", "")

	checkOffsetList(t, e, "/v1/topics", key, otherKey, func(token string, i int) string {
		return expect(t, e.post("/v1/topics", token, map[string]any{"key": fmt.Sprintf("page-%d", i), "name": "Page"}), 201).str("id")
	})
}

// checkOffsetList creates 28 rows of the list at path in key's organization (and one in otherKey's,
// between them) with create, and pages it as GET /v1/contacts pages (SPEC §4.7, §8): a bare array of the
// 25 newest by default, limit and offset, a bound outside limit 1-100 or offset from 0 refused with its
// detail path, and never a row of the other organization.
func checkOffsetList(t *testing.T, e *env, path, key, otherKey string, create func(token string, i int) string) {
	t.Helper()
	var newest []string
	theirs := ""
	for i := range 28 {
		if i == 20 {
			theirs = create(otherKey, 100)
		}
		newest = append([]string{create(key, i)}, newest...)
	}
	ids := func(q, token string) []string {
		t.Helper()
		r := expect(t, e.get(path+q, token), 200)
		if r.list == nil {
			t.Fatalf("GET %s%s: %s, want a bare array", path, q, r.raw)
		}
		out := make([]string, 0, len(r.list))
		for _, v := range r.list {
			out = append(out, v.(map[string]any)["id"].(string))
		}
		return out
	}
	for q, want := range map[string][]string{"": newest[:25], "?limit=2&offset=1": newest[1:3], "?limit=3&offset=25": newest[25:28]} {
		if got := ids(q, key); !slices.Equal(got, want) {
			t.Errorf("GET %s%s = %v, want %v", path, q, got, want)
		}
	}
	for q, detail := range map[string]string{"?limit=0": "limit", "?limit=101": "limit", "?limit=abc": "limit", "?offset=-1": "offset"} {
		requireDetail(t, e.get(path+q, key), detail)
	}
	if slices.Contains(ids("?limit=100", key), theirs) {
		t.Errorf("GET %s lists another organization's %s", path, theirs)
	}
	if got := ids("?limit=100", otherKey); !slices.Contains(got, theirs) || slices.ContainsFunc(got, func(id string) bool { return slices.Contains(newest, id) }) {
		t.Errorf("GET %s by the other organization = %v", path, got)
	}
}

// TestPrefsPageDrivenByItsToken drives the public preference page with a token the core sealed: the HTML
// form and its keyboard-reachable controls, a form post, JSON both ways, and unsubscribe from everything.
func TestPrefsPageDrivenByItsToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, pgtest.URL(t))
	e := MustStart(t, cfg, "all")
	a := e.MustSignup("owner-"+randomHex(t, 4)+"@example.test", "")
	_, key := e.MustKey(a, topicScopes)
	expect(t, e.post("/v1/topics", key, map[string]any{"key": "news", "name": "News", "description": "Monthly <b>news</b>"}), 201)
	expect(t, e.post("/v1/topics", key, map[string]any{"key": "deals", "name": "Deals"}), 201)
	c := expect(t, e.post("/v1/contacts", key, map[string]any{"email": "pat@example.test"}), 201)
	// The token a broadcast's footer would carry, sealed with the instance's keyring.
	keyring, err := secret.NewKeyring(cfg.SecretKeys...)
	if err != nil {
		t.Fatal(err)
	}
	token, err := marketing.SealPublicToken(keyring, marketing.PurposePrefs, marketing.PublicToken{
		OrganizationID: a.orgID, ContactID: c.str("id"), IssuedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}

	page := e.do(req{method: "GET", path: "/p/prefs/" + token})
	expect(t, page, 200)
	html := string(page.raw)
	for _, want := range []string{`name="viewport"`, `type="checkbox" name="subscribed" value="news"`, `<button type="submit">`,
		`/p/assets/prefs.css`, "Monthly &lt;b&gt;news&lt;/b&gt;", `<label`} {
		if !strings.Contains(html, want) {
			t.Fatalf("page lacks %q: %s", want, html)
		}
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "style=") || strings.Contains(html, "pat@") {
		t.Fatalf("page has inline script or style, or shows the address: %s", html)
	}
	css := e.do(req{method: "GET", path: "/p/assets/prefs.css"})
	if expect(t, css, 200); !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
		t.Fatalf("stylesheet: %v", css.header)
	}
	// The form as a browser posts it: every topic shown, the ticked ones subscribed.
	form := url.Values{"key": {"news", "deals"}, "subscribed": {"news"}}
	var res *http.Response
	hr, _ := http.NewRequest("POST", e.base+"/p/prefs/"+token, strings.NewReader(form.Encode()))
	hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err = e.http.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("form post: %d", res.StatusCode)
	}
	j := e.do(req{method: "GET", path: "/p/prefs/" + token, header: map[string]string{"Accept": "application/json"}})
	expect(t, j, 200)
	state := map[string]bool{}
	for _, tp := range j.body["topics"].([]any) {
		tp := tp.(map[string]any)
		state[tp["key"].(string)] = tp["subscribed"].(bool)
	}
	if !state["news"] || state["deals"] {
		t.Fatalf("after the form: %s", j.raw)
	}
	tooMany := make([]any, 201)
	for i := range tooMany {
		tooMany[i] = map[string]any{"key": "news", "subscribed": true}
	}
	r := e.do(req{method: "POST", path: "/p/prefs/" + token, body: map[string]any{"topics": tooMany}, header: map[string]string{"Accept": "application/json"}})
	requireDetail(t, r, "topics")
	r = e.do(req{method: "POST", path: "/p/prefs/" + token, body: map[string]any{"unsubscribeAll": true}, header: map[string]string{"Accept": "application/json"}})
	if expect(t, r, 200); r.body["consentStatus"] != "unsubscribed" {
		t.Fatalf("unsubscribe all: %s", r.raw)
	}
	if got := expect(t, e.get("/v1/contacts/"+c.str("id"), key), 200); got.str("consentStatus") != "unsubscribed" || got.str("consentSource") != "preferences" {
		t.Fatalf("contact after unsubscribe all: %s", got.raw)
	}
}
