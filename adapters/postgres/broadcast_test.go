package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

func newBroadcastRow(orgID, topicID string) ports.Broadcast {
	return ports.Broadcast{
		ID: newV7(), OrganizationID: orgID, Name: "November", Subject: "Hi {{ contact.firstName }}",
		From: "news@acme.test", HTML: "<p>Hi</p>", TopicID: topicID, Status: ports.BroadcastDraft,
		CreatedAt: baseTime, UpdatedAt: baseTime,
	}
}

func TestBroadcasts_LifecycleBatchesStatsAndTenancy(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	f := newSendFixture(t, st)
	other := mustSignup(t, st)
	topic := newID()
	mustExec(t, st, `INSERT INTO topics (id, organization_id, key, name, created_at, updated_at) VALUES ($1, $2, 'news', 'News', now(), now())`, topic, f.org.ID)

	b := newBroadcastRow(f.org.ID, topic)
	if err := st.InsertBroadcast(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A topic of another organization cannot be referenced.
	foreign := newBroadcastRow(other.org.ID, topic)
	if err := st.InsertBroadcast(ctx, foreign); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("foreign topic: %v", err)
	}
	got, err := st.GetBroadcast(ctx, f.org.ID, b.ID)
	if err != nil || got.TopicID != topic || got.Status != ports.BroadcastDraft || got.SegmentID != "" {
		t.Fatalf("get = %+v, %v", got, err)
	}

	// Tenancy: another organization sees, changes and deletes nothing.
	if _, err := st.GetBroadcast(ctx, other.org.ID, b.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign get: %v", err)
	}
	if list, err := st.ListBroadcasts(ctx, other.org.ID, ports.MaxListLimit, 0); err != nil || len(list) != 0 {
		t.Fatalf("foreign list = %v, %v", list, err)
	}
	stolen := got
	stolen.OrganizationID, stolen.Name = other.org.ID, "stolen"
	if _, err := st.UpdateBroadcast(ctx, stolen, ports.BroadcastDraft); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign update: %v", err)
	}
	if err := st.DeleteBroadcast(ctx, other.org.ID, b.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign delete: %v", err)
	}
	if _, err := st.BroadcastStats(ctx, other.org.ID, b.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign stats: %v", err)
	}
	if _, _, err := st.BroadcastRecipients(ctx, other.org.ID, b.ID, 10, 0); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign recipients: %v", err)
	}

	// A transition from a state not allowed is failed_precondition and changes nothing.
	got.Status = ports.BroadcastCanceled
	if _, err := st.UpdateBroadcast(ctx, got, ports.BroadcastScheduled); ports.ErrorCode(err) != ports.CodeFailedPrecondition {
		t.Fatalf("draft → canceled: %v", err)
	}
	// Scheduled in the past: the expander's claim moves it to sending.
	past := baseTime.Add(-time.Hour)
	got.Status, got.ScheduledAt = ports.BroadcastScheduled, &past
	if got, err = st.UpdateBroadcast(ctx, got, ports.BroadcastDraft); err != nil || got.Status != ports.BroadcastScheduled {
		t.Fatalf("schedule = %+v, %v", got, err)
	}
	claimed, err := st.ClaimBroadcasts(ctx, time.Now(), 1000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var mine *ports.Broadcast
	for i := range claimed {
		if claimed[i].ID == b.ID {
			mine = &claimed[i]
		}
	}
	if mine == nil || mine.Status != ports.BroadcastSending || mine.StartedAt == nil {
		t.Fatalf("claim did not start the broadcast: %+v", claimed)
	}
	if err := st.DeleteBroadcast(ctx, f.org.ID, b.ID); ports.ErrorCode(err) != ports.CodeFailedPrecondition {
		t.Fatalf("delete while sending: %v", err)
	}

	// Two contacts, one message written for the first, the second suppressed.
	c1, c2 := "00000000-0000-7000-8000-0000000000a1", "00000000-0000-7000-8000-0000000000a2"
	for _, c := range []string{c1, c2} {
		mustExec(t, st, `INSERT INTO contacts (id, organization_id, email, created_at, updated_at) VALUES ($1, $2, $3, now(), now())`, c, f.org.ID, c+"@example.test")
	}
	msg := f.mustInsert(t, f.newSend(t, c1+"@example.test"))
	batch := []ports.BroadcastRecipient{
		{ContactID: c1, Email: c1 + "@example.test", MessageID: msg, Status: "queued", CreatedAt: baseTime},
		{ContactID: c2, Email: c2 + "@example.test", Status: ports.BroadcastRecipientSuppressed, CreatedAt: baseTime},
	}
	moved, err := st.RecordBatch(ctx, *mine, c2, batch, time.Minute)
	if err != nil || !moved {
		t.Fatalf("record = %v, %v", moved, err)
	}
	// The same batch recorded again from the old cursor (a second expander, a repeat) writes nothing.
	if moved, err := st.RecordBatch(ctx, *mine, c2, batch, time.Minute); err != nil || moved {
		t.Fatalf("repeat record = %v, %v", moved, err)
	}
	if again, _ := st.GetBroadcast(ctx, f.org.ID, b.ID); again.Cursor != c2 {
		t.Fatalf("cursor = %q", again.Cursor)
	}
	rs, total, err := st.BroadcastRecipients(ctx, f.org.ID, b.ID, 1, 1)
	if err != nil || total != 2 || len(rs) != 1 || rs[0].ContactID != c2 || rs[0].Status != ports.BroadcastRecipientSuppressed {
		t.Fatalf("recipients page = %+v, %d, %v", rs, total, err)
	}
	rs, _, _ = st.BroadcastRecipients(ctx, f.org.ID, b.ID, 10, 0)
	if len(rs) != 2 || rs[0].MessageID != msg || rs[0].Status != string(ports.StatusQueued) {
		t.Fatalf("recipients = %+v", rs)
	}
	// The recipient's status is its message's, as it changes.
	mustExec(t, st, `UPDATE messages SET status = 'clicked' WHERE id = $1`, msg)
	if err := st.NoteUnsubscribe(ctx, f.org.ID, b.ID, c1, baseTime); err != nil {
		t.Fatal(err)
	}
	if err := st.NoteUnsubscribe(ctx, other.org.ID, b.ID, c1, baseTime); err != nil {
		t.Fatal(err)
	}
	stats, err := st.BroadcastStats(ctx, f.org.ID, b.ID)
	want := ports.BroadcastStats{Recipients: 1, Sent: 1, Delivered: 1, Opened: 1, Clicked: 1, Unsubscribed: 1}
	if err != nil || stats != want {
		t.Fatalf("stats = %+v, %v; want %+v", stats, err, want)
	}

	// The unsubscribe page's subject is scoped by organization.
	email, topicName, err := st.UnsubscribeSubject(ctx, f.org.ID, c1, topic)
	if err != nil || email != c1+"@example.test" || topicName != "News" {
		t.Fatalf("subject = %q %q %v", email, topicName, err)
	}
	if _, _, err := st.UnsubscribeSubject(ctx, other.org.ID, c1, ""); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("foreign subject: %v", err)
	}

	// Finished: sent, and then deletable.
	if err := st.FinishBroadcast(ctx, f.org.ID, b.ID, ports.BroadcastSent, "", nil, baseTime); err != nil {
		t.Fatal(err)
	}
	if done, _ := st.GetBroadcast(ctx, f.org.ID, b.ID); done.Status != ports.BroadcastSent || done.CompletedAt == nil {
		t.Fatalf("finished = %+v", done)
	}
	if err := st.DeleteBroadcast(ctx, f.org.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetBroadcast(ctx, f.org.ID, b.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("after delete: %v", err)
	}
}
