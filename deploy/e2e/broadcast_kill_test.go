package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// TestBroadcastSurvivesKill9 runs the real binary, kills it with SIGKILL right after the first checkpoint
// of a broadcast, starts it again on the same database and counts exactly one message per contact: the
// cursor, the expander's lease and the idempotency keys of docs/marketing.md hold without a clean shutdown.
func TestBroadcastSurvivesKill9(t *testing.T) {
	t.Parallel()
	const contacts = 3000
	ctx := context.Background()
	dns := dnstest.New(t)
	url := pgtest.URL(t)
	envVars := baseEnv(t, url)
	envVars["POSTMILL_DNS_RESOLVER"] = dns.Addr()
	envVars["POSTMILL_MTA_ALLOW_NETS"] = "127.0.0.1/32"
	// The killed process keeps its lease on the broadcast until it runs out; a short one lets the restarted
	// process claim it at once instead of after the default 30 s.
	envVars["POSTMILL_BROADCAST_LEASE"] = "3s"

	first := MustServe(t, "all", envVars)
	w := &mailWorld{env: &env{t: t, base: "http://" + first.addrs["edge-http"], http: &http.Client{Timeout: 30 * time.Second}}, dns: dns}
	w.owner = w.MustSignup("owner@"+senderDomain, "")
	w.mustVerifiedDomain(t, senderDomain)
	_, key := w.MustKey(w.owner, broadcastScopes)

	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Pool().Close()
	pool := st.Pool()
	var topic string
	if err := pool.QueryRow(ctx, `INSERT INTO topics (id, organization_id, key, name, created_at, updated_at)
		VALUES (gen_random_uuid(), $1, 'news', 'News', now(), now()) RETURNING id::text`, w.owner.orgID).Scan(&topic); err != nil {
		t.Fatal(err)
	}
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
	deadline := time.Now().Add(2 * time.Minute)
	// Kill it mid-page: after the first checkpoint, while messages of the next page are written but not yet
	// recorded, so the restart must both resume after the cursor and absorb the repeated sends.
	var cursor, status string
	var written, recordedBefore int
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
		_ = pool.QueryRow(ctx, `SELECT b.cursor, b.status, (SELECT count(*) FROM broadcast_recipients r WHERE r.broadcast_id = b.id),
			(SELECT count(*) FROM messages m WHERE m.idempotency_key LIKE 'broadcast:' || b.id || ':%')
			FROM broadcasts b WHERE b.id = $1`, id).Scan(&cursor, &status, &recordedBefore, &written)
		if cursor != "" && written > recordedBefore {
			break
		}
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	var before int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE idempotency_key LIKE 'broadcast:' || $1 || ':%'`, id).Scan(&before)
	if status != "sending" || before >= contacts {
		t.Fatalf("killed too late to test anything: status %q, %d messages", status, before)
	}

	MustServe(t, "all", envVars)
	for time.Now().Before(deadline.Add(2 * time.Minute)) {
		_ = pool.QueryRow(ctx, `SELECT status FROM broadcasts WHERE id = $1`, id).Scan(&status)
		if status == "sent" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var recorded, messages, distinct int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = $1`, id).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT r.address) FROM messages m JOIN recipients r ON r.message_id = m.id
		WHERE m.organization_id = $1 AND m.idempotency_key LIKE 'broadcast:' || $2 || ':%'`, w.owner.orgID, id).Scan(&messages, &distinct); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed at cursor %s with %d recipients recorded and %d messages written; after the restart: status %s, recipients %d, messages %d, distinct addresses %d",
		cursor, recordedBefore, before, status, recorded, messages, distinct)
	if status != "sent" || recorded != contacts || messages != contacts || distinct != contacts {
		t.Fatalf("status %s, recipients %d, messages %d, distinct addresses %d; want sent and %d each", status, recorded, messages, distinct, contacts)
	}
}
