package domain

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// memStore is an in-memory ports.DomainStore with the store's documented semantics (verifiedAt kept once
// set, events appended in the same call), so the service's orchestration can be tested without a database.
type memStore struct {
	mu      sync.Mutex
	domains map[string]ports.Domain
	events  []ports.Event
	gets    int
}

func newMemStore() *memStore { return &memStore{domains: map[string]ports.Domain{}} }

func (m *memStore) InsertDomain(_ context.Context, d ports.Domain, e ports.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.domains {
		if x.OrganizationID == d.OrganizationID && x.Name == d.Name {
			return ports.AlreadyExists("domains_org_name_key")
		}
	}
	d.Records = slices.Clone(d.Records)
	m.domains[d.ID] = d
	m.events = append(m.events, e)
	return nil
}

func (m *memStore) ListDomains(_ context.Context, orgID string) ([]ports.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ports.Domain
	for _, d := range m.domains {
		if d.OrganizationID == orgID {
			d.Records = nil
			out = append(out, d)
		}
	}
	return out, nil
}

func (m *memStore) get(orgID, id string) (ports.Domain, error) {
	d, ok := m.domains[id]
	if !ok || d.OrganizationID != orgID {
		return ports.Domain{}, ports.NotFound("domain not found")
	}
	d.Records = slices.Clone(d.Records)
	return d, nil
}

func (m *memStore) GetDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	return m.get(orgID, id)
}

func (m *memStore) DomainByName(_ context.Context, orgID, name string) (ports.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.domains {
		if d.OrganizationID == orgID && d.Name == name {
			d.Records = nil
			return d, nil
		}
	}
	return ports.Domain{}, ports.NotFound("domain not found")
}

func (m *memStore) SaveVerification(_ context.Context, d ports.Domain, events []ports.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, err := m.get(d.OrganizationID, d.ID)
	if err != nil {
		return err
	}
	old.Status = d.Status
	if old.VerifiedAt == nil {
		old.VerifiedAt = d.VerifiedAt
	}
	old.Records = slices.Clone(d.Records)
	m.domains[d.ID] = old
	m.events = append(m.events, events...)
	return nil
}

func (m *memStore) SetDomainStatus(_ context.Context, orgID, id string, status ports.DomainStatus) (ports.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.get(orgID, id)
	if err != nil {
		return ports.Domain{}, err
	}
	d.Status = status
	m.domains[id] = d
	d.Records = nil
	return d, nil
}

func (m *memStore) eventTypes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.events {
		out = append(out, e.Type)
	}
	return out
}

// zone is a ports.Resolver answering from maps; a name missing from a map is NXDOMAIN.
type zone struct {
	mu    sync.Mutex
	txt   map[string][]string
	cname map[string]string
	fail  error // returned for every lookup when set
	calls int
}

func newZone() *zone { return &zone{txt: map[string][]string{}, cname: map[string]string{}} }

func (z *zone) LookupTXT(_ context.Context, name string) ([]string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.calls++
	if z.fail != nil {
		return nil, z.fail
	}
	if v, ok := z.txt[name]; ok {
		return v, nil
	}
	return nil, &ports.DNSError{Kind: ports.DNSNotFound, Name: name}
}

func (z *zone) LookupCNAME(_ context.Context, name string) (string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.calls++
	if z.fail != nil {
		return "", z.fail
	}
	if v, ok := z.cname[name]; ok {
		return v, nil
	}
	return "", &ports.DNSError{Kind: ports.DNSNoData, Name: name}
}

func (z *zone) LookupMX(context.Context, string) ([]ports.MX, error) {
	return nil, errors.New("not used")
}

func (z *zone) LookupIP(context.Context, string) ([]netip.Addr, error) {
	return nil, errors.New("not used")
}

// publish puts records into the zone as their owner would.
func (z *zone) publish(records []ports.DNSRecord, types ...string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, r := range records {
		if len(types) > 0 && !slices.Contains(types, r.Type) {
			continue
		}
		switch r.Type {
		case ports.RecordReturnPath, ports.RecordTracking:
			z.cname[r.Host] = r.Value
		default:
			z.txt[r.Host] = []string{r.Value}
		}
	}
}

func (z *zone) reset() {
	z.mu.Lock()
	defer z.mu.Unlock()
	clear(z.txt)
	clear(z.cname)
}

// limiter allows a fixed number of calls, then refuses with RetryAfter.
type limiter struct {
	mu      sync.Mutex
	left    int
	keys    []string
	refusal time.Duration
}

func (l *limiter) Allow(_ context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	if limit != DefaultVerifyLimit || window != DefaultVerifyWindow {
		return ports.RateDecision{}, errors.New("unexpected rule")
	}
	if l.left <= 0 {
		return ports.RateDecision{Allowed: false, Limit: limit, RetryAfter: l.refusal}, nil
	}
	l.left--
	return ports.RateDecision{Allowed: true, Limit: limit}, nil
}

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

type testBundle struct {
	svc     *Service
	store   *memStore
	zone    *zone
	limiter *limiter
	clock   *clock
}

func setup(tb testing.TB) *testBundle {
	tb.Helper()
	b := &testBundle{
		store:   newMemStore(),
		zone:    newZone(),
		limiter: &limiter{left: 1000, refusal: 1500 * time.Millisecond},
		clock:   &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
	}
	svc, err := New(validConfig(), Deps{
		Domains:     b.store,
		Resolver:    b.zone,
		RateLimiter: b.limiter,
		Keyring:     mustKeyring(tb),
		Clock:       b.clock,
	})
	if err != nil {
		tb.Fatal(err)
	}
	b.svc = svc
	return b
}

const org = "org-1"

func TestCreateDomain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	d, err := b.svc.CreateDomain(ctx, org, "  Example.ORG ")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "example.org" || d.Status != ports.DomainPending || d.Region != DefaultRegion || d.VerifiedAt != nil {
		t.Fatalf("created: %+v", d)
	}
	if d.DKIMPrivateKey != nil {
		t.Fatal("CreateDomain returned the private key")
	}
	if len(d.Records) != 5 || d.Records[1].Host != d.DKIMSelector+"._domainkey.example.org" ||
		d.Records[1].Value != "v=DKIM1; k=rsa; p="+d.DKIMPublicKey {
		t.Fatalf("records: %+v", d.Records)
	}
	for _, r := range d.Records {
		if r.DomainID != d.ID || r.ID == "" {
			t.Fatalf("record not tied to the domain: %+v", r)
		}
	}

	stored := b.store.domains[d.ID]
	key, err := OpenDKIMKey(b.svc.keyring, stored)
	if err != nil {
		t.Fatalf("stored key does not open under the domain id: %v", err)
	}
	if key.N.BitLen() != 1024 {
		t.Fatalf("key size %d", key.N.BitLen())
	}
	if ev := b.store.events; len(ev) != 1 || ev[0].Type != ports.EventDomainCreated || ev[0].DomainID != d.ID ||
		ev[0].OrganizationID != org || !ev[0].OccurredAt.Equal(b.clock.t) {
		t.Fatalf("events: %+v", ev)
	}

	// Every read path hides the key too.
	got, err := b.svc.GetDomain(ctx, org, d.ID)
	if err != nil || got.DKIMPrivateKey != nil || len(got.Records) != 5 {
		t.Fatalf("GetDomain: %+v %v", got, err)
	}
	list, err := b.svc.ListDomains(ctx, org)
	if err != nil || len(list) != 1 || list[0].DKIMPrivateKey != nil {
		t.Fatalf("ListDomains: %+v %v", list, err)
	}

	// A second domain gets its own selector and key.
	d2, err := b.svc.CreateDomain(ctx, org, "example.net")
	if err != nil {
		t.Fatal(err)
	}
	if d2.DKIMSelector == d.DKIMSelector || d2.DKIMPublicKey == d.DKIMPublicKey {
		t.Fatal("two domains share a selector or a key")
	}

	if _, err := b.svc.CreateDomain(ctx, org, "EXAMPLE.org"); ports.ErrorCode(err) != ports.CodeAlreadyExists {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := b.svc.CreateDomain(ctx, org, "nodot"); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("bad name: %v", err)
	}
	if len(b.store.domains) != 2 {
		t.Fatalf("store holds %d domains", len(b.store.domains))
	}
}

func TestVerifyDomainStateMachine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.svc.CreateDomain(ctx, org, "example.org")
	if err != nil {
		t.Fatal(err)
	}

	verify := func(step string, want ports.DomainStatus, wantEvents ...string) ports.Domain {
		t.Helper()
		b.clock.t = b.clock.t.Add(time.Minute)
		before := len(b.store.eventTypes())
		got, err := b.svc.VerifyDomain(ctx, org, d.ID)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got.Status != want {
			t.Fatalf("%s: status %s, want %s", step, got.Status, want)
		}
		if got.DKIMPrivateKey != nil {
			t.Fatalf("%s: private key returned", step)
		}
		if evs := b.store.eventTypes()[before:]; !slices.Equal(evs, wantEvents) {
			t.Fatalf("%s: events %v, want %v", step, evs, wantEvents)
		}
		for _, r := range got.Records {
			if r.CheckedAt == nil || !r.CheckedAt.Equal(b.clock.t) {
				t.Fatalf("%s: record %s checkedAt %v", step, r.Type, r.CheckedAt)
			}
		}
		if stored := b.store.domains[d.ID]; stored.Status != want {
			t.Fatalf("%s: stored status %s", step, stored.Status)
		}
		return got
	}
	verifiedFlags := func(d ports.Domain) map[string]bool {
		m := map[string]bool{}
		for _, r := range d.Records {
			m[r.Type] = r.Verified
		}
		return m
	}

	got := verify("nothing published", ports.DomainPending)
	for typ, ok := range verifiedFlags(got) {
		if ok {
			t.Fatalf("%s verified with nothing published", typ)
		}
	}

	b.zone.publish(d.Records, ports.RecordDKIM)
	got = verify("DKIM only", ports.DomainFailed, ports.EventDomainFailed)
	if f := verifiedFlags(got); !f[ports.RecordDKIM] || f[ports.RecordSPF] {
		t.Fatalf("flags: %v", f)
	}
	verify("still DKIM only", ports.DomainFailed, ports.EventDomainFailed)

	// Required records only (the recommended ones stay unpublished), SPF merged into an existing policy and
	// the CNAME answered in another case with a trailing dot.
	b.zone.publish(d.Records, ports.RecordDKIM)
	b.zone.txt["example.org"] = []string{"v=spf1 mx include:spf.postmill.test -all", "other=1"}
	b.zone.cname["bounce.example.org"] = "BOUNCES.Postmill.Test."
	got = verify("required published", ports.DomainVerified, ports.EventDomainVerified)
	if got.VerifiedAt == nil || !got.VerifiedAt.Equal(b.clock.t) {
		t.Fatalf("verifiedAt %v", got.VerifiedAt)
	}
	firstVerified := *got.VerifiedAt
	if f := verifiedFlags(got); f[ports.RecordDMARC] || f[ports.RecordTracking] || !f[ports.RecordReturnPath] {
		t.Fatalf("flags: %v", f)
	}

	b.zone.publish(d.Records)
	got = verify("re-verify", ports.DomainVerified)
	if !got.VerifiedAt.Equal(firstVerified) {
		t.Fatalf("verifiedAt moved to %v", got.VerifiedAt)
	}
	if f := verifiedFlags(got); !f[ports.RecordDMARC] || !f[ports.RecordTracking] {
		t.Fatalf("flags: %v", f)
	}

	b.zone.reset()
	got = verify("verified, records gone", ports.DomainVerified)
	if f := verifiedFlags(got); f[ports.RecordSPF] || f[ports.RecordDKIM] {
		t.Fatalf("failing run not recorded: %v", f)
	}

	if s, err := b.svc.SuspendDomain(ctx, org, d.ID); err != nil || s.Status != ports.DomainSuspended || s.DKIMPrivateKey != nil {
		t.Fatalf("suspend: %+v %v", s, err)
	}
	b.zone.publish(d.Records, ports.RecordSPF, ports.RecordDKIM)
	verify("suspended, partial", ports.DomainSuspended)
	b.zone.publish(d.Records)
	got = verify("suspended, all required", ports.DomainVerified)
	if !got.VerifiedAt.Equal(firstVerified) {
		t.Fatalf("verifiedAt moved to %v", got.VerifiedAt)
	}

	if _, err := b.svc.SuspendDomain(ctx, org, "missing"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("suspend missing: %v", err)
	}
}

func TestVerifyDomainRateLimitedFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.svc.CreateDomain(ctx, org, "example.org")
	if err != nil {
		t.Fatal(err)
	}
	b.limiter.left = 1
	if _, err := b.svc.VerifyDomain(ctx, org, d.ID); err != nil {
		t.Fatal(err)
	}
	gets, calls := b.store.gets, b.zone.calls

	_, err = b.svc.VerifyDomain(ctx, org, d.ID)
	e, ok := ports.AsError(err)
	if !ok || e.Code != ports.CodeResourceExhausted || e.RetryAfterSeconds != 2 || e.Message != ports.MessageRateLimitExceeded {
		t.Fatalf("refused verify: %v", err)
	}
	if b.store.gets != gets || b.zone.calls != calls {
		t.Fatal("a refused verify read the domain or queried DNS")
	}
	if !slices.Equal(b.limiter.keys, []string{"verify:org-1", "verify:org-1"}) {
		t.Fatalf("rate-limit keys %v", b.limiter.keys)
	}
	// The limit is counted before the lookup: a missing domain costs a call too.
	b.limiter.left = 1
	if _, err := b.svc.VerifyDomain(ctx, org, "missing"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("missing domain: %v", err)
	}
	if _, err := b.svc.VerifyDomain(ctx, "org-2", d.ID); ports.ErrorCode(err) != ports.CodeResourceExhausted {
		t.Fatalf("after a missing domain: %v", err)
	}
}

func TestVerifyDomainResolverErrorsAreNotPublished(t *testing.T) {
	t.Parallel()
	for _, fail := range []error{
		&ports.DNSError{Kind: ports.DNSTemporary, Name: "x", Err: errors.New("SERVFAIL")},
		errors.New("connection refused"),
	} {
		b := setup(t)
		ctx := context.Background()
		d, err := b.svc.CreateDomain(ctx, org, "example.org")
		if err != nil {
			t.Fatal(err)
		}
		b.zone.publish(d.Records)
		b.zone.fail = fail
		got, err := b.svc.VerifyDomain(ctx, org, d.ID)
		if err != nil {
			t.Fatalf("%v: verify failed instead of reporting: %v", fail, err)
		}
		if got.Status != ports.DomainPending {
			t.Fatalf("%v: status %s", fail, got.Status)
		}
		for _, r := range got.Records {
			if r.Verified || r.CheckedAt == nil {
				t.Fatalf("%v: record %+v", fail, r)
			}
		}
	}
}

func TestVerifyDomainCancelledIsNotSaved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d, err := b.svc.CreateDomain(context.Background(), org, "example.org")
	if err != nil {
		t.Fatal(err)
	}
	b.zone.publish(d.Records, ports.RecordDKIM)
	if _, err := b.svc.VerifyDomain(context.Background(), org, d.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.svc.VerifyDomain(ctx, org, d.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled verify: %v", err)
	}
	if stored := b.store.domains[d.ID]; stored.Status != ports.DomainFailed || !stored.Records[1].Verified {
		t.Fatalf("cancelled run was saved: %+v", stored)
	}
}

// barrierResolver answers only once every expected lookup is in flight, proving they run concurrently.
type barrierResolver struct {
	*zone
	wg *sync.WaitGroup
}

func (r *barrierResolver) wait(ctx context.Context) error {
	r.wg.Done()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("lookups are not concurrent")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *barrierResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if err := r.wait(ctx); err != nil {
		return nil, err
	}
	return r.zone.LookupTXT(ctx, name)
}

func (r *barrierResolver) LookupCNAME(ctx context.Context, name string) (string, error) {
	if err := r.wait(ctx); err != nil {
		return "", err
	}
	return r.zone.LookupCNAME(ctx, name)
}

func TestVerifyDomainLooksUpConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := b.svc.CreateDomain(ctx, org, "example.org")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(len(d.Records))
	r := &barrierResolver{zone: newZone(), wg: &wg}
	r.publish(d.Records)
	b.svc.resolver = r
	got, err := b.svc.VerifyDomain(ctx, org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ports.DomainVerified {
		t.Fatalf("status %s: %+v", got.Status, got.Records)
	}
}

func TestNewRequiresDeps(t *testing.T) {
	t.Parallel()
	if _, err := New(validConfig(), Deps{}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("New without deps: %v", err)
	}
	if _, err := New(Config{}, Deps{}); err == nil || !strings.Contains(err.Error(), "SPF include") {
		t.Fatalf("New with empty config: %v", err)
	}
}
