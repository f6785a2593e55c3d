package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
)

// TestContacts_NoteEventsProbeByAddress: the trigger that keeps contacts current finds each contact through
// its (organization, email) key even when the connection first fired it while the organization had no
// contacts and the statistics still say contacts is empty (contacts imported or restored in bulk, then a
// broadcast before autovacuum analyses the table). A plan cached from that first call walked every contact
// of the organization in another index for each event: 30,000 rows read per event statement in a
// broadcast to 30,000 contacts, a fifth of PostgreSQL's time in the whole run.
func TestContacts_NoteEventsProbeByAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	conn, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	recipient := func(msg string) string {
		t.Helper()
		var id string
		if err := conn.QueryRow(ctx, `SELECT id FROM recipients WHERE message_id = $1`, msg).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	sent := func(msg string) {
		t.Helper()
		exec(`INSERT INTO events (id, organization_id, type, message_id, recipient_id, occurred_at)
		      VALUES ($1, $2, 'email.sent', $3, $4, $5)`, newID(), f.org.ID, msg, recipient(msg), baseTime)
	}

	// The first event on this connection, with no contacts at all and statistics that say so.
	exec(`ANALYZE contacts`)
	sent(f.mustInsert(t, f.newSend(t, "nobody@example.org")))

	const n = 3000
	exec(`INSERT INTO contacts (id, organization_id, email, created_at, updated_at)
	      SELECT gen_random_uuid(), $1, 'c' || g || '@example.org', now(), now() FROM generate_series(1, $2::int) AS g`,
		f.org.ID, n)
	msg := f.mustInsert(t, f.newSend(t, "C77@Example.org"))

	// noteSent inserts an email.sent for msg of org in a transaction of its own and returns the transaction and
	// the rows of contacts it read: by sequential scans of the table and through each of its indexes.
	noteSent := func(org, msg string) (pgx.Tx, int64) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The caller rolls back, before conn is released: a rollback after the release would use a
		// connection the pool is already closing.
		if _, err := tx.Exec(ctx, `INSERT INTO events (id, organization_id, type, message_id, recipient_id, occurred_at)
			VALUES ($1, $2, 'email.sent', $3, $4, $5)`, newID(), org, msg, recipient(msg), baseTime); err != nil {
			t.Fatal(err)
		}
		var read int64
		if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_returned('contacts'::regclass) +
			    COALESCE((SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index
			              WHERE indrelid = 'contacts'::regclass), 0)`).Scan(&read); err != nil {
			t.Fatal(err)
		}
		return tx, read
	}

	// An organization without contacts: nothing of the other organization's contacts is read.
	other := newSendFixture(t, st)
	tx, read := noteSent(other.org.ID, other.mustInsert(t, other.newSend(t, "c77@example.org")))
	if read != 0 {
		t.Fatalf("noting an email.sent of an organization without contacts read %d rows of contacts", read)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	tx, read = noteSent(f.org.ID, msg)
	defer tx.Rollback(ctx) // runs before conn.Release
	var noted int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM contacts WHERE organization_id = $1 AND last_sent_at IS NOT NULL`,
		f.org.ID).Scan(&noted); err != nil {
		t.Fatal(err)
	}
	if noted != 1 {
		t.Fatalf("%d contacts have last_sent_at after one email.sent to c77@example.org, want 1", noted)
	}
	if read > 10 {
		t.Fatalf("noting one email.sent read %d rows of contacts (of %d in the organization): the contact is not found by its address", read, n)
	}
}
