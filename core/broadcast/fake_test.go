package broadcast

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// fakeStore is an in-memory ports.BroadcastStore with the same guarded transitions as the PostgreSQL one.
type fakeStore struct {
	mu         sync.Mutex
	broadcasts map[string]ports.Broadcast
	recipients map[string][]ports.BroadcastRecipient
	contacts   map[string]string // contact id → email (one organization: orgA)
	unsubs     map[string]bool
	// leases are the expanders' claims like the PostgreSQL store's (token, end on the store's own clock,
	// the real one) by broadcast id; tokens counts the claims made.
	leases map[string]fakeLease
	tokens int
}

type fakeLease struct {
	token string
	until time.Time
}

func newFakeStore() *fakeStore {
	return &fakeStore{broadcasts: map[string]ports.Broadcast{}, recipients: map[string][]ports.BroadcastRecipient{},
		contacts: map[string]string{}, unsubs: map[string]bool{}, leases: map[string]fakeLease{}}
}

func (f *fakeStore) InsertBroadcast(_ context.Context, b ports.Broadcast) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broadcasts[b.ID] = b
	return nil
}

func (f *fakeStore) GetBroadcast(_ context.Context, orgID, id string) (ports.Broadcast, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.broadcasts[id]
	if !ok || b.OrganizationID != orgID {
		return ports.Broadcast{}, ports.NotFound("broadcast not found")
	}
	return b, nil
}

func (f *fakeStore) ListBroadcasts(_ context.Context, orgID string, limit, offset int) ([]ports.Broadcast, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ports.Broadcast
	for _, b := range f.broadcasts {
		if b.OrganizationID == orgID {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b ports.Broadcast) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	out = out[min(offset, len(out)):]
	return out[:min(limit, len(out))], nil
}

func (f *fakeStore) UpdateBroadcast(ctx context.Context, b ports.Broadcast, from ...ports.BroadcastStatus) (ports.Broadcast, error) {
	cur, err := f.GetBroadcast(ctx, b.OrganizationID, b.ID)
	if err != nil {
		return cur, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range from {
		if cur.Status == st {
			b.Cursor = cur.Cursor
			f.broadcasts[b.ID] = b
			return b, nil
		}
	}
	return ports.Broadcast{}, ports.Errorf(ports.CodeFailedPrecondition, "state")
}

func (f *fakeStore) DeleteBroadcast(ctx context.Context, orgID, id string) error {
	cur, err := f.GetBroadcast(ctx, orgID, id)
	if err != nil {
		return err
	}
	if cur.Status == ports.BroadcastSending {
		return ports.Errorf(ports.CodeFailedPrecondition, "sending")
	}
	f.mu.Lock()
	delete(f.broadcasts, id)
	f.mu.Unlock()
	return nil
}

func (f *fakeStore) ClaimBroadcasts(_ context.Context, now time.Time, limit int, lease time.Duration) ([]ports.Broadcast, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ports.Broadcast
	ids := make([]string, 0, len(f.broadcasts))
	for id := range f.broadcasts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		b := f.broadcasts[id]
		if b.Status == ports.BroadcastScheduled && !b.ScheduledAt.After(now) {
			b.Status = ports.BroadcastSending
			f.broadcasts[id] = b
		}
		if len(out) == limit || b.Status != ports.BroadcastSending || (b.PausedUntil != nil && b.PausedUntil.After(now)) {
			continue
		}
		if l, held := f.leases[id]; held && l.token != "" && time.Now().Before(l.until) {
			continue
		}
		f.tokens++
		b.ExpanderToken = fmt.Sprintf("token-%d", f.tokens)
		f.leases[id] = fakeLease{token: b.ExpanderToken, until: time.Now().Add(lease)}
		out = append(out, b)
	}
	return out, nil
}

func (f *fakeStore) RecordBatch(_ context.Context, b ports.Broadcast, cursor string, rs []ports.BroadcastRecipient, lease time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.broadcasts[b.ID]
	if cur.Cursor != b.Cursor || cur.Status != ports.BroadcastSending || b.ExpanderToken == "" || f.leases[b.ID].token != b.ExpanderToken {
		return false, nil
	}
	cur.Cursor, cur.PausedUntil = cursor, nil
	f.broadcasts[b.ID] = cur
	f.leases[b.ID] = fakeLease{token: b.ExpanderToken, until: time.Now().Add(lease)}
	f.recipients[b.ID] = append(f.recipients[b.ID], rs...)
	return true, nil
}

func (f *fakeStore) ReleaseBroadcast(_ context.Context, b ports.Broadcast) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.ExpanderToken != "" && f.leases[b.ID].token == b.ExpanderToken {
		delete(f.leases, b.ID)
	}
	return nil
}

func (f *fakeStore) FinishBroadcast(_ context.Context, orgID, id string, status ports.BroadcastStatus, reason string, pausedUntil *time.Time, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.broadcasts[id]
	if b.OrganizationID != orgID || b.Status != ports.BroadcastSending {
		return nil
	}
	b.Status, b.FailureReason, b.PausedUntil = status, reason, pausedUntil
	f.broadcasts[id] = b
	delete(f.leases, id)
	return nil
}

func (f *fakeStore) BroadcastStats(context.Context, string, string) (ports.BroadcastStats, error) {
	return ports.BroadcastStats{}, nil
}

func (f *fakeStore) BroadcastRecipients(_ context.Context, _, id string, limit, offset int) ([]ports.BroadcastRecipient, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.recipients[id]
	return rs, int64(len(rs)), nil
}

func (f *fakeStore) UnsubscribeSubject(_ context.Context, orgID, contactID, topicID string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	email, ok := f.contacts[contactID]
	if !ok || orgID != orgA {
		return "", "", ports.NotFound("contact not found")
	}
	return email, "News", nil
}

func (f *fakeStore) NoteUnsubscribe(_ context.Context, orgID, broadcastID, contactID string, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsubs[broadcastID+"/"+contactID] = true
	return nil
}

// fakeAudience is a sorted list of subscribed contacts of orgA's topic.
type fakeAudience struct {
	mu           sync.Mutex
	contacts     []ports.AudienceContact
	topic        string
	unsubscribed map[string]string // contact id → topic id ("" for all)
}

func (a *fakeAudience) PageAudience(_ context.Context, orgID string, au ports.Audience, after string, limit int) ([]ports.AudienceContact, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if orgID != orgA || au.TopicID != a.topic {
		return nil, ports.NotFound("topic not found")
	}
	sort.Slice(a.contacts, func(i, j int) bool { return a.contacts[i].ID < a.contacts[j].ID })
	var out []ports.AudienceContact
	for _, c := range a.contacts {
		if _, gone := a.unsubscribed[c.ID]; gone || c.ID <= after {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, c)
	}
	return out, nil
}

func (a *fakeAudience) UnsubscribeContact(_ context.Context, orgID, contactID, topicID, _ string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if orgID == orgA {
		a.unsubscribed[contactID] = topicID
	}
	return nil
}

// fakeEmails is the send path: idempotency keys, suppressions and a daily cap, like core/sending's.
type fakeEmails struct {
	mu         sync.Mutex
	byKey      map[string]string
	requests   []ports.SendRequest
	suppressed map[string]bool
	capLeft    int // -1: none
	failAfter  int // panic-free "crash": return a transient error after this many new messages (-1: never)
}

func newFakeEmails() *fakeEmails {
	return &fakeEmails{byKey: map[string]string{}, suppressed: map[string]bool{}, capLeft: -1, failAfter: -1}
}

func (e *fakeEmails) Send(_ context.Context, _ string, req ports.SendRequest) (ports.SendResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id, ok := e.byKey[req.IdempotencyKey]; ok {
		return ports.SendResult{ID: id, Status: ports.StatusQueued, Deduped: true}, nil
	}
	if e.suppressed[req.To[0]] {
		return ports.SendResult{}, ports.Errorf(ports.CodeInvalidArgument, "recipient suppressed: %s", req.To[0])
	}
	if e.capLeft == 0 {
		return ports.SendResult{}, ports.Errorf(ports.CodeResourceExhausted, "warm-up daily send cap reached")
	}
	if e.failAfter == 0 {
		return ports.SendResult{}, fmt.Errorf("connection reset")
	}
	if e.capLeft > 0 {
		e.capLeft--
	}
	if e.failAfter > 0 {
		e.failAfter--
	}
	id := fmt.Sprintf("00000000-0000-7000-9000-%012d", len(e.byKey)+1)
	e.byKey[req.IdempotencyKey] = id
	e.requests = append(e.requests, req)
	return ports.SendResult{ID: id, Status: ports.StatusQueued}, nil
}

func (e *fakeEmails) SendBatch(context.Context, string, []ports.SendRequest) ([]ports.BatchItemResult, error) {
	return nil, nil
}
func (e *fakeEmails) GetEmail(context.Context, string, string) (ports.Message, error) {
	return ports.Message{}, nil
}
func (e *fakeEmails) CancelEmail(context.Context, string, string) (ports.Message, error) {
	return ports.Message{}, nil
}
func (e *fakeEmails) ListEmails(context.Context, string, ports.ListEmailsQuery) (ports.EmailPage, error) {
	return ports.EmailPage{}, nil
}

type fakeDomains struct{}

func (fakeDomains) DomainByName(_ context.Context, orgID, name string) (ports.Domain, error) {
	switch {
	case orgID == orgA && name == "acme.test":
		return ports.Domain{ID: "d1", Name: name, Status: ports.DomainVerified}, nil
	case orgID == orgA && name == "pending.test":
		return ports.Domain{ID: "d2", Name: name, Status: ports.DomainPending}, nil
	}
	return ports.Domain{}, ports.NotFound("domain not found")
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func contactID(i int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", i) }

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }
