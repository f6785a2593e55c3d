package domain

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/postmill/postmill/ports"
)

// VerifyDomain looks every record up over live DNS, stores each record's result and checkedAt, and moves the
// domain through SPEC §3's state table (see nextStatus). The rate limit is counted first, before the domain
// is even read, so that a loop of calls costs neither DNS queries nor database reads once refused. Failed
// lookups of any kind (NXDOMAIN, NODATA, SERVFAIL, timeouts) mean "not published": verification reports on
// the domain, it never fails because the domain's DNS does. Errors: not_found, resource_exhausted.
func (s *Service) VerifyDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	dec, err := s.limiter.Allow(ctx, VerifyRateKeyPrefix+orgID, s.cfg.VerifyLimit, s.cfg.VerifyWindow)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: verify rate limit: %w", err)
	}
	if !dec.Allowed {
		return ports.Domain{}, ports.RateLimited(int(math.Ceil(dec.RetryAfter.Seconds())))
	}
	d, err := s.domains.GetDomain(ctx, orgID, id)
	if err != nil {
		return ports.Domain{}, fmt.Errorf("domain: get: %w", err)
	}

	checks := s.lookupAll(ctx, d.Records)
	// A cancelled request makes every lookup fail; saving that run would mark a good domain failed.
	if err := ctx.Err(); err != nil {
		return ports.Domain{}, fmt.Errorf("domain: verify %s: %w", id, err)
	}

	now := s.now()
	var requiredOK, requiredTotal int
	anyPublished := false
	for i := range d.Records {
		r := &d.Records[i]
		checkedAt := now
		r.Verified, r.CheckedAt = checks[i].ok, &checkedAt
		r.Found, r.Problem = checks[i].found, checks[i].problem
		anyPublished = anyPublished || r.Verified
		if r.Required {
			requiredTotal++
			if r.Verified {
				requiredOK++
			}
		}
	}

	next := nextStatus(d.Status, requiredOK, requiredTotal, anyPublished)
	var events []ports.Event
	if next == ports.DomainVerified && d.VerifiedAt == nil {
		verifiedAt := now
		d.VerifiedAt = &verifiedAt
		events = append(events, domainEvent(orgID, d.ID, ports.EventDomainVerified, now))
	}
	if next == ports.DomainFailed {
		events = append(events, domainEvent(orgID, d.ID, ports.EventDomainFailed, now))
	}
	d.Status = next
	if err := s.domains.SaveVerification(ctx, d, events); err != nil {
		return ports.Domain{}, fmt.Errorf("domain: save verification: %w", err)
	}
	return withoutPrivateKey(d), nil
}

// lookupAll checks every record at once: the five lookups are independent, and a slow or silent name server
// would otherwise cost its timeout five times over.
func (s *Service) lookupAll(ctx context.Context, records []ports.DNSRecord) []recordCheck {
	checks := make([]recordCheck, len(records))
	var wg sync.WaitGroup
	for i, r := range records {
		wg.Go(func() { checks[i] = s.lookup(ctx, r) })
	}
	wg.Wait()
	return checks
}

// lookup checks whether r is published as expected and, when it is not, says what DNS answered and why
// that does not do. Every resolver error, a *ports.DNSError or any other, counts as not published.
func (s *Service) lookup(ctx context.Context, r ports.DNSRecord) recordCheck {
	var (
		c   recordCheck
		err error
	)
	switch r.Type {
	case ports.RecordSPF, ports.RecordDKIM, ports.RecordDMARC:
		var txt []string
		if txt, err = s.resolver.LookupTXT(ctx, r.Host); err == nil {
			if r.Type == ports.RecordSPF {
				c = checkSPF(r.Host, txt, r.Value)
			} else {
				c = checkTXT(r.Type, r.Host, txt, r.Value)
			}
		}
	case ports.RecordReturnPath, ports.RecordTracking:
		var target string
		if target, err = s.resolver.LookupCNAME(ctx, r.Host); err == nil {
			c = checkCNAME(r.Host, target, r.Value)
		}
	default:
		return recordCheck{problem: fmt.Sprintf("unknown record type %q", r.Type)}
	}
	if err != nil {
		s.logger.DebugContext(ctx, "domain record lookup failed", "type", r.Type, "host", r.Host, "err", err)
		return lookupFailed(recordType(r.Type), r.Host, err)
	}
	return c
}

// txtPublished reports whether one of the TXT records at a name, each already joined from its
// character-strings (RFC 6376 §3.6.2.2, RFC 7208 §3.3), equals want exactly (SPEC §4.3).
func txtPublished(txts []string, want string) bool {
	return slices.Contains(txts, want)
}

// spfPublished reports whether the SPF policy at a domain authorises what want asks for. A name may hold only
// one SPF record (RFC 7208 §3.2; with two, every check ends in permerror, §4.5), so customers who already
// have one merge the include into it rather than publishing want beside it (SPEC §2). The rule is therefore:
// exactly one TXT record at the name is an SPF record, and it is either want itself or contains every
// include: term of want, as a pass (no qualifier or "+"). Other mechanisms and the "all" qualifier are the
// customer's business.
func spfPublished(txts []string, want string) bool {
	var policies []string
	for _, t := range txts {
		if isSPFRecord(t) {
			policies = append(policies, t)
		}
	}
	if len(policies) != 1 {
		return false
	}
	policy := policies[0]
	if policy == want {
		return true
	}
	wantIncludes := spfIncludes(want)
	if len(wantIncludes) == 0 {
		return false
	}
	have := spfIncludes(policy)
	for _, w := range wantIncludes {
		if !slices.ContainsFunc(have, func(h string) bool { return sameHost(h, w) }) {
			return false
		}
	}
	return true
}

// isSPFRecord applies RFC 7208 §4.5: an SPF record starts with the version section "v=spf1" ended by a space
// or the end of the record; the ABNF literal is case-insensitive (RFC 7208 §12, RFC 5234 §2.3).
func isSPFRecord(t string) bool {
	const version = "v=spf1"
	if len(t) < len(version) || !strings.EqualFold(t[:len(version)], version) {
		return false
	}
	return len(t) == len(version) || t[len(version)] == ' '
}

// spfIncludes returns the domains of the include mechanisms with a pass qualifier (RFC 7208 §5.2). Mechanism
// names are case-insensitive (RFC 7208 §4.6.1).
func spfIncludes(policy string) []string {
	const mech = "include:"
	var out []string
	for _, term := range strings.Fields(policy) {
		term = strings.TrimPrefix(term, "+")
		if len(term) > len(mech) && strings.EqualFold(term[:len(mech)], mech) {
			out = append(out, term[len(mech):])
		}
	}
	return out
}

// sameHost compares host names the way DNS does: case-insensitively (RFC 4343) and ignoring the root's
// trailing dot, which some resolvers and zone editors show and others do not (SPEC §4.3).
func sameHost(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// nextStatus is SPEC §3's domain state table for a verify run, with the rows the spec leaves open decided:
//
//   - every required record resolves → verified, from any state (pending, failed, verified, and suspended:
//     the only way out of suspended is a run where every required record resolves);
//   - a verified domain stays verified after a failing run: it is kept sending while its owner fixes the
//     records, which are stored with their failed checks so the problem is visible;
//   - a suspended domain stays suspended when not every required record resolves;
//   - a failed domain stays failed, even when nothing resolves any more;
//   - a pending domain becomes failed when some record resolves (required or recommended) and stays pending
//     when none does.
//
// requiredTotal of zero never verifies: a domain without required records is malformed, not trustworthy.
func nextStatus(current ports.DomainStatus, requiredOK, requiredTotal int, anyPublished bool) ports.DomainStatus {
	switch {
	case requiredTotal > 0 && requiredOK == requiredTotal:
		return ports.DomainVerified
	case current == ports.DomainVerified, current == ports.DomainSuspended, current == ports.DomainFailed:
		return current
	case anyPublished:
		return ports.DomainFailed
	default:
		return ports.DomainPending
	}
}
