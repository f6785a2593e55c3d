package sending

import (
	"context"
	"fmt"
	"time"

	"github.com/postmill/postmill/core/poll"
	"github.com/postmill/postmill/ports"
)

// Pausing an organization or suspending a sending domain is a kill switch for mail already accepted, not
// only for new sends. LoadOutbound puts such a job on hold (ports.HeldDeliveries) instead of handing it
// to the MTA, and the MTA acknowledges it out of the queue: a held job neither circulates (no retries, no
// redeliveries counted against the queue's cap) nor fails, whatever the recipient's server does meanwhile.
// RunHoldRelease moves held jobs back to the outbox once their organization is resumed and their domain
// verified again, at once when the change feed reports the change and every HoldRecheckInterval anyway.

// holdReason decides whether mail of org sent from domain must wait: "" when it may be delivered.
func holdReason(org ports.Organization, domain ports.Domain) ports.HoldReason {
	switch {
	case org.Paused:
		return ports.HoldOrganizationPaused
	case domain.Status == ports.DomainSuspended:
		return ports.HoldDomainSuspended
	}
	return ""
}

// holdIfStopped puts job on hold when its organization is paused or its From domain suspended, and then
// returns ports.DeliveryHeld. The organization comes from the lookup cache, which the change feed clears
// on a pause; the domain was read with the message.
func (s *Service) holdIfStopped(ctx context.Context, job ports.DeliveryJob, domain ports.Domain) error {
	if s.held == nil {
		return nil
	}
	org, err := s.organization(ctx, job.OrganizationID)
	if err != nil {
		return err
	}
	reason := holdReason(org, domain)
	if reason == "" {
		return nil
	}
	if err := s.held.HoldDelivery(ctx, ports.HeldJob{Job: job, DomainID: domain.ID, Reason: reason, HeldAt: s.now()}); err != nil {
		return fmt.Errorf("sending: hold job %s: %w", job.ID, err)
	}
	s.logger.InfoContext(ctx, "delivery held", "job", job.ID, "message", job.MessageID, "reason", reason)
	return ports.DeliveryHeld(reason)
}

// changed is the change feed's subscriber: the caches forget what changed, and held deliveries are looked
// at again.
func (s *Service) changed(c ports.Change) {
	switch c.Kind {
	case ports.ChangeOrganization:
		s.orgCache.Forget(c.OrganizationID)
	case ports.ChangeDomain:
		// The domain cache is keyed by name: forget every domain of the organization.
		s.domainCache.ForgetIf(func(k domainKey, _ ports.Domain) bool { return k.orgID == c.OrganizationID })
	default:
		s.orgCache.Clear()
		s.domainCache.Clear()
	}
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}

// maxHeldGroups bounds the (organization, domain) pairs one release round looks at.
const maxHeldGroups = 1000

// RunHoldRelease releases held deliveries whose organization and domain may send again, until ctx ends,
// then returns nil. It looks when the change feed reports a change and every HoldRecheckInterval; a
// failing round is logged and tried again after a growing pause. Several processes may run it at once
// (the store moves each job once).
func (s *Service) RunHoldRelease(ctx context.Context) error {
	if s.held == nil {
		<-ctx.Done()
		return nil
	}
	failures := 0
	for ctx.Err() == nil {
		wait := s.cfg.HoldRecheckInterval
		if err := s.releaseHeld(ctx); err != nil && ctx.Err() == nil {
			failures++
			wait = poll.Backoff(time.Second, min(poll.ErrorBackoffCap, s.cfg.HoldRecheckInterval), failures)
			s.logger.WarnContext(ctx, "releasing held deliveries failed; retrying", "error", err, "failures", failures, "wait", wait)
		} else {
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.recheck:
		}
		t.Stop()
	}
	return nil
}

// releaseHeld looks at every group of held jobs and releases those whose organization and domain, read
// afresh, no longer hold them. A job held again right after (the organization paused once more) comes back
// on hold through LoadOutbound.
func (s *Service) releaseHeld(ctx context.Context) error {
	groups, err := s.held.HeldGroups(ctx, maxHeldGroups)
	if err != nil {
		return fmt.Errorf("sending: held groups: %w", err)
	}
	for _, g := range groups {
		reason, err := s.stillHeld(ctx, g)
		if err != nil {
			return err
		}
		if reason != "" {
			continue
		}
		for {
			n, err := s.held.ReleaseHeld(ctx, g.OrganizationID, g.DomainID, s.now(), s.cfg.HoldReleaseBatch)
			if err != nil {
				return fmt.Errorf("sending: release held: %w", err)
			}
			if n > 0 {
				s.logger.InfoContext(ctx, "held deliveries released", "organization", g.OrganizationID, "domain", g.DomainID, "jobs", n)
			}
			if n < s.cfg.HoldReleaseBatch {
				break
			}
		}
	}
	return nil
}

// stillHeld reads the group's organization and domain from the store (not the caches) and returns why
// its jobs must still wait. An organization or domain that no longer exists holds nothing: its jobs are
// released and dropped by LoadOutbound.
func (s *Service) stillHeld(ctx context.Context, g ports.HeldGroup) (ports.HoldReason, error) {
	org, err := s.orgs.Organization(ctx, g.OrganizationID)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sending: organization of held deliveries: %w", err)
	}
	domain, err := s.domains.GetDomain(ctx, g.OrganizationID, g.DomainID)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sending: domain of held deliveries: %w", err)
	}
	return holdReason(org, domain), nil
}
