package tlspolicy

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// stsEntry is what the cache knows of one domain's MTA-STS policy.
type stsEntry struct {
	policy  *stsPolicy // the last valid policy fetched; nil: none
	id      string     // the TXT id that policy was fetched under
	expires time.Time  // fetch time + max_age (RFC 8461 §3.2)
	checked time.Time  // when the TXT record may be asked again
}

// active returns the cached policy while its max_age lasts.
func (en *stsEntry) active(now time.Time) *stsPolicy {
	if en == nil || en.policy == nil || !now.Before(en.expires) {
		return nil
	}
	return en.policy
}

// stsFor returns the MTA-STS policy in force for domain, or nil (RFC 8461 §5.1). The TXT record is asked
// at most once per Recheck; a policy is fetched when its id changed or its max_age passed. When the record
// cannot be read or the policy cannot be fetched, a cached policy still within its max_age stays in force
// (§5.1: a cached policy is applied when no live one can be discovered), and the failure is reported.
func (e *Engine) stsFor(ctx context.Context, domain string) *stsPolicy {
	now := e.cfg.Now()
	if en, ok := e.policies.get(domain); ok && now.Before(en.checked) {
		return en.active(now)
	}
	e.flights.do("sts "+domain, func() { e.refreshSTS(ctx, domain) })
	en, _ := e.policies.get(domain)
	return en.active(e.cfg.Now())
}

// refreshSTS asks the TXT record and fetches the policy when needed, updating the cache.
func (e *Engine) refreshSTS(ctx context.Context, domain string) {
	now := e.cfg.Now()
	old, _ := e.policies.get(domain)
	next := &stsEntry{checked: now.Add(e.cfg.Recheck)}
	if old != nil {
		next.policy, next.id, next.expires = old.policy, old.id, old.expires
	}
	records, err := e.resolver.LookupTXT(ctx, "_mta-sts."+domain)
	if err != nil && dnsKind(err) != ports.DNSNotFound && dnsKind(err) != ports.DNSNoData {
		// A DNS failure says nothing about the policy: keep what is cached, ask again soon.
		next.checked = now.Add(e.cfg.Recheck / 10)
		e.policies.put(domain, next)
		return
	}
	id, ok := stsRecordID(records)
	if !ok {
		// No (valid) record: the domain announces no policy now; a cached one stays until it expires.
		e.policies.put(domain, next)
		return
	}
	if id == next.id && next.active(now) != nil {
		e.policies.put(domain, next)
		return
	}
	p, ferr := e.fetchPolicy(ctx, domain)
	if ferr != nil {
		e.log.Warn("MTA-STS policy fetch failed", "domain", domain, "result", ferr.result, "error", ferr.err)
		e.reports.add(&Host{domain: domain, Name: "mta-sts." + domain, Mode: ModeSTSTesting, policy: policyText(next.active(now)), e: e},
			ferr.result, ferr.err.Error())
		next.checked = now.Add(e.cfg.Recheck / 10)
		e.policies.put(domain, next)
		return
	}
	next.policy, next.id, next.expires = p, id, now.Add(p.maxAge)
	e.policies.put(domain, next)
	e.log.Info("MTA-STS policy fetched", "domain", domain, "id", id, "mode", p.mode, "max_age", p.maxAge)
}

func policyText(p *stsPolicy) []string {
	if p == nil {
		return nil
	}
	return p.text
}

// mxAuthenticated reports whether the resolver authenticated domain's MX records (RFC 7672 §2.2.1: DANE
// applies to MX hosts only when the MX RRset was secure). A failed lookup counts as not authenticated: the
// MTA's own MX lookup decides what happens to the delivery.
func (e *Engine) mxAuthenticated(ctx context.Context, domain string) bool {
	now := e.cfg.Now()
	if a, ok := e.mxSecure.get(domain); ok && now.Before(a.expires) {
		return a.val
	}
	_, ad, err := e.dnssec.LookupMXAuthenticated(ctx, domain)
	ttl := e.cfg.Recheck
	if err != nil && dnsKind(err) == ports.DNSTemporary {
		ttl /= 10
	}
	secure := err == nil && ad
	e.mxSecure.put(domain, timed[bool]{val: secure, expires: now.Add(ttl)})
	return secure
}

// daneAnswer is what DNS says about one MX host's TLSA records.
type daneAnswer struct {
	usable  []ports.TLSA // authenticated and usable for SMTP
	present bool         // authenticated records exist (usable or not)
	failed  string       // the lookup failed: the host cannot be used (RFC 7672 §2.2)
	text    []string     // the records in presentation form, for the TLS-RPT policy-string
}

// dane returns the DANE answer for host, cached for Recheck (a tenth of it after a failure). Records that
// were not authenticated, or an authenticated denial, leave the host to MTA-STS or opportunistic TLS; a
// lookup that failed (SERVFAIL, which is what a validating resolver answers for bogus data) leaves the host
// unusable, since its TLSA records might exist (RFC 7672 §2.2).
func (e *Engine) dane(ctx context.Context, host string) daneAnswer {
	now := e.cfg.Now()
	if a, ok := e.hosts.get(host); ok && now.Before(a.expires) {
		return a.val
	}
	name := "_25._tcp." + host
	records, ad, err := e.dnssec.LookupTLSA(ctx, name)
	var a daneAnswer
	ttl := e.cfg.Recheck
	switch kind := dnsKind(err); {
	case err == nil && ad:
		a.present = len(records) > 0
		a.usable = usableTLSA(records)
		for _, r := range records {
			a.text = append(a.text, fmt.Sprintf("%s. IN TLSA %d %d %d %s", name, r.Usage, r.Selector, r.MatchingType, hex.EncodeToString(r.Data)))
		}
	case err == nil, kind == ports.DNSNotFound, kind == ports.DNSNoData:
	default:
		a.failed = fmt.Sprintf("TLSA lookup of %s failed: %v", name, err)
		ttl /= 10
	}
	e.hosts.put(host, timed[daneAnswer]{val: a, expires: now.Add(ttl)})
	return a
}

func dnsKind(err error) ports.DNSErrorKind {
	var de *ports.DNSError
	if errors.As(err, &de) {
		return de.Kind
	}
	if err != nil {
		return ports.DNSTemporary
	}
	return ""
}
