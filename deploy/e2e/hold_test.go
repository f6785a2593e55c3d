package e2e

import (
	"context"
	"testing"
	"time"
)

// countRows runs a count over the App's own schema (held, queued and outboxed jobs of one message).
func (e *env) countRows(t *testing.T, query, messageID string) int {
	t.Helper()
	var n int
	if err := e.app.Store().Pool().QueryRow(context.Background(), query, messageID).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

const (
	heldJobsSQL     = `SELECT count(*) FROM delivery_held WHERE message_id = $1`
	queuedJobsSQL   = `SELECT count(*) FROM delivery_queue WHERE message_id = $1`
	outboxedJobsSQL = `SELECT count(*) FROM delivery_outbox WHERE message_id = $1`
)

// waitHeld polls until the message has a held job (its next attempt found the pause or the suspension), the
// MTA has acknowledged the job out of the queue, and the relay that published it has committed its
// outbox transaction: the relay publishes before it deletes the outbox row (core/sending/relay.go), so a
// job can be leased and held while its outbox row is still being deleted.
func (w *mailWorld) waitHeld(t *testing.T, messageID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for w.countRows(t, heldJobsSQL, messageID) == 0 || w.countRows(t, queuedJobsSQL, messageID) != 0 ||
		w.countRows(t, outboxedJobsSQL, messageID) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("message %s was never held (%d held, %d queued, %d in the outbox)", messageID,
				w.countRows(t, heldJobsSQL, messageID), w.countRows(t, queuedJobsSQL, messageID),
				w.countRows(t, outboxedJobsSQL, messageID))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// assertKept checks that a held message stays out of circulation: held, neither queued nor waiting in the
// outbox, still delivery_delayed (not failed), and not delivered although the recipient's server accepts
// mail again. It looks again after several retry periods (the world retries every 200 ms, doubling).
func (w *mailWorld) assertKept(t *testing.T, messageID, needle string) {
	t.Helper()
	for round := range 2 {
		if round == 1 {
			time.Sleep(1500 * time.Millisecond)
		}
		if n := w.countRows(t, heldJobsSQL, messageID); n != 1 {
			t.Fatalf("%d held jobs, want 1", n)
		}
		if q, o := w.countRows(t, queuedJobsSQL, messageID), w.countRows(t, outboxedJobsSQL, messageID); q+o != 0 {
			t.Fatalf("held mail circulates: %d jobs queued, %d in the outbox", q, o)
		}
		if n := w.mx.count(needle); n != 0 {
			t.Fatalf("delivered %d times while held", n)
		}
		if st := expect(t, w.get("/v1/emails/"+messageID, w.key), 200).str("status"); st != "delivery_delayed" {
			t.Fatalf("held message is %q, want delivery_delayed", st)
		}
	}
}

// TestPauseHoldsQueuedMailUntilResume: pausing an organization stops mail it had already sent, not only
// new sends. A message whose recipient's server is down is retried; once the organization is paused, its
// next attempt is held in the core — out of the queue, so it neither retries nor uses up redeliveries — and
// nothing is delivered even when the server comes back. Resuming releases it, and it is delivered once.
func TestPauseHoldsQueuedMailUntilResume(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	root := w.MustSignup("root@admin.example", "")
	const rcpt, needle = "paused@rcpt.example", "held while the organization is paused"
	w.mx.setDefer(rcpt, true) // the recipient's server answers 451 for now

	id := expect(t, w.send(t, map[string]any{"from": "news@" + senderDomain, "to": rcpt, "subject": "Pause",
		"text": needle}, nil), 202).str("id")
	w.waitStatus(t, id, "delivery_delayed", 30*time.Second)

	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/pause", root.access, nil), 200)
	w.waitHeld(t, id)
	w.mx.setDefer(rcpt, false) // the server is back: only the pause keeps the mail now
	w.assertKept(t, id, needle)
	// New sends are refused meanwhile.
	errorBody(t, w.send(t, map[string]any{"from": "news@" + senderDomain, "to": rcpt, "subject": "Pause",
		"text": "refused"}, nil), 403, "org_suspended", "organization sending is paused")

	expect(t, w.post("/v1/admin/organizations/"+w.owner.orgID+"/resume", root.access, nil), 200)
	got := w.waitStatus(t, id, "delivered", 30*time.Second)
	w.mx.waitFor(t, needle, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // a second copy would arrive by now
	if n := w.mx.count(needle); n != 1 {
		t.Fatalf("delivered %d times after the resume, want once", n)
	}
	if n := w.countRows(t, heldJobsSQL, id); n != 0 {
		t.Errorf("%d jobs still held after the resume", n)
	}
	want := []string{"queued", "delivery_delayed", "sent", "delivered"}
	if tl := timeline(got); len(tl) < len(want) || tl[0] != want[0] || tl[len(tl)-1] != want[3] || contains(tl, "failed") {
		t.Errorf("timeline %v, want %v with delays in between and no failure", tl, want)
	}
}

// TestSuspendHoldsQueuedMailUntilReverified: suspending a sending domain holds the mail already accepted
// from it the same way, and verifying the domain again releases it.
func TestSuspendHoldsQueuedMailUntilReverified(t *testing.T) {
	t.Parallel()
	w := MustMailWorld(t, nil)
	const domain = "suspended.example"
	domainID := w.mustVerifiedDomain(t, domain)
	const rcpt, needle = "suspended@rcpt.example", "held while the domain is suspended"
	w.mx.setDefer(rcpt, true)

	id := expect(t, w.send(t, map[string]any{"from": "news@" + domain, "to": rcpt, "subject": "Suspend",
		"text": needle}, nil), 202).str("id")
	w.waitStatus(t, id, "delivery_delayed", 30*time.Second)

	if st := expect(t, w.post("/v1/domains/"+domainID+"/suspend", w.owner.access, nil), 201).str("status"); st != "suspended" {
		t.Fatalf("suspend answered status %q", st)
	}
	w.waitHeld(t, id)
	w.mx.setDefer(rcpt, false)
	w.assertKept(t, id, needle)
	// The organization's other domain is not held.
	expect(t, w.send(t, map[string]any{"from": "news@" + senderDomain, "to": "other@rcpt.example", "subject": "Not held",
		"text": "the other domain still sends"}, nil), 202)
	w.mx.waitFor(t, "the other domain still sends", 30*time.Second)

	if st := expect(t, w.post("/v1/domains/"+domainID+"/verify", w.owner.access, nil), 201).str("status"); st != "verified" {
		t.Fatalf("verify answered status %q", st)
	}
	w.waitStatus(t, id, "delivered", 30*time.Second)
	w.mx.waitFor(t, needle, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if n := w.mx.count(needle); n != 1 {
		t.Fatalf("delivered %d times after verifying again, want once", n)
	}
	if n := w.countRows(t, heldJobsSQL, id); n != 0 {
		t.Errorf("%d jobs still held after verifying again", n)
	}
}
