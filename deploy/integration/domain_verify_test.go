package integration

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/core/domain"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

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
