package ports

import (
	"context"
	"errors"
	"time"
)

// HoldReason says why a delivery job is held.
type HoldReason string

// Why deliveries are held. Pausing an organization or suspending a sending domain stops mail that was
// already accepted as well as new sends: its delivery jobs are kept, neither delivered nor failed, until
// the organization is resumed or the domain verified again.
const (
	HoldOrganizationPaused HoldReason = "organization_paused"
	HoldDomainSuspended    HoldReason = "domain_suspended"
)

// ReasonDeliveryHeld is the Reason of the error DeliveryService.LoadOutbound returns for a job it has put
// on hold: the job is in the core's keeping now, so the MTA acknowledges it without delivering.
const ReasonDeliveryHeld = "delivery_held"

// DeliveryHeld is the error LoadOutbound returns for a job it has put on hold.
func DeliveryHeld(reason HoldReason) *Error {
	return &Error{Code: CodeFailedPrecondition, Reason: ReasonDeliveryHeld, Message: "delivery held: " + string(reason)}
}

// IsDeliveryHeld reports whether err (or an error it wraps) is DeliveryHeld's, also after it crossed the
// RPC boundary.
func IsDeliveryHeld(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeFailedPrecondition && e.Reason == ReasonDeliveryHeld
}

// HeldJob is a delivery job kept out of circulation: Job as the MTA received it, the sending domain whose
// state (with its organization's) decides when it may go again, why it is held and since when.
type HeldJob struct {
	Job      DeliveryJob
	DomainID string
	Reason   HoldReason
	HeldAt   time.Time
}

// HeldGroup names the held jobs of one organization and sending domain: they are released together.
type HeldGroup struct {
	OrganizationID string
	DomainID       string
	Jobs           int
}

// HeldDeliveries keeps the delivery jobs of paused organizations and suspended domains in the core's
// store, out of the queue: a held job is neither retried nor counted against the queue's redelivery cap,
// and it survives restarts of every tier.
type HeldDeliveries interface {
	// HoldDelivery keeps j until it is released. Holding a job id already held changes nothing, so a
	// queue that hands the same job out twice holds it once.
	HoldDelivery(ctx context.Context, j HeldJob) error
	// HeldGroups lists up to limit (organization, sending domain) pairs that have held jobs, those held
	// longest first.
	HeldGroups(ctx context.Context, limit int) ([]HeldGroup, error)
	// ReleaseHeld moves up to limit held jobs of the organization's sending domain back to the outbox,
	// due at now, and returns how many it moved. Each job's FirstQueuedAt moves later by the time it was
	// held, so that a hold does not count towards the maximum age after which deferred mail fails.
	// Concurrent releases move each job once.
	ReleaseHeld(ctx context.Context, orgID, domainID string, now time.Time, limit int) (int, error)
}
