package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/deploy/app"
)

// Broadcasts end to end (SPEC §4.10, §4.11): a topic audience, a broadcast delivered DKIM-signed with
// RFC 8058 headers to a real SMTP sink, the unsubscribe page driven by keyboard in headless Chromium, the
// next broadcast leaving the unsubscribed contact out, every route's tenancy, and a restart mid-broadcast.

var broadcastScopes = []string{"broadcasts:read", "broadcasts:write", "suppressions:write"}

// seedAudience writes a topic and its subscribed contacts straight into the organization's tables (the
// contact and topic routes are another area's) and returns the topic id and the contact ids in order.
func seedAudience(t *testing.T, e *env, orgID string, emails ...string) (string, []string) {
	t.Helper()
	ctx := context.Background()
	pool := e.app.Store().Pool()
	var topic string
	if err := pool.QueryRow(ctx, `INSERT INTO topics (id, organization_id, key, name, created_at, updated_at)
		VALUES (gen_random_uuid(), $1, 'news', 'Newsletter', now(), now()) RETURNING id::text`, orgID).Scan(&topic); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, email := range emails {
		var id string
		first := strings.ToUpper(email[:1]) + email[1:strings.IndexByte(email, '@')]
		if err := pool.QueryRow(ctx, `INSERT INTO contacts (id, organization_id, email, first_name, properties, created_at, updated_at)
			VALUES ($1, $2, $3, $4, '{"plan":"pro"}', now(), now()) RETURNING id::text`,
			fmt.Sprintf("01900000-0000-7000-8000-%012d", i+1), orgID, email, first).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO topic_subscriptions (organization_id, topic_id, contact_id, status, created_at, updated_at)
			VALUES ($1, $2, $3, 'subscribed', now(), now())`, orgID, topic, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return topic, ids
}

func (e *env) waitBroadcast(t *testing.T, key, id, status string, timeout time.Duration) resp {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := expect(t, e.get("/v1/broadcasts/"+id, key), 200)
		if r.str("status") == status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("broadcast %s is %q, never %q: %s", id, r.str("status"), status, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signedHeaders returns the lower-cased h= list of the message's DKIM-Signature.
func signedHeaders(t *testing.T, raw []byte) []string {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	sig := strings.Join(strings.Fields(m.Header.Get("DKIM-Signature")), "")
	for _, tag := range strings.Split(sig, ";") {
		if v, ok := strings.CutPrefix(tag, "h="); ok {
			return strings.Split(strings.ToLower(v), ":")
		}
	}
	t.Fatalf("no h= in DKIM-Signature %q", sig)
	return nil
}

func TestBroadcastDeliversWithOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	_, key := w.MustKey(w.owner, broadcastScopes)
	topic, contacts := seedAudience(t, w.env, w.owner.orgID, "ann@rcpt.example", "bob@rcpt.example", "cy@rcpt.example")
	expect(t, w.post("/v1/suppressions", key, map[string]any{"address": "cy@rcpt.example"}), 201)

	b := expect(t, w.post("/v1/broadcasts", key, map[string]any{
		"name": "November", "subject": "News for {{ contact.firstName }}", "from": "news@" + senderDomain,
		"html": "<p>Hello {{ contact.firstName }}, plan {{ contact.properties.plan }}</p>" +
			`<p><a href="{{ preferencesUrl }}">Your topics</a> <a href="{{ unsubscribeUrl }}">Unsubscribe</a></p>`,
		"topicId": topic,
	}), 201)
	if b.str("status") != "draft" || b.str("topicId") != topic {
		t.Fatalf("created: %s", b.raw)
	}
	id := b.str("id")
	if s := expect(t, w.post("/v1/broadcasts/"+id+"/send", key, nil), 200); s.str("status") != "sending" || s.str("id") != id {
		t.Fatalf("send answer: %s", s.raw)
	}
	got := w.mx.waitFor(t, "Subject: News for Ann", 60*time.Second)
	w.mx.waitFor(t, "Subject: News for Bob", 30*time.Second)

	msg, err := mail.ReadMessage(bytes.NewReader(got.data))
	if err != nil {
		t.Fatal(err)
	}
	lu, post := msg.Header.Get("List-Unsubscribe"), msg.Header.Get("List-Unsubscribe-Post")
	if post != "List-Unsubscribe=One-Click" || !strings.HasPrefix(lu, "<") || !strings.Contains(lu, "/p/u/") {
		t.Fatalf("List-Unsubscribe %q, List-Unsubscribe-Post %q", lu, post)
	}
	_, html, _ := mailParts(t, got.data)
	if !strings.Contains(html, "Hello Ann, plan pro") {
		t.Errorf("body not interpolated per contact: %s", html)
	}
	// The contact's own links: {{ unsubscribeUrl }} is the List-Unsubscribe link, {{ preferencesUrl }}
	// opens Ann's preference page.
	if !strings.Contains(html, `href="`+strings.Trim(lu, "<>")+`"`) {
		t.Errorf("{{ unsubscribeUrl }} is not the List-Unsubscribe link %s: %s", lu, html)
	}
	prefsLink := regexp.MustCompile(`href="(https?://[^"]+/p/prefs/[A-Za-z0-9_-]+)"`).FindStringSubmatch(html)
	if prefsLink == nil {
		t.Fatalf("no {{ preferencesUrl }} link in the body: %s", html)
	}
	prefsURL, err := url.Parse(prefsLink[1])
	if err != nil {
		t.Fatal(err)
	}
	mailedPrefs := expect(t, w.do(req{method: "GET", path: prefsURL.Path, header: map[string]string{"Accept": "application/json"}}), 200)
	if topics, _ := mailedPrefs.body["topics"].([]any); len(topics) != 1 || topics[0].(map[string]any)["subscribed"] != true {
		t.Fatalf("the mailed preference link: %s", mailedPrefs.raw)
	}
	h := signedHeaders(t, got.data)
	if !contains(h, "list-unsubscribe") || !contains(h, "list-unsubscribe-post") {
		t.Errorf("DKIM h= %v does not cover both List-Unsubscribe headers", h)
	}
	verifications, err := dkim.VerifyWithOptions(bytes.NewReader(got.data), &dkim.VerifyOptions{
		LookupTXT: func(domain string) ([]string, error) { return w.dnsTXT(domain) },
	})
	if err != nil || len(verifications) != 1 || verifications[0].Err != nil {
		t.Fatalf("DKIM verification: %v %+v", err, verifications)
	}
	token := strings.TrimSuffix(lu[strings.Index(lu, "/p/u/")+len("/p/u/"):], ">")
	if strings.Contains(token, contacts[0]) || strings.Contains(lu, "ann@") || strings.Contains(lu, w.owner.orgID) {
		t.Errorf("the unsubscribe link reveals ids or the address: %s", lu)
	}

	w.waitBroadcast(t, key, id, "sent", 30*time.Second)
	rs := expect(t, w.get("/v1/broadcasts/"+id+"/recipients?envelope=true&limit=10", key), 200)
	if total, _ := rs.body["total"].(float64); total != 3 {
		t.Fatalf("recipients: %s", rs.raw)
	}
	statuses := map[string]string{}
	for _, r := range rs.body["data"].([]any) {
		m := r.(map[string]any)
		statuses[m["email"].(string)] = m["status"].(string)
	}
	if statuses["cy@rcpt.example"] != "suppressed" {
		t.Errorf("suppressed contact: %v", statuses)
	}
	if bare := expect(t, w.get("/v1/broadcasts/"+id+"/recipients?limit=1&offset=2", key), 200); len(bare.list) != 1 {
		t.Errorf("bare page: %s", bare.raw)
	}

	// GET shows the confirmation page and changes nothing; the button, pressed from the keyboard, does.
	subscription := func(contact string) string {
		var s string
		if err := w.app.Store().Pool().QueryRow(context.Background(),
			`SELECT status FROM topic_subscriptions WHERE topic_id = $1 AND contact_id = $2`, topic, contact).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	page := w.do(req{method: "GET", path: "/p/u/" + token})
	if page.status != 200 || !strings.Contains(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.raw), `<button type="submit"`) || strings.Contains(string(page.raw), "<script") {
		t.Fatalf("GET page %d: %s", page.status, page.raw)
	}
	if subscription(contacts[0]) != "subscribed" {
		t.Fatal("GET unsubscribed the contact")
	}
	br := newCDPBrowser(t)
	br.navigate(w.base + "/p/u/" + token)
	if text := br.eval("document.body.innerText"); !strings.Contains(text, "Stop sending “Newsletter”") || !strings.Contains(text, "a•••@rcpt.example") {
		t.Fatalf("page text: %q", text)
	}
	if css := br.eval("getComputedStyle(document.querySelector('button')).minHeight"); css != "44px" {
		t.Errorf("the embedded stylesheet did not apply (button min-height %q)", css)
	}
	br.key("Tab", "Tab", 9, "")
	if el := br.eval("document.activeElement.tagName + ':' + document.activeElement.textContent"); el != "BUTTON:Unsubscribe" {
		t.Fatalf("Tab focused %q, not the button", el)
	}
	br.drainEvents()
	br.key("Enter", "Enter", 13, "\r")
	br.waitLoad()
	if text := br.eval("document.body.innerText"); !strings.Contains(text, "You are unsubscribed") {
		t.Fatalf("after the button: %q", text)
	}
	if s := subscription(contacts[0]); s != "unsubscribed" {
		t.Fatalf("subscription is %q after the button", s)
	}
	// The page offers the contact's preference page, where the topic now shows unsubscribed.
	prefsHref := br.eval(`(document.querySelector('a[href^="/p/prefs/"]') || {href: ""}).href`)
	if prefsHref == "" {
		t.Fatalf("no link to the preference page after unsubscribing: %q", br.eval("document.body.innerHTML"))
	}
	br.navigate(prefsHref)
	if text := br.eval("document.body.innerText"); !strings.Contains(text, "Newsletter") {
		t.Fatalf("preference page text: %q", text)
	}
	if checked := br.eval(`String(document.querySelector('input[type=checkbox][name="subscribed"]').checked)`); checked != "false" {
		t.Fatalf("the unsubscribed topic shows checked=%s on the preference page", checked)
	}

	// RFC 8058's one-click POST, repeated: harmless; JSON on request.
	oneClick := w.do(req{method: "POST", path: "/p/u/" + token, body: "List-Unsubscribe=One-Click",
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}})
	if oneClick.status != 200 || oneClick.body["unsubscribed"] != true {
		t.Fatalf("one-click POST: %d %s", oneClick.status, oneClick.raw)
	}
	// A bad token: 400, the same answer whatever is wrong, and no change.
	for _, bad := range []string{"nope", token[:len(token)-3] + "AAA"} {
		r := w.do(req{method: "POST", path: "/p/u/" + bad})
		if r.status != 400 || !strings.Contains(string(r.raw), "not valid") {
			t.Errorf("bad token page: %d %s", r.status, r.raw)
		}
		errorBody(t, w.do(req{method: "GET", path: "/p/u/" + bad, header: map[string]string{"Accept": "application/json"}}), 400, "Bad Request", "invalid token")
	}
	if subscription(contacts[1]) != "subscribed" {
		t.Fatal("another contact changed")
	}
	stats := expect(t, w.get("/v1/broadcasts/"+id+"/stats", key), 200)
	if stats.body["recipients"] != 2.0 || stats.body["unsubscribed"] != 1.0 {
		t.Errorf("stats: %s", stats.raw)
	}

	// The next broadcast leaves Ann out.
	b2 := expect(t, w.post("/v1/broadcasts", key, map[string]any{
		"name": "December", "subject": "December for {{ contact.firstName }}", "from": "news@" + senderDomain,
		"text": "Hi {{ contact.firstName }}", "topicId": topic,
	}), 201)
	expect(t, w.post("/v1/broadcasts/"+b2.str("id")+"/send", key, nil), 200)
	w.mx.waitFor(t, "Subject: December for Bob", 60*time.Second)
	w.waitBroadcast(t, key, b2.str("id"), "sent", 30*time.Second)
	if n := w.mx.count("Subject: December for Ann"); n != 0 {
		t.Fatalf("the unsubscribed contact got %d messages of the next broadcast", n)
	}
	rs2 := expect(t, w.get("/v1/broadcasts/"+b2.str("id")+"/recipients", key), 200)
	if len(rs2.list) != 2 { // Bob, and Cy suppressed
		t.Fatalf("second broadcast recipients: %s", rs2.raw)
	}
}

func TestBroadcastTenancyScopesAndStates(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	_, key := w.MustKey(w.owner, broadcastScopes)
	_, readOnly := w.MustKey(w.owner, []string{"broadcasts:read"})
	_, sendOnly := w.MustKey(w.owner, []string{"emails:send"})
	topic, _ := seedAudience(t, w.env, w.owner.orgID, "ann@rcpt.example")
	other := w.MustSignup("other@other.example", "")
	_, otherKey := w.MustKey(other, broadcastScopes)

	body := map[string]any{"name": "N", "subject": "S", "from": "news@" + senderDomain, "text": "t", "topicId": topic}
	b := expect(t, w.post("/v1/broadcasts", key, body), 201)
	id := b.str("id")

	// Validation: SPEC §7's shape, nothing written.
	bad := errorBody(t, w.post("/v1/broadcasts", key, map[string]any{"name": "N", "subject": "S", "from": "news@" + senderDomain,
		"text": "t", "topicId": topic, "segmentId": topic}), 400, "", "Validation failed")
	if d, _ := bad["details"].([]any); len(d) == 0 {
		t.Errorf("no details: %v", bad)
	}
	errorBody(t, w.post("/v1/broadcasts", key, map[string]any{"name": "N", "subject": "S", "from": "news@" + senderDomain}), 400, "", "Validation failed")
	errorBody(t, w.post("/v1/broadcasts", key, map[string]any{"name": "N", "subject": "a\r\nBcc: x", "from": "news@" + senderDomain, "text": "t"}), 400, "", "Validation failed")
	errorBody(t, w.post("/v1/broadcasts", key, map[string]any{"name": "N", "subject": "S", "from": "news@unknown.example", "text": "t"}), 400, "", "domain unknown.example not found for this org")
	if l := expect(t, w.get("/v1/broadcasts", key), 200); len(l.list) != 1 {
		t.Fatalf("list after refusals: %s", l.raw)
	}

	// Scopes (SPEC §5).
	errorBody(t, w.post("/v1/broadcasts", sendOnly, body), 403, "insufficient_scope", "")
	errorBody(t, w.post("/v1/broadcasts/"+id+"/send", readOnly, nil), 403, "insufficient_scope", "")
	expect(t, w.get("/v1/broadcasts/"+id+"/stats", readOnly), 200)
	expect(t, w.get("/v1/broadcasts", key), 200) // the write scope lists too

	// Tenancy: every route answers another organization 404 (list: empty) and changes nothing.
	for _, r := range []req{
		{method: "GET", path: "/v1/broadcasts/" + id},
		{method: "PATCH", path: "/v1/broadcasts/" + id, body: map[string]any{"name": "stolen"}},
		{method: "DELETE", path: "/v1/broadcasts/" + id},
		{method: "POST", path: "/v1/broadcasts/" + id + "/send"},
		{method: "POST", path: "/v1/broadcasts/" + id + "/schedule", body: map[string]any{"scheduledAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}},
		{method: "POST", path: "/v1/broadcasts/" + id + "/cancel"},
		{method: "GET", path: "/v1/broadcasts/" + id + "/stats"},
		{method: "GET", path: "/v1/broadcasts/" + id + "/recipients"},
	} {
		r.token = otherKey
		if got := w.do(r); got.status != 404 {
			t.Errorf("%s %s by another organization: %d %s", r.method, r.path, got.status, got.raw)
		}
	}
	if l := expect(t, w.get("/v1/broadcasts", otherKey), 200); len(l.list) != 0 {
		t.Errorf("another organization lists %s", l.raw)
	}
	if g := expect(t, w.get("/v1/broadcasts/"+id, key), 200); g.str("name") != "N" || g.str("status") != "draft" {
		t.Fatalf("changed by another organization: %s", g.raw)
	}

	// States: cancel only when scheduled; PATCH null clears; schedule answers {scheduledAt}.
	errorBody(t, w.post("/v1/broadcasts/"+id+"/cancel", key, nil), 409, "", "")
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	s := expect(t, w.post("/v1/broadcasts/"+id+"/schedule", key, map[string]any{"scheduledAt": at.Format(time.RFC3339)}), 200)
	if s.str("scheduledAt") != at.Format(time.RFC3339) {
		t.Errorf("schedule answer: %s", s.raw)
	}
	p := expect(t, w.do(req{method: "PATCH", path: "/v1/broadcasts/" + id, token: key, body: map[string]any{"topicId": nil, "scheduledAt": nil}}), 200)
	if p.body["topicId"] != nil || p.body["scheduledAt"] != nil || p.str("status") != "draft" {
		t.Errorf("PATCH null: %s", p.raw)
	}
	errorBody(t, w.post("/v1/broadcasts/"+id+"/send", key, nil), 400, "", "Validation failed") // no audience left
	expect(t, w.do(req{method: "PATCH", path: "/v1/broadcasts/" + id, token: key, body: map[string]any{"topicId": topic}}), 200)
	expect(t, w.post("/v1/broadcasts/"+id+"/schedule", key, map[string]any{"scheduledAt": at.Format(time.RFC3339)}), 200)
	if c := expect(t, w.post("/v1/broadcasts/"+id+"/cancel", key, nil), 200); c.str("status") != "canceled" {
		t.Errorf("cancel: %s", c.raw)
	}
	errorBody(t, w.post("/v1/broadcasts/"+id+"/send", key, nil), 409, "", "")
	// A sending broadcast cannot be deleted; a finished one can.
	if _, err := w.app.Store().Pool().Exec(context.Background(), `UPDATE broadcasts SET status = 'sending', paused_until = now() + interval '1 hour' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	errorBody(t, w.del("/v1/broadcasts/"+id, key), 409, "", "")
	if _, err := w.app.Store().Pool().Exec(context.Background(), `UPDATE broadcasts SET status = 'sent' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if d := expect(t, w.del("/v1/broadcasts/"+id, key), 200); d.body["deleted"] != true {
		t.Errorf("delete: %s", d.raw)
	}
	errorBody(t, w.get("/v1/broadcasts/"+id, key), 404, "", "")

	// Paging: the other organization sends from its own verified domain.
	od := expect(t, w.post("/v1/domains", other.access, map[string]any{"domain": "other.example"}), 201)
	w.publish(t, od.body["records"].([]any))
	expect(t, w.post("/v1/domains/"+od.str("id")+"/verify", other.access, nil), 201)
	checkOffsetList(t, w.env, "/v1/broadcasts", key, otherKey, func(token string, _ int) string {
		from := "news@" + senderDomain
		if token == otherKey {
			from = "news@other.example"
		}
		return expect(t, w.post("/v1/broadcasts", token, map[string]any{"name": "Page", "subject": "S", "from": from, "text": "t"}), 201).str("id")
	})
}

// TestBroadcastResumesAfterRestart stops the whole process while a broadcast is being expanded and starts
// another on the same database: every contact gets exactly one message.
func TestBroadcastResumesAfterRestart(t *testing.T) {
	t.Parallel()
	const contacts = 3000
	dns := dnstest.New(t)
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.MTAAllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	first, err := app.New(cfg, mustTargets(t, "all"), slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e1 := &env{t: t, app: first, base: first.HTTPURL(), http: &http.Client{Timeout: 30 * time.Second}}
	w := &mailWorld{env: e1, dns: dns}
	w.owner = w.MustSignup("owner@"+senderDomain, "")
	w.mustVerifiedDomain(t, senderDomain)
	_, key := w.MustKey(w.owner, broadcastScopes)
	pool := first.Store().Pool()
	var topic string
	if err := pool.QueryRow(ctx, `INSERT INTO topics (id, organization_id, key, name, created_at, updated_at)
		VALUES (gen_random_uuid(), $1, 'news', 'News', now(), now()) RETURNING id::text`, w.owner.orgID).Scan(&topic); err != nil {
		t.Fatal(err)
	}
	// Recipients at a domain without MX: their deliveries fail quickly and stay out of the way.
	if _, err := pool.Exec(ctx, `WITH c AS (INSERT INTO contacts (id, organization_id, email, created_at, updated_at)
		SELECT gen_random_uuid(), $1, 'c' || g || '@nomx.example', now(), now() FROM generate_series(1, $3) g RETURNING id)
		INSERT INTO topic_subscriptions (organization_id, topic_id, contact_id, status, created_at, updated_at)
		SELECT $1, $2, id, 'subscribed', now(), now() FROM c`, w.owner.orgID, topic, contacts); err != nil {
		t.Fatal(err)
	}
	b := expect(t, w.post("/v1/broadcasts", key, map[string]any{"name": "Big", "subject": "Hello", "from": "news@" + senderDomain,
		"text": "Hi {{ contact.email }}", "topicId": topic}), 201)
	id := b.str("id")
	expect(t, w.post("/v1/broadcasts/"+id+"/send", key, nil), 200)
	// Stop as soon as the first batch is checkpointed.
	deadline := time.Now().Add(time.Minute)
	var cursor, status string
	for cursor == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		_ = pool.QueryRow(ctx, `SELECT cursor, status FROM broadcasts WHERE id = $1`, id).Scan(&cursor, &status)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if status != "sending" {
		t.Fatalf("the broadcast was %q when the process stopped; the test needs it mid-way", status)
	}

	second := MustStart(t, cfg, "all")
	var recorded, messages, distinct int
	for time.Now().Before(deadline.Add(time.Minute)) {
		_ = second.app.Store().Pool().QueryRow(ctx, `SELECT status FROM broadcasts WHERE id = $1`, id).Scan(&status)
		if status == "sent" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != "sent" {
		t.Fatalf("after the restart the broadcast is %q", status)
	}
	pool = second.app.Store().Pool()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = $1`, id).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT r.address) FROM messages m JOIN recipients r ON r.message_id = m.id
		WHERE m.organization_id = $1 AND m.idempotency_key LIKE 'broadcast:' || $2 || ':%'`, w.owner.orgID, id).Scan(&messages, &distinct); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped at cursor %s; recipients %d, messages %d, distinct addresses %d", cursor, recorded, messages, distinct)
	if recorded != contacts || messages != contacts || distinct != contacts {
		t.Fatalf("recipients %d, messages %d, distinct addresses %d; want %d each", recorded, messages, distinct, contacts)
	}
}

func mustTargets(t *testing.T, s string) app.Targets {
	t.Helper()
	ts, err := app.ParseTargets(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
