package sending

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// bulkMessages gives the fakes of send_order_test.go the bulk store: one look-up and one insert per page.
type bulkMessages struct {
	fakeMessages
}

func (f bulkMessages) MessagesByIdempotencyKeys(_ context.Context, orgID string, keys []string) (map[string]ports.SendResult, error) {
	f.w.log("idempotency-page")
	out := map[string]ports.SendResult{}
	for _, k := range keys {
		if id, ok := f.w.replays[k]; ok && orgID == orderOrgID {
			out[k] = ports.SendResult{ID: id, Status: ports.StatusQueued}
		}
	}
	return out, nil
}

func (f bulkMessages) InsertMessages(ctx context.Context, nms []ports.NewMessage) ([]ports.Inserted, error) {
	f.w.log("insert-page")
	out := make([]ports.Inserted, len(nms))
	for i, nm := range nms {
		ins, err := f.fakeMessages.InsertMessage(ctx, nm)
		if err != nil {
			return nil, err
		}
		out[i] = ins
	}
	return out, nil
}

// bulkPage is six emails that meet every outcome of a single send: accepted, invalid, a replay, suppressed,
// accepted, and over the warm-up cap (the page's last unit of room goes to the earlier email).
func bulkPage(w *sendWorld) []ports.SendRequest {
	w.replays["k-replay"] = "earlier-message"
	w.suppressed["gone@rcpt.example"] = true
	w.org.Plan.WarmupCap = 2
	req := func(to, key string) ports.SendRequest {
		return ports.SendRequest{From: "news@" + orderDomain, To: []string{to}, Subject: "Hi", Text: "Hello", IdempotencyKey: key}
	}
	return []ports.SendRequest{
		req("a@rcpt.example", "k-a"),
		req("not an address", "k-bad"),
		req("b@rcpt.example", "k-replay"),
		req("gone@rcpt.example", "k-gone"),
		req("c@rcpt.example", "k-c"),
		req("d@rcpt.example", "k-d"),
	}
}

func checkBulkOutcomes(t *testing.T, w *sendWorld, res []ports.BatchItemResult) {
	t.Helper()
	if len(res) != 6 {
		t.Fatalf("%d results for 6 emails", len(res))
	}
	for i, r := range res {
		if r.Index != i {
			t.Fatalf("result %d has index %d", i, r.Index)
		}
	}
	if res[0].Err != nil || res[0].Result.ID == "" || res[0].Result.Deduped {
		t.Errorf("first email: %+v", res[0])
	}
	if e, ok := ports.AsError(res[1].Err); !ok || e.Code != ports.CodeInvalidArgument || len(e.Details) == 0 {
		t.Errorf("invalid email: %v, want a validation error with details", res[1].Err)
	}
	if res[2].Err != nil || res[2].Result.ID != "earlier-message" || !res[2].Result.Deduped {
		t.Errorf("replay: %+v, want the earlier message, deduplicated", res[2])
	}
	if ports.ErrorMessage(res[3].Err) != "recipient suppressed: gone@rcpt.example" {
		t.Errorf("suppressed email: %v", res[3].Err)
	}
	if res[4].Err != nil || res[4].Result.ID == "" {
		t.Errorf("fifth email: %+v", res[4])
	}
	if ports.ErrorCode(res[5].Err) != ports.CodeResourceExhausted {
		t.Errorf("email over the warm-up cap: %v, want 429", res[5].Err)
	}
	if len(w.inserted) != 2 {
		t.Fatalf("%d messages written, want 2", len(w.inserted))
	}
	for _, nm := range w.inserted {
		if len(nm.Outbox) == 0 {
			t.Fatalf("message %s has no delivery job", nm.Message.ID)
		}
		for _, j := range nm.Outbox {
			if !j.Bulk {
				t.Errorf("job %s of a bulk send is not in the bulk lane", j.ID)
			}
		}
	}
	if got := w.inserted[0].Message.Recipients[0].Address + " " + w.inserted[1].Message.Recipients[0].Address; got != "a@rcpt.example c@rcpt.example" {
		t.Errorf("written in the order %s, want the page's", got)
	}
}

// With a bulk store, a page costs one idempotency look-up, one suppression query and one insert, and every
// email gets what Send would have answered for it alone.
func TestSendBulkOnePageOneLookupOfEachKind(t *testing.T) {
	t.Parallel()
	w := newSendWorld(t)
	w.svc.messages = bulkMessages{fakeMessages{w: w}}
	res, err := w.svc.SendBulk(context.Background(), orderOrgID, bulkPage(w))
	if err != nil {
		t.Fatal(err)
	}
	checkBulkOutcomes(t, w, res)
	steps := w.steps()
	for _, step := range []string{"idempotency-page", "domain", "organization", "suppressions", "insert-page"} {
		if n := count(steps, step); n != 1 {
			t.Errorf("step %s ran %d times, want once: %v", step, n, steps)
		}
	}
	if slices.Contains(steps, "idempotency") {
		t.Errorf("a key was looked up on its own: %v", steps)
	}
}

// Without one, the same rules hold one email at a time.
func TestSendBulkFallsBackToSingleWrites(t *testing.T) {
	t.Parallel()
	w := newSendWorld(t)
	res, err := w.svc.SendBulk(context.Background(), orderOrgID, bulkPage(w))
	if err != nil {
		t.Fatal(err)
	}
	checkBulkOutcomes(t, w, res)
}

// A paused organization refuses every email of the page that is not a replay, and writes nothing.
func TestSendBulkPausedOrganization(t *testing.T) {
	t.Parallel()
	w := newSendWorld(t)
	w.svc.messages = bulkMessages{fakeMessages{w: w}}
	page := bulkPage(w)
	w.org.Paused = true
	res, err := w.svc.SendBulk(context.Background(), orderOrgID, page)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		switch i {
		case 1: // invalid before anything else
		case 2:
			if !r.Result.Deduped {
				t.Errorf("replay: %+v", r)
			}
		default:
			if ports.ErrorCode(r.Err) != ports.CodePermissionDenied {
				t.Errorf("email %d: %v, want 403", i, r.Err)
			}
		}
	}
	if len(w.inserted) != 0 {
		t.Errorf("%d messages written for a paused organization", len(w.inserted))
	}
}

func TestSendBulkBound(t *testing.T) {
	t.Parallel()
	w := newSendWorld(t)
	reqs := make([]ports.SendRequest, MaxBulk+1)
	if _, err := w.svc.SendBulk(context.Background(), orderOrgID, reqs); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("a page of %d: %v, want a validation error", len(reqs), err)
	}
}

func count(steps []string, step string) int {
	n := 0
	for _, s := range steps {
		if strings.EqualFold(s, step) {
			n++
		}
	}
	return n
}
