// Package integration runs the core's use cases against the engines they are deployed with: PostgreSQL
// through the postgres adapter, and DNS through the resolver adapter asking a name server on loopback.
package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/core/domain"
	"github.com/postmill/postmill/core/ratelimit"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// baseTime has microsecond precision, like timestamptz, so times read back from the store compare equal. It
// lies 1799.5 s before the end of its hour, so the one-hour verify window ends at a known, fractional distance.
var baseTime = time.Date(2026, 3, 1, 12, 30, 0, 500000000, time.UTC)

// silentTimeout is the resolver timeout used against a silent name server: long enough that all five lookups
// of a verify run are sent well inside it, short enough to keep the tests quick.
const silentTimeout = time.Second

// waitLimit bounds every wait on a goroutine or a socket, so a hang fails the test instead of stalling it.
const waitLimit = 15 * time.Second

// testClock is a ports.Clock the test moves by hand, so stored timestamps and rate-limit windows are known.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

// Now implements ports.Clock.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock forward by d and returns the new time.
func (c *testClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// testConfig is a valid domain configuration with 1024-bit keys, the smallest RFC 8301 allows, for speed.
func testConfig() domain.Config {
	return domain.Config{
		SPFInclude:     "spf.postmill.test",
		ReturnPathHost: "bounces.postmill.test",
		TrackingHost:   "track.postmill.test",
		DMARCRua:       "dmarc@reports.postmill.test",
		KeyBits:        1024,
	}
}

// testBundle is a domain.Service wired to a migrated PostgreSQL schema, the store-backed rate limiter and a
// real resolver asking an in-test authoritative name server.
type testBundle struct {
	cfg     domain.Config
	svc     *domain.Service
	store   *postgres.Store
	dns     *dnstest.Server
	limiter *ratelimit.Limiter
	keyring *secret.Keyring
	clock   *testClock
}

// MustSetup builds a testBundle whose Service uses cfg.
func MustSetup(tb testing.TB, cfg domain.Config) *testBundle {
	tb.Helper()
	store := pgtest.Store(tb)
	server := dnstest.New(tb)
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	b := &testBundle{cfg: cfg, store: store, dns: server, keyring: kr, clock: &testClock{t: baseTime}}
	b.limiter = ratelimit.New(store, b.clock)
	b.svc = b.MustService(tb, dns.New(server.Addr(), dns.Options{}))
	return b
}

// MustService builds another Service over the bundle's store, limiter, keyring and clock that resolves with
// r, as a second replica of the process asking another name server would: both share every count and row.
func (b *testBundle) MustService(tb testing.TB, r ports.Resolver) *domain.Service {
	tb.Helper()
	svc, err := domain.New(b.cfg, domain.Deps{
		Domains:     b.store,
		Resolver:    r,
		RateLimiter: b.limiter,
		Keyring:     b.keyring,
		Clock:       b.clock,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// MustOrganization signs up a user with a new organization, which domains belong to, and returns its id.
func MustOrganization(tb testing.TB, store *postgres.Store) string {
	tb.Helper()
	tag := randomHex(tb, 6)
	u := ports.User{
		ID:           MustUUID(tb),
		Email:        "owner-" + tag + "@example.test",
		PasswordHash: "$argon2id$v=19$m=65536,t=1,p=2$c2FsdA$aGFzaA",
		CreatedAt:    baseTime,
	}
	org := ports.Organization{ID: MustUUID(tb), Name: "Org " + tag, Slug: "org-" + tag, CreatedAt: baseTime}
	m := ports.Membership{UserID: u.ID, OrganizationID: org.ID, Role: "owner", CreatedAt: baseTime}
	if err := store.CreateSignup(context.Background(), u, org, m); err != nil {
		tb.Fatalf("CreateSignup: %v", err)
	}
	return org.ID
}

// MustUUID returns a random (version 4) UUID, the form the store's id columns take.
func MustUUID(tb testing.TB) string {
	tb.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("random: %v", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// randomHex returns n random bytes in hex, to keep emails and slugs unique.
func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

// MustCreateDomain registers name for the organization and fails the test when that does not work.
func MustCreateDomain(tb testing.TB, svc *domain.Service, orgID, name string) ports.Domain {
	tb.Helper()
	d, err := svc.CreateDomain(context.Background(), orgID, name)
	if err != nil {
		tb.Fatalf("CreateDomain(%s): %v", name, err)
	}
	return d
}

// MustStored reads the domain straight from the store, sealed key and records included.
func MustStored(tb testing.TB, store *postgres.Store, orgID, id string) ports.Domain {
	tb.Helper()
	d, err := store.GetDomain(context.Background(), orgID, id)
	if err != nil {
		tb.Fatalf("store.GetDomain: %v", err)
	}
	return d
}

// MustEvents reads the organization's events from the outbox, oldest first.
func MustEvents(tb testing.TB, store *postgres.Store, orgID string) []ports.Event {
	tb.Helper()
	rows, err := store.Pool().Query(context.Background(),
		`SELECT id::text, organization_id::text, type, coalesce(domain_id::text, ''), occurred_at
		   FROM events WHERE organization_id = $1 ORDER BY occurred_at, id`, orgID)
	if err != nil {
		tb.Fatalf("read events: %v", err)
	}
	defer rows.Close()
	var out []ports.Event
	for rows.Next() {
		var e ports.Event
		if err := rows.Scan(&e.ID, &e.OrganizationID, &e.Type, &e.DomainID, &e.OccurredAt); err != nil {
			tb.Fatalf("scan event: %v", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read events: %v", err)
	}
	return out
}

// eventTypes lists the types of events in order.
func eventTypes(events []ports.Event) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// publish puts records into the zone as their owner would; with types, only records of those types.
func publish(server *dnstest.Server, records []ports.DNSRecord, types ...string) {
	for _, r := range records {
		if len(types) > 0 && !slices.Contains(types, r.Type) {
			continue
		}
		switch r.Type {
		case ports.RecordReturnPath, ports.RecordTracking:
			server.SetCNAME(r.Host, r.Value)
		default:
			server.SetTXT(r.Host, r.Value)
		}
	}
}

// unpublish removes everything at every record's host.
func unpublish(server *dnstest.Server, records []ports.DNSRecord) {
	for _, r := range records {
		server.Remove(r.Host)
	}
}

// verifiedFlags maps each record type to whether its last check found it published.
func verifiedFlags(d ports.Domain) map[string]bool {
	m := map[string]bool{}
	for _, r := range d.Records {
		m[r.Type] = r.Verified
	}
	return m
}

// requireNotPublished fails unless every record was checked at the given time and found not published.
func requireNotPublished(tb testing.TB, d ports.Domain, checkedAt time.Time) {
	tb.Helper()
	if len(d.Records) != 5 {
		tb.Fatalf("%d records", len(d.Records))
	}
	for _, r := range d.Records {
		if r.Verified || r.CheckedAt == nil || !r.CheckedAt.Equal(checkedAt) {
			tb.Fatalf("record %s: verified=%v checkedAt=%v, want not published, checked at %v",
				r.Type, r.Verified, r.CheckedAt, checkedAt)
		}
	}
}

// silentServer is a name server that has gone quiet: a UDP socket on loopback that takes every query and
// answers none, so each lookup runs into the resolver's timeout. It counts the queries and when they came.
type silentServer struct {
	addr     string
	queries  atomic.Int64
	arrivals chan time.Time
}

// MustSilentServer starts a silentServer, closed when tb ends.
func MustSilentServer(tb testing.TB) *silentServer {
	tb.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen udp: %v", err)
	}
	s := &silentServer{addr: pc.LocalAddr().String(), arrivals: make(chan time.Time, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			s.queries.Add(1)
			select {
			case s.arrivals <- time.Now():
			default:
			}
		}
	}()
	tb.Cleanup(func() {
		_ = pc.Close()
		<-done
	})
	return s
}

// MustNextQuery waits for the next query to arrive and returns when it did.
func (s *silentServer) MustNextQuery(tb testing.TB) time.Time {
	tb.Helper()
	select {
	case at := <-s.arrivals:
		return at
	case <-time.After(waitLimit):
		tb.Fatal("no DNS query arrived")
		return time.Time{}
	}
}

// MustClosedAddr returns a loopback UDP address nothing listens on, so a query sent there is refused at once
// (ICMP port unreachable).
func MustClosedAddr(tb testing.TB) string {
	tb.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen udp: %v", err)
	}
	addr := pc.LocalAddr().String()
	if err := pc.Close(); err != nil {
		tb.Fatal(err)
	}
	return addr
}

// verifyResult is what a VerifyDomain call run in a goroutine returned.
type verifyResult struct {
	d   ports.Domain
	err error
}

// verifyAsync runs VerifyDomain in a goroutine; the result arrives on the returned channel.
func verifyAsync(ctx context.Context, svc *domain.Service, orgID, id string) <-chan verifyResult {
	out := make(chan verifyResult, 1)
	go func() {
		d, err := svc.VerifyDomain(ctx, orgID, id)
		out <- verifyResult{d, err}
	}()
	return out
}

// MustResult waits for a verifyAsync result.
func MustResult(tb testing.TB, c <-chan verifyResult) verifyResult {
	tb.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(waitLimit):
		tb.Fatal("VerifyDomain did not return")
		return verifyResult{}
	}
}

// TestDomainServiceCreate checks that a new domain is stored pending with its five records, a sealed key that
// opens only under its id, and one domain.created event, and that no answer carries the private key.
func TestDomainServiceCreate(t *testing.T) {
	t.Parallel()
	b := MustSetup(t, testConfig())
	ctx := context.Background()
	org := MustOrganization(t, b.store)

	d, err := b.svc.CreateDomain(ctx, org, "  Example.ORG ")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "example.org" || d.OrganizationID != org || d.Status != ports.DomainPending ||
		d.Region != domain.DefaultRegion || d.VerifiedAt != nil || !d.CreatedAt.Equal(baseTime) {
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

	// The row holds the key sealed under the domain id, and it is the private half of the published p= key.
	stored := MustStored(t, b.store, org, d.ID)
	if stored.Name != d.Name || stored.Status != ports.DomainPending || stored.DKIMSelector != d.DKIMSelector ||
		stored.DKIMPublicKey != d.DKIMPublicKey {
		t.Fatalf("stored: %+v", stored)
	}
	if len(stored.Records) != len(d.Records) {
		t.Fatalf("stored %d records", len(stored.Records))
	}
	for i, r := range stored.Records {
		w := d.Records[i]
		if r.ID != w.ID || r.Type != w.Type || r.Host != w.Host || r.Value != w.Value || r.Required != w.Required ||
			r.TTL != domain.RecordTTL || r.Verified || r.CheckedAt != nil {
			t.Fatalf("stored record %d: %+v, want %+v", i, r, w)
		}
	}
	key, err := openRSAKey(b.keyring, stored)
	if err != nil {
		t.Fatalf("stored key does not open under the domain id: %v", err)
	}
	if key.N.BitLen() != 1024 {
		t.Fatalf("key size %d", key.N.BitLen())
	}
	raw, err := base64.StdEncoding.DecodeString(d.DKIMPublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	if rsaPub, ok := pub.(*rsa.PublicKey); !ok || !key.PublicKey.Equal(rsaPub) {
		t.Fatal("the published public key is not the stored private key's")
	}

	if ev := MustEvents(t, b.store, org); len(ev) != 1 || ev[0].Type != ports.EventDomainCreated ||
		ev[0].DomainID != d.ID || ev[0].OrganizationID != org || !ev[0].OccurredAt.Equal(baseTime) {
		t.Fatalf("events: %+v", ev)
	}

	// Every read path hides the key too.
	got, err := b.svc.GetDomain(ctx, org, d.ID)
	if err != nil || got.DKIMPrivateKey != nil || got.ID != d.ID || len(got.Records) != 5 {
		t.Fatalf("GetDomain: %+v %v", got, err)
	}
	list, err := b.svc.ListDomains(ctx, org)
	if err != nil || len(list) != 1 || list[0].ID != d.ID || list[0].DKIMPrivateKey != nil {
		t.Fatalf("ListDomains: %+v %v", list, err)
	}

	// A second domain gets its own selector and key.
	b.clock.Add(time.Second)
	d2 := MustCreateDomain(t, b.svc, org, "example.net")
	if d2.DKIMSelector == d.DKIMSelector || d2.DKIMPublicKey == d.DKIMPublicKey {
		t.Fatal("two domains share a selector or a key")
	}

	if _, err := b.svc.CreateDomain(ctx, org, "EXAMPLE.org"); ports.ErrorCode(err) != ports.CodeAlreadyExists {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := b.svc.CreateDomain(ctx, org, "nodot"); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("bad name: %v", err)
	}
	list, err = b.svc.ListDomains(ctx, org)
	if err != nil || len(list) != 2 {
		t.Fatalf("the store holds %d domains: %v", len(list), err)
	}
	if evs := eventTypes(MustEvents(t, b.store, org)); !slices.Equal(evs, []string{ports.EventDomainCreated, ports.EventDomainCreated}) {
		t.Fatalf("refused creations wrote events: %v", evs)
	}
}

// TestDomainServiceVerifyStateMachine walks a domain through SPEC §3's states over live DNS, checking the
// status, records, verifiedAt and events both returned and stored after every run.
func TestDomainServiceVerifyStateMachine(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.VerifyLimit = 1000 // this test walks the states, not the limit
	b := MustSetup(t, cfg)
	ctx := context.Background()
	org := MustOrganization(t, b.store)
	d := MustCreateDomain(t, b.svc, org, "example.org")

	verify := func(step string, want ports.DomainStatus, wantEvents ...string) ports.Domain {
		t.Helper()
		now := b.clock.Add(time.Minute)
		before := len(MustEvents(t, b.store, org))
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
		evs := MustEvents(t, b.store, org)[before:]
		if types := eventTypes(evs); !slices.Equal(types, wantEvents) {
			t.Fatalf("%s: events %v, want %v", step, types, wantEvents)
		}
		for _, e := range evs {
			if e.DomainID != d.ID || e.OrganizationID != org || !e.OccurredAt.Equal(now) {
				t.Fatalf("%s: event %+v", step, e)
			}
		}
		for _, r := range got.Records {
			if r.CheckedAt == nil || !r.CheckedAt.Equal(now) {
				t.Fatalf("%s: record %s checkedAt %v", step, r.Type, r.CheckedAt)
			}
		}
		stored := MustStored(t, b.store, org, d.ID)
		if stored.Status != want {
			t.Fatalf("%s: stored status %s", step, stored.Status)
		}
		if (stored.VerifiedAt == nil) != (got.VerifiedAt == nil) ||
			(stored.VerifiedAt != nil && !stored.VerifiedAt.Equal(*got.VerifiedAt)) {
			t.Fatalf("%s: stored verifiedAt %v, returned %v", step, stored.VerifiedAt, got.VerifiedAt)
		}
		for i, r := range stored.Records {
			if r.ID != got.Records[i].ID || r.Verified != got.Records[i].Verified || r.CheckedAt == nil || !r.CheckedAt.Equal(now) {
				t.Fatalf("%s: stored record %s verified=%v checkedAt=%v, returned %+v",
					step, r.Type, r.Verified, r.CheckedAt, got.Records[i])
			}
		}
		return got
	}

	// Nothing published: every name is NXDOMAIN.
	got := verify("nothing published", ports.DomainPending)
	for typ, ok := range verifiedFlags(got) {
		if ok {
			t.Fatalf("%s verified with nothing published", typ)
		}
	}

	publish(b.dns, d.Records, ports.RecordDKIM)
	got = verify("DKIM only", ports.DomainFailed, ports.EventDomainFailed)
	if f := verifiedFlags(got); !f[ports.RecordDKIM] || f[ports.RecordSPF] {
		t.Fatalf("flags: %v", f)
	}
	verify("still DKIM only", ports.DomainFailed, ports.EventDomainFailed)

	// Required records only (the recommended ones stay unpublished), SPF merged into an existing policy next
	// to another TXT record, and the CNAME answered in another case with a trailing dot.
	b.dns.SetTXT("example.org", "v=spf1 mx include:spf.postmill.test -all", "other=1")
	b.dns.SetCNAME("bounce.example.org", "BOUNCES.Postmill.Test.")
	got = verify("required published", ports.DomainVerified, ports.EventDomainVerified)
	if got.VerifiedAt == nil || !got.VerifiedAt.Equal(b.clock.Now()) {
		t.Fatalf("verifiedAt %v", got.VerifiedAt)
	}
	firstVerified := *got.VerifiedAt
	if f := verifiedFlags(got); f[ports.RecordDMARC] || f[ports.RecordTracking] || !f[ports.RecordReturnPath] || !f[ports.RecordSPF] {
		t.Fatalf("flags: %v", f)
	}

	publish(b.dns, d.Records)
	got = verify("re-verify", ports.DomainVerified)
	if !got.VerifiedAt.Equal(firstVerified) {
		t.Fatalf("verifiedAt moved to %v", got.VerifiedAt)
	}
	if f := verifiedFlags(got); !f[ports.RecordDMARC] || !f[ports.RecordTracking] {
		t.Fatalf("flags: %v", f)
	}

	unpublish(b.dns, d.Records)
	got = verify("verified, records gone", ports.DomainVerified)
	if f := verifiedFlags(got); f[ports.RecordSPF] || f[ports.RecordDKIM] {
		t.Fatalf("failing run not recorded: %v", f)
	}

	before := len(MustEvents(t, b.store, org))
	s, err := b.svc.SuspendDomain(ctx, org, d.ID)
	if err != nil || s.Status != ports.DomainSuspended || s.DKIMPrivateKey != nil {
		t.Fatalf("suspend: status %s, private key returned %v: %v", s.Status, s.DKIMPrivateKey != nil, err)
	}
	if stored := MustStored(t, b.store, org, d.ID); stored.Status != ports.DomainSuspended {
		t.Fatalf("stored status after suspend: %s", stored.Status)
	}
	if after := len(MustEvents(t, b.store, org)); after != before {
		t.Fatalf("suspend wrote %d events", after-before)
	}
	publish(b.dns, d.Records, ports.RecordSPF, ports.RecordDKIM)
	verify("suspended, partial", ports.DomainSuspended)
	publish(b.dns, d.Records)
	got = verify("suspended, all required", ports.DomainVerified)
	if !got.VerifiedAt.Equal(firstVerified) {
		t.Fatalf("verifiedAt moved to %v", got.VerifiedAt)
	}

	for _, id := range []string{"missing", MustUUID(t)} {
		if _, err := b.svc.SuspendDomain(ctx, org, id); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Fatalf("suspend %s: %v", id, err)
		}
	}
}

// TestDomainServiceVerifyRateLimitedFirst checks the verify limit of 10 calls per organization per hour: it is
// counted before the domain is read, and a refused call queries no DNS and saves nothing.
func TestDomainServiceVerifyRateLimitedFirst(t *testing.T) {
	t.Parallel()
	b := MustSetup(t, testConfig()) // the default limit: 10 verify calls per organization per hour
	ctx := context.Background()
	orgA, orgB := MustOrganization(t, b.store), MustOrganization(t, b.store)
	d := MustCreateDomain(t, b.svc, orgA, "example.org")
	publish(b.dns, d.Records)

	for i := range domain.DefaultVerifyLimit {
		if got, err := b.svc.VerifyDomain(ctx, orgA, d.ID); err != nil || got.Status != ports.DomainVerified {
			t.Fatalf("verify %d of %d: %s %v", i+1, domain.DefaultVerifyLimit, got.Status, err)
		}
	}
	checked := b.clock.Now()
	b.clock.Add(time.Second) // 1798.5 s before the hour's window ends

	// A replica sharing the store shares the count. Its name server is silent and counts what it receives: a
	// refused call must not query, or it would wait out the resolver's timeout too.
	silent := MustSilentServer(t)
	replica := b.MustService(t, dns.New(silent.addr, dns.Options{Timeout: silentTimeout}))
	_, err := replica.VerifyDomain(ctx, orgA, d.ID)
	e, ok := ports.AsError(err)
	if !ok || e.Code != ports.CodeResourceExhausted || e.RetryAfterSeconds != 1799 || e.Message != ports.MessageRateLimitExceeded {
		t.Fatalf("refused verify: %v (%+v)", err, e)
	}
	if n := silent.queries.Load(); n != 0 {
		t.Fatalf("a refused verify sent %d DNS queries", n)
	}
	stored := MustStored(t, b.store, orgA, d.ID)
	for _, r := range stored.Records {
		if r.CheckedAt == nil || !r.CheckedAt.Equal(checked) {
			t.Fatalf("a refused verify saved a check: %s checkedAt %v, want %v", r.Type, r.CheckedAt, checked)
		}
	}
	// The limit is counted before the domain is read: once refused, a missing domain is refused too rather
	// than reported not_found.
	if _, err := b.svc.VerifyDomain(ctx, orgA, MustUUID(t)); ports.ErrorCode(err) != ports.CodeResourceExhausted {
		t.Fatalf("missing domain after the limit: %v", err)
	}
	// Ten allowed and two refused calls, counted in the organization's window of the hour.
	var count int
	if err := b.store.Pool().QueryRow(ctx,
		`SELECT count FROM rate_limit_windows WHERE key = $1 AND window_start = $2`,
		domain.VerifyRateKeyPrefix+orgA, baseTime.Truncate(time.Hour)).Scan(&count); err != nil {
		t.Fatalf("read the verify window: %v", err)
	}
	if count != domain.DefaultVerifyLimit+2 {
		t.Fatalf("verify window counts %d calls", count)
	}

	// Another organization has its own count, and a domain that is missing or not its own costs a call too.
	dB := MustCreateDomain(t, b.svc, orgB, "example.net")
	for i := range domain.DefaultVerifyLimit - 1 {
		if _, err := b.svc.VerifyDomain(ctx, orgB, MustUUID(t)); ports.ErrorCode(err) != ports.CodeNotFound {
			t.Fatalf("missing domain %d: %v", i+1, err)
		}
	}
	if _, err := b.svc.VerifyDomain(ctx, orgB, d.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("another organization's domain: %v", err)
	}
	if _, err := b.svc.VerifyDomain(ctx, orgB, dB.ID); ports.ErrorCode(err) != ports.CodeResourceExhausted {
		t.Fatalf("after ten calls on missing domains: %v", err)
	}
}

// TestDomainServiceVerifyLookupFailuresAreNotPublished checks that failed lookups of every kind are saved as
// "not published" rather than failing the call.
func TestDomainServiceVerifyLookupFailuresAreNotPublished(t *testing.T) {
	t.Parallel()
	b := MustSetup(t, testConfig())
	tests := []struct {
		name string
		// zone sets the name server up and returns the address the resolver asks.
		zone func(tb testing.TB, records []ports.DNSRecord) string
	}{
		{"NXDOMAIN", func(tb testing.TB, _ []ports.DNSRecord) string {
			return dnstest.New(tb).Addr()
		}},
		{"NODATA", func(tb testing.TB, records []ports.DNSRecord) string {
			// Every name exists, with address records only.
			server := dnstest.New(tb)
			for _, r := range records {
				server.SetA(r.Host, netip.MustParseAddr("192.0.2.1"))
			}
			return server.Addr()
		}},
		{"SERVFAIL", func(tb testing.TB, records []ports.DNSRecord) string {
			// Published, but every authoritative answer fails.
			server := dnstest.New(tb)
			publish(server, records)
			for _, r := range records {
				server.SetServFail(r.Host)
			}
			return server.Addr()
		}},
		{"connection refused", func(tb testing.TB, _ []ports.DNSRecord) string {
			return MustClosedAddr(tb)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			org := MustOrganization(t, b.store)
			d := MustCreateDomain(t, b.svc, org, "example.org")
			svc := b.MustService(t, dns.New(tt.zone(t, d.Records), dns.Options{}))

			got, err := svc.VerifyDomain(ctx, org, d.ID)
			if err != nil {
				t.Fatalf("verify failed instead of reporting: %v", err)
			}
			if got.Status != ports.DomainPending {
				t.Fatalf("status %s", got.Status)
			}
			requireNotPublished(t, got, baseTime)
			stored := MustStored(t, b.store, org, d.ID)
			if stored.Status != ports.DomainPending {
				t.Fatalf("stored status %s", stored.Status)
			}
			requireNotPublished(t, stored, baseTime)
			if evs := eventTypes(MustEvents(t, b.store, org)); !slices.Equal(evs, []string{ports.EventDomainCreated}) {
				t.Fatalf("events %v", evs)
			}
		})
	}
}

// TestDomainServiceVerifyLooksUpConcurrently checks that the five lookups of a run are in flight together, so
// a silent name server costs its timeout once rather than five times.
func TestDomainServiceVerifyLooksUpConcurrently(t *testing.T) {
	t.Parallel()
	b := MustSetup(t, testConfig())
	org := MustOrganization(t, b.store)
	d := MustCreateDomain(t, b.svc, org, "example.org")
	silent := MustSilentServer(t)
	svc := b.MustService(t, dns.New(silent.addr, dns.Options{Timeout: silentTimeout}))

	result := verifyAsync(context.Background(), svc, org, d.ID)
	// The server never answers, so a lookup waits silentTimeout before its retry. Had the lookups run one
	// after another, the second query could not arrive before the first one timed out.
	first := silent.MustNextQuery(t)
	window := time.NewTimer(time.Until(first.Add(silentTimeout / 2)))
	defer window.Stop()
	inFlight := 1
collect:
	for inFlight < len(d.Records) {
		select {
		case <-silent.arrivals:
			inFlight++
		case <-window.C:
			break collect
		}
	}
	if inFlight != len(d.Records) {
		t.Fatalf("%d of %d lookups were sent before the first one could time out: they do not run concurrently",
			inFlight, len(d.Records))
	}

	// Timeouts count as not published, like every other lookup failure.
	r := MustResult(t, result)
	if r.err != nil {
		t.Fatalf("verify failed instead of reporting: %v", r.err)
	}
	if r.d.Status != ports.DomainPending {
		t.Fatalf("status %s", r.d.Status)
	}
	requireNotPublished(t, r.d, baseTime)
}

// TestDomainServiceVerifyCancelledIsNotSaved checks that a run whose context is cancelled, before the call or
// during the lookups, changes nothing in the store.
func TestDomainServiceVerifyCancelledIsNotSaved(t *testing.T) {
	t.Parallel()
	b := MustSetup(t, testConfig())
	org := MustOrganization(t, b.store)
	d := MustCreateDomain(t, b.svc, org, "example.org")
	publish(b.dns, d.Records, ports.RecordDKIM)
	if got, err := b.svc.VerifyDomain(context.Background(), org, d.ID); err != nil || got.Status != ports.DomainFailed {
		t.Fatalf("verify: %s %v", got.Status, err)
	}
	checked := b.clock.Now()
	events := MustEvents(t, b.store, org)
	b.clock.Add(time.Minute)

	requireUnchanged := func(step string) {
		t.Helper()
		stored := MustStored(t, b.store, org, d.ID)
		if stored.Status != ports.DomainFailed || !verifiedFlags(stored)[ports.RecordDKIM] {
			t.Fatalf("%s: the cancelled run was saved: %s %v", step, stored.Status, verifiedFlags(stored))
		}
		for _, r := range stored.Records {
			if r.CheckedAt == nil || !r.CheckedAt.Equal(checked) {
				t.Fatalf("%s: the cancelled run was saved: %s checkedAt %v", step, r.Type, r.CheckedAt)
			}
		}
		if n := len(MustEvents(t, b.store, org)); n != len(events) {
			t.Fatalf("%s: the cancelled run wrote %d events", step, n-len(events))
		}
	}

	// Cancelled before the call.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.svc.VerifyDomain(ctx, org, d.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled verify: %v", err)
	}
	requireUnchanged("cancelled before")

	// Cancelled while the lookups wait on a silent name server: they all fail, which must not be saved as a
	// run that found nothing published.
	silent := MustSilentServer(t)
	svc := b.MustService(t, dns.New(silent.addr, dns.Options{Timeout: silentTimeout}))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	result := verifyAsync(ctx, svc, org, d.ID)
	silent.MustNextQuery(t)
	cancel()
	if r := MustResult(t, result); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("verify cancelled during the lookups: %+v %v", r.d, r.err)
	}
	requireUnchanged("cancelled during the lookups")
}

// TestDomainServiceOtherOrganization checks the tenant boundary: another organization can neither see, verify
// nor suspend a domain, and its attempts leave no trace on it.
func TestDomainServiceOtherOrganization(t *testing.T) {
	t.Parallel()
	b := MustSetup(t, testConfig())
	ctx := context.Background()
	owner, other := MustOrganization(t, b.store), MustOrganization(t, b.store)
	d := MustCreateDomain(t, b.svc, owner, "example.org")
	publish(b.dns, d.Records)

	if _, err := b.svc.GetDomain(ctx, other, d.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("GetDomain by another organization: %v", err)
	}
	if _, err := b.svc.VerifyDomain(ctx, other, d.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("VerifyDomain by another organization: %v", err)
	}
	if _, err := b.svc.SuspendDomain(ctx, other, d.ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("SuspendDomain by another organization: %v", err)
	}
	if list, err := b.svc.ListDomains(ctx, other); err != nil || len(list) != 0 {
		t.Fatalf("ListDomains by another organization: %+v %v", list, err)
	}

	// Nothing was verified, suspended or recorded on the owner's domain.
	stored := MustStored(t, b.store, owner, d.ID)
	if stored.Status != ports.DomainPending || stored.VerifiedAt != nil {
		t.Fatalf("owner's domain changed: %s verifiedAt %v", stored.Status, stored.VerifiedAt)
	}
	for _, r := range stored.Records {
		if r.Verified || r.CheckedAt != nil {
			t.Fatalf("owner's record %s checked by another organization", r.Type)
		}
	}
	if evs := eventTypes(MustEvents(t, b.store, owner)); !slices.Equal(evs, []string{ports.EventDomainCreated}) {
		t.Fatalf("owner's events %v", evs)
	}
	if evs := MustEvents(t, b.store, other); len(evs) != 0 {
		t.Fatalf("other organization's events %v", eventTypes(evs))
	}

	// The owner still reaches it, and the same records verify it.
	if got, err := b.svc.VerifyDomain(ctx, owner, d.ID); err != nil || got.Status != ports.DomainVerified {
		t.Fatalf("owner's verify: %s %v", got.Status, err)
	}
}

// openRSAKey opens a sealed DKIM key through domain.OpenKey and parses it as RSA.
func openRSAKey(k *secret.Keyring, d ports.Domain) (*rsa.PrivateKey, error) {
	der, err := domain.OpenKey(k, d)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("dkim key is %T, not RSA", parsed)
	}
	return key, nil
}
