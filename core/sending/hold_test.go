package sending

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/core/lookupcache"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

func TestHoldReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		paused bool
		status ports.DomainStatus
		want   ports.HoldReason
	}{
		{false, ports.DomainVerified, ""},
		{true, ports.DomainVerified, ports.HoldOrganizationPaused},
		{false, ports.DomainSuspended, ports.HoldDomainSuspended},
		{true, ports.DomainSuspended, ports.HoldOrganizationPaused},
		// Mail is only accepted from verified domains; a later failed check does not stop what was accepted.
		{false, ports.DomainFailed, ""},
	} {
		if got := holdReason(ports.Organization{Paused: c.paused}, ports.Domain{Status: c.status}); got != c.want {
			t.Errorf("paused %v, domain %s: %q, want %q", c.paused, c.status, got, c.want)
		}
	}
}

// holdWorld is a Service over in-memory stores of one message, its organization and its domain.
type holdWorld struct {
	svc  *Service
	feed *fakeFeed

	mu      sync.Mutex
	org     ports.Organization
	domain  ports.Domain
	msg     ports.Message
	held    []ports.HeldJob
	rounds  int // HeldGroups calls: release rounds
	orgRead int
	release []ports.HeldGroup // ReleaseHeld calls
}

const (
	holdOrg    = "0193d6d0-0000-7000-8000-00000000000a"
	holdDomain = "0193d6d0-0000-7000-8000-00000000000b"
)

func newHoldWorld(tb testing.TB, cfg Config) *holdWorld {
	tb.Helper()
	w := &holdWorld{
		feed:   &fakeFeed{},
		org:    ports.Organization{ID: holdOrg},
		domain: ports.Domain{ID: holdDomain, OrganizationID: holdOrg, Name: "acme.example", Status: ports.DomainVerified},
		msg: ports.Message{ID: "msg-1", OrganizationID: holdOrg, Status: ports.StatusDeliveryDelayed,
			Recipients: []ports.Recipient{{ID: "rcpt-1", Address: "a@x.example", Type: ports.RecipientTo, Status: ports.StatusDeliveryDelayed}}},
	}
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	w.svc, err = New(cfg, Deps{
		Messages: fakeMessages{}, Domains: holdDomains{w: w}, Organizations: holdOrgs{w: w}, Outbox: fakeOutbox{},
		Delivery: holdDelivery{w: w}, Queue: fakeQueue{}, Blobs: fakeBlobs{}, Scanner: fakeScanner{},
		Keyring: kr, Held: holdStore{w: w}, Changes: w.feed, Clock: fixedClock{orderNow},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func (w *holdWorld) set(f func(w *holdWorld)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func (w *holdWorld) heldJobs() []ports.HeldJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.held)
}

type holdDelivery struct {
	ports.DeliveryStore
	w *holdWorld
}

func (f holdDelivery) OutboundData(_ context.Context, orgID, messageID string) (ports.Message, ports.Domain, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if orgID != holdOrg || messageID != f.w.msg.ID {
		return ports.Message{}, ports.Domain{}, ports.NotFound("message not found")
	}
	return f.w.msg, f.w.domain, nil
}

type holdOrgs struct {
	ports.OrganizationStore
	w *holdWorld
}

func (f holdOrgs) Organization(_ context.Context, orgID string) (ports.Organization, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.orgRead++
	if orgID != f.w.org.ID {
		return ports.Organization{}, ports.NotFound("organization not found")
	}
	return f.w.org, nil
}

type holdDomains struct {
	ports.DomainStore
	w *holdWorld
}

func (f holdDomains) GetDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if orgID != holdOrg || id != f.w.domain.ID {
		return ports.Domain{}, ports.NotFound("domain not found")
	}
	return f.w.domain, nil
}

// holdStore keeps held jobs in memory; a release takes every job of the group.
type holdStore struct{ w *holdWorld }

func (f holdStore) HoldDelivery(_ context.Context, j ports.HeldJob) error {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.held = append(f.w.held, j)
	return nil
}

func (f holdStore) HeldGroups(_ context.Context, limit int) ([]ports.HeldGroup, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.rounds++
	var out []ports.HeldGroup
	for _, j := range f.w.held {
		g := ports.HeldGroup{OrganizationID: j.Job.OrganizationID, DomainID: j.DomainID}
		if i := slices.IndexFunc(out, func(o ports.HeldGroup) bool {
			return o.OrganizationID == g.OrganizationID && o.DomainID == g.DomainID
		}); i >= 0 {
			out[i].Jobs++
			continue
		}
		g.Jobs = 1
		out = append(out, g)
	}
	return out[:min(limit, len(out))], nil
}

func (f holdStore) ReleaseHeld(_ context.Context, orgID, domainID string, _ time.Time, _ int) (int, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.release = append(f.w.release, ports.HeldGroup{OrganizationID: orgID, DomainID: domainID})
	n := len(f.w.held)
	f.w.held = slices.DeleteFunc(f.w.held, func(j ports.HeldJob) bool {
		return j.Job.OrganizationID == orgID && j.DomainID == domainID
	})
	return n - len(f.w.held), nil
}

// fakeFeed is an in-process ports.ChangeFeed.
type fakeFeed struct {
	mu  sync.Mutex
	fns []func(ports.Change)
}

func (f *fakeFeed) Subscribe(fn func(ports.Change)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fns = append(f.fns, fn)
	return func() {}
}

func (f *fakeFeed) Publish(c ports.Change) {
	f.mu.Lock()
	fns := slices.Clone(f.fns)
	f.mu.Unlock()
	for _, fn := range fns {
		fn(c)
	}
}

func holdJob() ports.DeliveryJob {
	return ports.DeliveryJob{ID: "job-1", OrganizationID: holdOrg, MessageID: "msg-1", Domain: "x.example",
		RecipientIDs: []string{"rcpt-1"}, Attempt: 4, FirstQueuedAt: orderNow.Add(-time.Hour), NotBefore: orderNow}
}

// TestLoadOutbound_HoldsPausedAndSuspended: a job of a paused organization or a suspended From domain is
// put on hold with its reason and answered DeliveryHeld; a cancelled message is dropped rather than held;
// an active organization's job is not held.
func TestLoadOutbound_HoldsPausedAndSuspended(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		paused    bool
		status    ports.DomainStatus
		cancelled bool
		want      ports.HoldReason
	}{
		{name: "paused organization", paused: true, status: ports.DomainVerified, want: ports.HoldOrganizationPaused},
		{name: "suspended domain", status: ports.DomainSuspended, want: ports.HoldDomainSuspended},
		{name: "cancelled message is dropped, not held", paused: true, status: ports.DomainVerified, cancelled: true},
		{name: "active", status: ports.DomainVerified},
	} {
		w := newHoldWorld(t, Config{LookupCacheTTL: -1})
		w.set(func(w *holdWorld) {
			w.org.Paused, w.domain.Status = c.paused, c.status
			if c.cancelled {
				w.msg.Status, w.msg.Recipients[0].Status = ports.StatusCancelled, ports.StatusCancelled
			}
		})
		_, err := w.svc.LoadOutbound(ctx, holdJob())
		held := w.heldJobs()
		switch {
		case c.want != "":
			if !ports.IsDeliveryHeld(err) || len(held) != 1 {
				t.Fatalf("%s: err %v, %d held, want DeliveryHeld and the job held", c.name, err, len(held))
			}
			h := held[0]
			if h.Job.ID != "job-1" || h.Job.Attempt != 4 || h.DomainID != holdDomain || h.Reason != c.want || !h.HeldAt.Equal(orderNow) {
				t.Errorf("%s: held %+v", c.name, h)
			}
		case c.cancelled:
			if ports.ErrorCode(err) != ports.CodeNotFound || len(held) != 0 {
				t.Errorf("%s: err %v, %d held, want not_found and nothing held", c.name, err, len(held))
			}
		default:
			if ports.IsDeliveryHeld(err) || len(held) != 0 {
				t.Errorf("%s: err %v, %d held, want no hold", c.name, err, len(held))
			}
		}
	}
}

// TestChangedForgetsTheCachedOrganization: the send path keeps an active organization for LookupCacheTTL,
// but a change the feed reports makes the next lookup read the store again, so a pause holds the very next
// job and a new plan applies to the very next send. Changes of other organizations, and of domains, leave
// it cached.
func TestChangedForgetsTheCachedOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newHoldWorld(t, Config{LookupCacheTTL: time.Hour})
	clock := &fakeNow{t: orderNow}
	w.svc.orgCache = lookupcache.New[string, ports.Organization](time.Hour, 0, clock.now)
	w.svc.domainCache = lookupcache.New[domainKey, ports.Domain](time.Hour, 0, clock.now)
	reads := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.orgRead
	}
	lookups := func(n int) {
		t.Helper()
		for range n {
			if _, err := w.svc.organization(ctx, holdOrg); err != nil {
				t.Fatal(err)
			}
		}
	}
	lookups(3)
	if reads() != 1 {
		t.Fatalf("%d store reads for three lookups, want 1 (cached)", reads())
	}
	w.feed.Publish(ports.Change{Kind: ports.ChangeOrganization, OrganizationID: "another"})
	w.feed.Publish(ports.Change{Kind: ports.ChangeDomain, OrganizationID: holdOrg, DomainID: holdDomain})
	lookups(1)
	if reads() != 1 {
		t.Fatalf("an unrelated change made the organization be read again")
	}

	w.set(func(w *holdWorld) { w.org.Paused = true })
	w.feed.Publish(ports.Change{Kind: ports.ChangeOrganization, OrganizationID: holdOrg})
	if _, err := w.svc.LoadOutbound(ctx, holdJob()); !ports.IsDeliveryHeld(err) {
		t.Fatalf("the job after the pause: %v, want DeliveryHeld", err)
	}

	w.set(func(w *holdWorld) { w.org.Paused = false })
	clock.t = clock.t.Add(lookupcache.GuardFor) // past the guard against reads that raced the change
	lookups(2)
	before := reads()
	w.feed.Publish(ports.Change{Kind: ports.ChangeAll})
	lookups(1)
	if reads() != before+1 {
		t.Errorf("ChangeAll did not forget the organization")
	}
}

// TestRunHoldRelease: held jobs stay while their organization is paused or their domain suspended, and are
// released as soon as the feed reports the change that frees them — here long before the recheck interval.
func TestRunHoldRelease(t *testing.T) {
	t.Parallel()
	w := newHoldWorld(t, Config{LookupCacheTTL: -1, HoldRecheckInterval: time.Hour})
	w.set(func(w *holdWorld) { w.org.Paused, w.domain.Status = true, ports.DomainSuspended })
	if _, err := w.svc.LoadOutbound(context.Background(), holdJob()); !ports.IsDeliveryHeld(err) {
		t.Fatalf("LoadOutbound: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.svc.RunHoldRelease(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunHoldRelease: %v", err)
		}
	}()
	released := func() []ports.HeldGroup {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Clone(w.release)
	}
	rounds := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.rounds
	}
	wait := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Resumed, but the domain is still suspended: the round the change starts releases nothing.
	w.set(func(w *holdWorld) { w.org.Paused = false })
	w.feed.Publish(ports.Change{Kind: ports.ChangeOrganization, OrganizationID: holdOrg})
	wait("a round after the resume", func() bool { return rounds() >= 2 })
	if got := released(); len(got) != 0 {
		t.Fatalf("released %+v while the domain is suspended", got)
	}
	w.set(func(w *holdWorld) { w.domain.Status = ports.DomainVerified })
	w.feed.Publish(ports.Change{Kind: ports.ChangeDomain, OrganizationID: holdOrg, DomainID: holdDomain})
	wait("released", func() bool { return len(released()) >= 1 })
	if got := released()[0]; got.OrganizationID != holdOrg || got.DomainID != holdDomain {
		t.Errorf("released %+v", got)
	}
	if n := len(w.heldJobs()); n != 0 {
		t.Errorf("%d jobs still held", n)
	}
}

// fakeNow is a hand-moved clock for the lookup caches.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }
