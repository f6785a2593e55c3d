package broadcast

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// bulkEmails is the send path with its bulk entry: each page is one call, answered in page order (as
// sending.Service.SendBulk meters it), or failed as a whole like a transaction that did not commit.
type bulkEmails struct {
	*fakeEmails
	pages     int
	sizes     []int
	failPages int // the next this many pages fail as a whole
}

func (e *bulkEmails) SendBulk(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	e.pages++
	e.sizes = append(e.sizes, len(reqs))
	out := make([]ports.BatchItemResult, len(reqs))
	if e.failPages > 0 {
		e.failPages--
		for i := range out {
			out[i] = ports.BatchItemResult{Index: i, Err: fmt.Errorf("connection reset")}
		}
		return out, nil
	}
	for i, r := range reqs {
		res, err := e.fakeEmails.Send(ctx, orgID, r)
		out[i] = ports.BatchItemResult{Index: i, Result: res, Err: err}
	}
	return out, nil
}

// With a bulk entry the expander hands over each page in one call; suppressed contacts are recorded and
// skipped, the warm-up cap pauses the broadcast after the last contact that fit, a page that failed as a
// whole is sent again, and every contact ends with exactly one message.
func TestExpander_BulkPages(t *testing.T) {
	f := newFixture(t, 30)
	bulk := &bulkEmails{fakeEmails: f.emails}
	f.svc.deps.Emails = bulk
	ctx := context.Background()
	b := f.create(t)
	f.emails.suppressed[f.audience.contacts[4].Email] = true
	f.emails.capLeft = 12
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Contacts 1-4 and 6-13 fit under the cap (5 is suppressed); 14 is refused.
	p, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	tomorrow := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	if p.Status != ports.BroadcastSending || p.PausedUntil == nil || !p.PausedUntil.Equal(tomorrow) || p.Cursor != contactID(13) {
		t.Fatalf("paused = %+v", p)
	}
	if len(f.emails.byKey) != 12 {
		t.Fatalf("%d messages under a cap of 12", len(f.emails.byKey))
	}

	// Tomorrow: the first page fails as a whole, then the broadcast goes on after the last recorded contact.
	f.emails.capLeft = -1
	bulk.failPages = 1
	f.svc.deps.Clock = fixedClock{tomorrow.Add(time.Minute)}
	if err := f.svc.ExpandOnce(ctx); err == nil {
		t.Fatal("the failed page was not reported")
	}
	if mid, _ := f.store.GetBroadcast(ctx, orgA, b.ID); mid.Cursor != contactID(13) {
		t.Fatalf("a failed page moved the cursor to %s", mid.Cursor)
	}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	done, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	if done.Status != ports.BroadcastSent || len(f.emails.byKey) != 29 {
		t.Fatalf("done = %+v, %d messages, want 29", done, len(f.emails.byKey))
	}
	seen := map[string]bool{}
	for _, r := range f.store.recipients[b.ID] {
		if seen[r.ContactID] {
			t.Fatalf("contact %s recorded twice", r.ContactID)
		}
		seen[r.ContactID] = true
	}
	if len(seen) != 30 {
		t.Fatalf("%d contacts recorded, want 30", len(seen))
	}
	for _, n := range bulk.sizes {
		if n > f.svc.cfg.BatchSize {
			t.Fatalf("a call of %d emails for pages of %d", n, f.svc.cfg.BatchSize)
		}
	}
	if len(f.emails.requests) != 29 {
		t.Fatalf("%d sends, want 29", len(f.emails.requests))
	}
}
