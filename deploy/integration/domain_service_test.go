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
	"fmt"
	"net"
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
