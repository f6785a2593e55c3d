package postgres

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.WebhookStore = (*Webhooks)(nil)

// Webhooks is the PostgreSQL store of webhook endpoints and their deliveries (ports.WebhookStore). Safe for
// concurrent use.
type Webhooks struct{ shared }

// endpointFKey is the constraint a delivery violates when its endpoint is gone (or belongs to another
// organization); InsertDelivery reports it as not_found, which is what a replay of a deleted endpoint's
// delivery must answer.
const endpointFKey = "webhook_deliveries_endpoint_id_fkey"

// InsertEndpoint writes the endpoint with no bound on the organization's endpoints: InsertEndpointWithin
// with max 0, for tools and tests that place rows directly. Errors as InsertEndpointWithin.
func (s *Webhooks) InsertEndpoint(ctx context.Context, e ports.WebhookEndpoint) error {
	_, err := s.InsertEndpointWithin(ctx, e, 0)
	return err
}

// InsertEndpointWithin implements ports.WebhookStore in one transaction (one pipelined batch): a
// per-organization advisory lock, then the insert only while the organization holds fewer than max
// endpoints, counted after the lock so concurrent creations take turns. The endpoint is stored as given,
// Enabled included, with its secret still sealed. Errors: already_exists (webhook_endpoints_pkey) for a
// taken id, invalid_argument (webhook_endpoints_organization_id_fkey) for an unknown organization.
func (s *Webhooks) InsertEndpointWithin(ctx context.Context, e ports.WebhookEndpoint, max int) (bool, error) {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	var n int64
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error { return q.LockOrganizationWebhookEndpoints(ctx, e.OrganizationID) },
		func(q *db.Queries) (err error) {
			n, err = q.InsertWebhookEndpointWithin(ctx, db.InsertWebhookEndpointWithinParams{
				ID:             e.ID,
				OrganizationID: e.OrganizationID,
				Url:            e.URL,
				Enabled:        e.Enabled,
				EventTypes:     types,
				Secret:         e.Secret,
				CreatedAt:      e.CreatedAt,
				MaxEndpoints:   clampInt32(max),
			})
			return err
		})
	if err != nil {
		return false, interpretError(err)
	}
	return n > 0, nil
}

// ListEndpoints implements ports.WebhookStore: newest first, keyset paging on (created_at, id). Secrets
// come back sealed; the caller decides what to show.
func (s *Webhooks) ListEndpoints(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	limit, beforeAt, beforeID, err := listBounds(q)
	if err != nil {
		return ports.Page[ports.WebhookEndpoint]{}, err
	}
	if !isUUID(orgID) {
		return ports.Page[ports.WebhookEndpoint]{Data: []ports.WebhookEndpoint{}}, nil
	}
	rows, err := s.queries.ListWebhookEndpoints(ctx, db.ListWebhookEndpointsParams{
		OrganizationID: orgID, BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
	})
	if err := listError(err); err != nil {
		return ports.Page[ports.WebhookEndpoint]{}, err
	}
	return pageOf(rows, limit, endpointFromRow, func(r db.WebhookEndpoint) (time.Time, string) { return r.CreatedAt, r.ID }), nil
}

// GetEndpoint implements ports.WebhookStore. Errors: not_found, also for another organization's endpoint.
func (s *Webhooks) GetEndpoint(ctx context.Context, orgID, id string) (ports.WebhookEndpoint, error) {
	row, err := s.queries.WebhookEndpointByID(ctx, db.WebhookEndpointByIDParams{OrganizationID: orgID, ID: id})
	if err != nil {
		return ports.WebhookEndpoint{}, interpretErrorFor("webhook endpoint", err)
	}
	return endpointFromRow(row), nil
}

// DeleteEndpoint implements ports.WebhookStore: the endpoint's deliveries are deleted with it in the same
// statement (ON DELETE CASCADE), so a dispatcher holding one of them finds its result ignored. Errors:
// not_found.
func (s *Webhooks) DeleteEndpoint(ctx context.Context, orgID, id string) error {
	n, err := s.queries.DeleteWebhookEndpoint(ctx, db.DeleteWebhookEndpointParams{OrganizationID: orgID, ID: id})
	if err != nil {
		return interpretErrorFor("webhook endpoint", err)
	}
	if n == 0 {
		return ports.NotFound("webhook endpoint not found")
	}
	return nil
}

// SetEndpointSecret implements ports.WebhookStore and returns the endpoint as it now is. Deliveries already
// leased keep the secret they were claimed with; every later claim signs with the new one. Errors:
// not_found.
func (s *Webhooks) SetEndpointSecret(ctx context.Context, orgID, id string, sealed []byte) (ports.WebhookEndpoint, error) {
	row, err := s.queries.SetWebhookEndpointSecret(ctx, db.SetWebhookEndpointSecretParams{Secret: sealed, OrganizationID: orgID, ID: id})
	if err != nil {
		return ports.WebhookEndpoint{}, interpretErrorFor("webhook endpoint", err)
	}
	return endpointFromRow(row), nil
}

// InsertDelivery implements ports.WebhookStore for test and replay deliveries, stored as given (a missing id
// is generated), outcome included: a test delivery is written once its first attempt is over. A pending or
// failed delivery with NextRetryAt set is due for ClaimDue from then on; one without NextRetryAt is never
// claimed. Errors: not_found when the endpoint does not exist in the delivery's organization (deleted
// meanwhile), already_exists for a taken id.
func (s *Webhooks) InsertDelivery(ctx context.Context, d ports.WebhookDelivery) error {
	status := d.Status
	if status == "" {
		status = ports.WebhookPending
	}
	err := s.queries.InsertWebhookDelivery(ctx, db.InsertWebhookDeliveryParams{
		ID:              idOrNew(d.ID),
		OrganizationID:  d.OrganizationID,
		EndpointID:      d.EndpointID,
		EventID:         d.EventID,
		EventType:       d.EventType,
		Status:          status,
		Attempts:        clampInt32(max(d.Attempts, 0)),
		ResponseCode:    clampInt32(max(d.ResponseCode, 0)),
		NextAttemptAt:   d.NextRetryAt,
		DeliveredAt:     d.DeliveredAt,
		CreatedAt:       d.CreatedAt,
		Payload:         nonNil(d.Payload),
		OriginalEventID: d.OriginalEventID,
		BlockedReason:   blockedReason(d.Status, d.BlockedReason),
	})
	if e, ok := ports.AsError(interpretError(err)); ok && e.Constraint == endpointFKey {
		return ports.NotFound("webhook endpoint not found")
	}
	return interpretErrorFor("webhook endpoint", err)
}

// GetDelivery implements ports.WebhookStore, payload included. Errors: not_found, also for another
// organization's delivery.
func (s *Webhooks) GetDelivery(ctx context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	row, err := s.queries.WebhookDeliveryByID(ctx, db.WebhookDeliveryByIDParams{OrganizationID: orgID, ID: id})
	if err != nil {
		return ports.WebhookDelivery{}, interpretErrorFor("webhook delivery", err)
	}
	return deliveryFromRow(row), nil
}

// ListRecentDeliveries implements ports.WebhookStore: newest first by (createdAt, id) across the
// organization's endpoints. A limit below 1 lists nothing.
func (s *Webhooks) ListRecentDeliveries(ctx context.Context, orgID string, limit int) ([]ports.WebhookDelivery, error) {
	if limit < 1 {
		return []ports.WebhookDelivery{}, nil
	}
	rows, err := s.queries.ListRecentWebhookDeliveries(ctx, db.ListRecentWebhookDeliveriesParams{
		OrganizationID: orgID, RowLimit: clampInt32(limit),
	})
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = deliveryFromRow(db.WebhookDeliveryByIDRow(r))
	}
	return out, nil
}

// FanOut implements ports.WebhookStore in one transaction of four round trips: begin; ProbePlans and the
// lock of up to limit ids of the webhook outbox (oldest first, FOR UPDATE SKIP LOCKED), each with its
// event found by primary key and its organization's enabled endpoints subscribed to its type; then, once
// payloads has answered, one pipelined batch that inserts every delivery and deletes the taken ids from
// the outbox; commit. Events are never updated: an update of the wide events row and its indexes cost
// more than the fan-out itself. The deliveries get UUIDv7 ids in event order, so listings and the
// dispatcher see them in the order the events happened.
//
// payloads receives every taken event, email.cancelled and events without subscribers included (it also
// publishes them), and returns bodies by event id. An event it gives no body gets no delivery but is
// consumed all the same: a body that cannot be built now cannot be built on the next run either. An id
// whose event is gone or was inserted already fanned out is consumed without being handed to payloads.
// When payloads fails, the transaction rolls back, nothing is deleted, and its error is returned
// unchanged; the events are taken again by the next run (publishing is at least once). FanOut returns how
// many outbox ids it took, so 0 means nothing is left to fan out.
func (s *Webhooks) FanOut(ctx context.Context, now time.Time, limit int, payloads func(context.Context, []ports.Event) (map[string][]byte, error)) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	taken := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// ProbePlans heads the transaction: each outbox id must find its event by a probe of events_pkey
		// however the cached plan was made (a generic plan made while events was small joins the outbox to a
		// scan of the whole table on every fan-out).
		var rows []db.TakeEventsToFanOutRow
		err := runPipeline(ctx, tx,
			func(q *db.Queries) error { return q.ProbePlans(ctx) },
			func(q *db.Queries) (err error) {
				rows, err = q.TakeEventsToFanOut(ctx, clampInt32(limit))
				return err
			})
		if err != nil || len(rows) == 0 {
			return err
		}
		ids := make([]string, len(rows))
		events := make([]ports.Event, 0, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
			if !r.Found {
				continue
			}
			events = append(events, ports.Event{
				ID:               r.ID,
				OrganizationID:   r.OrganizationID,
				Type:             r.Type,
				MessageID:        r.MessageID,
				RecipientID:      r.RecipientID,
				DomainID:         r.DomainID,
				ProviderResponse: textPtr(r.ProviderResponse),
				BounceClass:      r.BounceClass,
				URL:              r.Url,
				LinkID:           r.LinkID,
				OccurredAt:       timeOrZero(r.OccurredAt).UTC(),
			})
		}
		var bodies map[string][]byte
		if len(events) > 0 {
			if bodies, err = payloads(ctx, events); err != nil {
				return &publishError{err}
			}
		}

		var ins db.InsertFanOutDeliveriesParams
		for _, r := range rows {
			body, ok := bodies[r.ID]
			if !r.Found || len(r.EndpointIds) == 0 || !ok || body == nil {
				continue
			}
			ins.EventIds = append(ins.EventIds, r.ID)
			ins.OrganizationIds = append(ins.OrganizationIds, r.OrganizationID)
			ins.Types = append(ins.Types, r.Type)
			ins.Payloads = append(ins.Payloads, body)
			for _, endpointID := range r.EndpointIds {
				ins.Ids = append(ins.Ids, uuid.Must(uuid.NewV7()).String())
				ins.EndpointIds = append(ins.EndpointIds, endpointID)
				ins.DeliveryEventIds = append(ins.DeliveryEventIds, r.ID)
			}
		}
		var steps []pipelineStep
		if len(ins.Ids) > 0 {
			ins.Now = now
			steps = append(steps, func(q *db.Queries) error { return q.InsertFanOutDeliveries(ctx, ins) })
		}
		steps = append(steps, func(q *db.Queries) error { return q.DeleteWebhookOutbox(ctx, ids) })
		if err := runPipeline(ctx, tx, steps...); err != nil {
			return err
		}
		taken = len(rows)
		return nil
	})
	var pe *publishError
	if errors.As(err, &pe) {
		return 0, pe.err
	}
	if err != nil {
		return 0, interpretError(err)
	}
	return taken, nil
}

// ClaimDue implements ports.WebhookStore in one statement: up to limit due deliveries of enabled endpoints
// are leased until leaseUntil, each under a fresh token, and returned with their endpoints (secret sealed),
// earliest due first. A delivery whose lease has passed by now is due again, so the deliveries of a
// dispatcher that died are retried by another. Leases are compared with the callers' clocks (now), which
// must therefore roughly agree across processes.
func (s *Webhooks) ClaimDue(ctx context.Context, now, leaseUntil time.Time, limit int) ([]ports.DueDelivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.queries.ClaimDueWebhookDeliveries(ctx, db.ClaimDueWebhookDeliveriesParams{
		LeaseUntil: leaseUntil, Now: now, RowLimit: clampInt32(limit),
	})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]ports.DueDelivery, len(rows))
	for i, r := range rows {
		out[i] = ports.DueDelivery{
			Delivery: deliveryFromRow(db.WebhookDeliveryByIDRow{
				ID:              r.ID,
				OrganizationID:  r.OrganizationID,
				EndpointID:      r.EndpointID,
				EventID:         r.EventID,
				EventType:       r.EventType,
				Status:          r.Status,
				Attempts:        r.Attempts,
				ResponseCode:    r.ResponseCode,
				NextAttemptAt:   r.NextAttemptAt,
				DeliveredAt:     r.DeliveredAt,
				CreatedAt:       r.CreatedAt,
				Payload:         r.Payload,
				OriginalEventID: r.OriginalEventID,
			}),
			Endpoint: endpointFromRow(db.WebhookEndpoint{
				ID:             r.EndpointID,
				OrganizationID: r.OrganizationID,
				Url:            r.EndpointUrl,
				Enabled:        r.EndpointEnabled,
				EventTypes:     r.EndpointEventTypes,
				Secret:         r.EndpointSecret,
				CreatedAt:      r.EndpointCreatedAt,
			}),
			Lease: r.LeaseToken,
		}
	}
	// RETURNING comes in no particular order.
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Delivery, out[j].Delivery
		if !a.NextRetryAt.Equal(*b.NextRetryAt) {
			return a.NextRetryAt.Before(*b.NextRetryAt)
		}
		return a.ID < b.ID
	})
	return out, nil
}

// RecordAttempts implements ports.WebhookStore in one statement (one transaction) however many results
// there are. A result applies only while the delivery still holds the result's lease (an expired lease
// still counts until another dispatcher has claimed the delivery), so a result without a lease, or for a
// delivery that was never claimed, changes nothing. Each applied result releases the lease and sets
// status, attempts, response code, deliveredAt and (for a blocked result) the blocked reason as given;
// nextRetryAt is kept only for pending and failed results, and one of those without a NextRetryAt is due
// again at its previous due time, so that a dispatcher can hand back a delivery it did not attempt. Results naming no
// delivery (deleted with its endpoint, or a malformed id) are ignored.
func (s *Webhooks) RecordAttempts(ctx context.Context, results []ports.WebhookAttempt) error {
	n := len(results)
	if n == 0 {
		return nil
	}
	p := db.RecordWebhookAttemptsParams{
		Ids:            make([]string, 0, n),
		Leases:         make([]string, 0, n),
		Statuses:       make([]string, 0, n),
		Attempts:       make([]int32, 0, n),
		ResponseCodes:  make([]int32, 0, n),
		HasNext:        make([]bool, 0, n),
		NextAttemptAt:  make([]time.Time, 0, n),
		HasDelivered:   make([]bool, 0, n),
		DeliveredAt:    make([]time.Time, 0, n),
		BlockedReasons: make([]string, 0, n),
	}
	for _, r := range results {
		if _, err := uuid.Parse(r.DeliveryID); err != nil {
			continue // it cannot name a row, and would fail the statement for every other result
		}
		p.Ids = append(p.Ids, r.DeliveryID)
		p.Leases = append(p.Leases, r.Lease)
		p.Statuses = append(p.Statuses, r.Status)
		p.Attempts = append(p.Attempts, clampInt32(max(r.Attempts, 0)))
		p.ResponseCodes = append(p.ResponseCodes, clampInt32(max(r.ResponseCode, 0)))
		p.HasNext = append(p.HasNext, r.NextRetryAt != nil)
		p.NextAttemptAt = append(p.NextAttemptAt, timeOrZero(r.NextRetryAt))
		p.HasDelivered = append(p.HasDelivered, r.DeliveredAt != nil)
		p.DeliveredAt = append(p.DeliveredAt, timeOrZero(r.DeliveredAt))
		p.BlockedReasons = append(p.BlockedReasons, blockedReason(r.Status, r.BlockedReason))
	}
	if len(p.Ids) == 0 {
		return nil
	}
	return interpretError(s.queries.RecordWebhookAttempts(ctx, p))
}

func endpointFromRow(r db.WebhookEndpoint) ports.WebhookEndpoint {
	return ports.WebhookEndpoint{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		URL:            r.Url,
		Enabled:        r.Enabled,
		EventTypes:     r.EventTypes,
		Secret:         r.Secret,
		CreatedAt:      r.CreatedAt.UTC(),
	}
}

func deliveryFromRow(r db.WebhookDeliveryByIDRow) ports.WebhookDelivery {
	return ports.WebhookDelivery{
		ID:              r.ID,
		OrganizationID:  r.OrganizationID,
		EndpointID:      r.EndpointID,
		EventID:         r.EventID,
		EventType:       r.EventType,
		Status:          r.Status,
		Attempts:        int(r.Attempts),
		ResponseCode:    int(r.ResponseCode),
		NextRetryAt:     utcPtr(r.NextAttemptAt),
		DeliveredAt:     utcPtr(r.DeliveredAt),
		CreatedAt:       r.CreatedAt.UTC(),
		Payload:         r.Payload,
		OriginalEventID: r.OriginalEventID,
		BlockedReason:   r.BlockedReason,
	}
}

// blockedReason is what the blocked_reason column holds: the refusal for a blocked delivery, nothing (NULL)
// in every other state, so a reason never outlives the state it explains.
func blockedReason(status, reason string) string {
	if status != ports.WebhookBlocked {
		return ""
	}
	return reason
}

// nonNil keeps an absent payload from reaching the NOT NULL column as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
