package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// receivedFor builds a received email of org with one attachment.
func receivedFor(orgID, rcpt, dedupe string) ports.ReceivedEmail {
	return ports.ReceivedEmail{ID: newV7(), OrganizationID: orgID, InboundDomainID: newV7(), To: rcpt, From: "s@example.org",
		ToAddresses: []string{rcpt}, Subject: "hi", SizeBytes: 10, SpamStatus: ports.SpamHam, ScanStatus: ports.ScanClean,
		Status: ports.ReceivedDelivered, ReceivedAt: baseTime, Headers: map[string][]string{"Subject": {"hi"}},
		RawKey: "inbound/raw/" + dedupe, DedupeKey: dedupe,
		Attachments: []ports.ReceivedAttachment{{ID: newV7(), Filename: "a.txt", ContentType: "text/plain", Size: 1,
			ScanStatus: ports.ScanClean, BlobKey: "inbound/part/" + dedupe}}}
}

// TestReceivedGroupCommitsTogether: the emails of one group are written by one transaction; a key repeated
// within the group or already held is stored once and answered with the holder's id; attachments and
// events are written only for the emails inserted.
func TestReceivedGroupCommitsTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a, b := mustSignup(t, s), mustSignup(t, s)
	held := receivedFor(a.org.ID, "x@in.example.test", "held")
	if ok, _, err := s.InsertReceived(ctx, held, nil); err != nil || !ok {
		t.Fatalf("InsertReceived = %v, %v", ok, err)
	}
	one, two := receivedFor(a.org.ID, "x@in.example.test", "one"), receivedFor(a.org.ID, "y@in.example.test", "one")
	again := receivedFor(a.org.ID, "x@in.example.test", "one") // a retry of one inside the same group
	retried := receivedFor(a.org.ID, "x@in.example.test", "held")
	other := receivedFor(b.org.ID, "x@in.example.test", "one") // the same key in another organization
	res := s.WriteReceivedGroup(ctx, again, one, two, retried, other)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", i, r.Err)
		}
	}
	// again and one carry the same key: whichever the group wrote first holds it, the other finds it.
	first, second := res[0], res[1]
	firstID, secondID := again.ID, one.ID
	if !first.Inserted {
		first, second, firstID, secondID = second, first, secondID, firstID
	}
	if !first.Inserted || second.Inserted || second.Existing != firstID {
		t.Fatalf("same key twice in a group: %+v / %+v", res[0], res[1])
	}
	if !res[2].Inserted || res[3].Inserted || res[3].Existing != held.ID || !res[4].Inserted {
		t.Fatalf("group results: %+v", res)
	}
	ids := []string{firstID, two.ID, other.ID}
	if n := countRows(t, s, `SELECT count(DISTINCT xmin::text) FROM received_emails WHERE id = ANY($1)`, ids); n != 1 {
		t.Fatalf("the group's emails were written by %d transactions, want 1", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM received_emails WHERE id = ANY($1)`, []string{secondID, retried.ID}); n != 0 {
		t.Fatalf("%d duplicates stored", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM received_attachments WHERE received_email_id = ANY($1)`, ids); n != 3 {
		t.Fatalf("%d attachments, want 3", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE type = 'email.received' AND message_id = ANY($1)`,
		append(ids, secondID, retried.ID)); n != 3 {
		t.Fatalf("%d email.received events, want 3 (one per email inserted)", n)
	}
	if n := countRows(t, s, `SELECT count(*) FROM events WHERE type = 'email.received' AND message_id = $1 AND organization_id = $2`,
		other.ID, b.org.ID); n != 1 {
		t.Fatalf("the other organization's event: %d", n)
	}
}

// TestReceivedGroupAnswersOnlyAfterCommit: concurrent InsertReceived calls that queue while a group of
// their lane is being written go together into the next group, and none of them returns before that group has committed:
// while the group ahead is held up, every call is still waiting, and each email is visible to another
// connection by the time its call returns. Nothing is timed: the first group is held by a transaction of the
// test's own that holds the dedupe key it needs.
func TestReceivedGroupAnswersOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.Store(t)
	a := mustSignup(t, s)

	// The test's transaction inserts the key "blocker" and keeps it uncommitted, so the first group, whose
	// email has the same key, waits on the unique index.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	blocker := receivedFor(a.org.ID, "x@in.example.test", "blocker")
	if _, err := tx.Exec(ctx, `INSERT INTO received_emails (id, organization_id, inbound_domain_id, rcpt, mail_from,
		header_from, header_from_name, to_addresses, cc_addresses, subject, message_id, size_bytes, spam_status,
		scan_status, status, received_at, text_body, html_body, headers, raw_key, dedupe_key)
		VALUES ($1, $2, $3, $4, '', '', '', '{}', '{}', '', '', 0, 'ham', 'clean', 'delivered', now(), '', '', '{}', 'k', $5)`,
		newV7(), a.org.ID, newV7(), blocker.To, blocker.DedupeKey); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		id      string
		ok      bool
		err     error
		visible int
	}
	const n = 12
	answers := make(chan answer, n+1)
	call := func(e ports.ReceivedEmail) {
		ok, _, err := s.InsertReceived(ctx, e, []ports.Event{{Type: ports.EventEmailReceived, OccurredAt: baseTime}})
		// Read through another connection of the pool: the row is there only if its transaction committed.
		var visible int
		_ = s.Pool().QueryRow(ctx, `SELECT count(*) FROM received_emails WHERE id = $1`, e.ID).Scan(&visible)
		answers <- answer{id: e.ID, ok: ok, err: err, visible: visible}
	}
	var txPID int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&txPID); err != nil {
		t.Fatal(err)
	}
	go call(blocker)
	waitFor(t, func() bool { return blockedBy(t, s, txPID) })
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		// Emails are queued per lane; these share the blocked group's lane, so they wait behind it.
		e := receivedFor(a.org.ID, "x@in.example.test", "queued-"+randomHex(t, 4))
		for postgres.ReceivedLane(e) != postgres.ReceivedLane(blocker) {
			e = receivedFor(a.org.ID, "x@in.example.test", "queued-"+randomHex(t, 4))
		}
		ids[i] = e.ID
		wg.Add(1)
		go func() { defer wg.Done(); call(e) }()
	}
	waitFor(t, func() bool { return s.QueuedReceived() == n })
	select {
	case got := <-answers:
		t.Fatalf("a call returned while its group could not commit: %+v", got)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for range n + 1 {
		got := <-answers
		if got.err != nil || !got.ok || got.visible != 1 {
			t.Fatalf("answer %+v: want inserted and visible to another connection when returned", got)
		}
	}
	if c := countRows(t, s, `SELECT count(DISTINCT xmin::text) FROM received_emails WHERE id = ANY($1)`, ids); c != 1 {
		t.Fatalf("the %d queued emails were written by %d transactions, want 1", n, c)
	}
}

// blockedBy reports whether a session waits for a lock held by the backend pid.
func blockedBy(t *testing.T, s *postgres.Store, pid int) bool {
	return countRows(t, s, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid) > 0
}

// waitFor polls cond until it holds, failing the test after a generous bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}
