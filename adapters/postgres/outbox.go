package postgres

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.Outbox = (*Outbox)(nil)

// Outbox is the PostgreSQL delivery outbox: jobs written with their messages, relayed to the queue
// (ports.Outbox). Safe for concurrent use.
type Outbox struct {
	shared
	// added receives a value after the send path or the scheduler's promotion of this Store committed jobs
	// to delivery_outbox (ports.OutboxSignal); nil in an Outbox made without New.
	added chan struct{}
}

var _ ports.OutboxSignal = (*Outbox)(nil)

// OutboxAdded implements ports.OutboxSignal.
func (s *Outbox) OutboxAdded() <-chan struct{} { return s.added }

// signalOutbox leaves a value in added unless one is still unread, which already stands for the new jobs.
func signalOutbox(added chan struct{}) {
	select {
	case added <- struct{}{}:
	default:
	}
}

// RelayDue implements ports.Outbox. In one transaction it deletes up to limit jobs whose not_before has
// passed (oldest first, FOR UPDATE SKIP LOCKED, so concurrent relays take disjoint rows), hands them to
// publish and commits only if publish succeeded; otherwise the rows stay for the next run. A crash between
// publish and commit publishes the jobs again later: delivery is at least once, and the outcome of a job
// id is applied once (ApplyDelivery).
func (s *Outbox) RelayDue(ctx context.Context, now time.Time, limit int, publish func(context.Context, []ports.DeliveryJob) error) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	relayed := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rows []db.DeliveryOutbox
		err := runPipeline(ctx, tx,
			func(q *db.Queries) error { return q.ProbePlans(ctx) },
			func(q *db.Queries) (err error) {
				rows, err = q.TakeDueOutboxJobs(ctx, db.TakeDueOutboxJobsParams{Now: now, RowLimit: clampInt32(limit)})
				return err
			})
		if err != nil || len(rows) == 0 {
			return err
		}
		jobs := make([]ports.DeliveryJob, len(rows))
		for i, r := range rows {
			jobs[i] = jobFromFields(r.ID, r.OrganizationID, r.MessageID, r.Domain, r.RecipientIds, r.Attempt, r.FirstQueuedAt, r.NotBefore)
			jobs[i].Bulk = r.Bulk
		}
		sort.Slice(jobs, func(i, j int) bool {
			if !jobs[i].NotBefore.Equal(jobs[j].NotBefore) {
				return jobs[i].NotBefore.Before(jobs[j].NotBefore)
			}
			return jobs[i].ID < jobs[j].ID
		})
		if err := publish(ctx, jobs); err != nil {
			return &publishError{err}
		}
		relayed = len(jobs)
		return nil
	})
	var pe *publishError
	if errors.As(err, &pe) {
		return 0, pe.err
	}
	if err != nil {
		return 0, interpretError(err)
	}
	return relayed, nil
}

// EnqueueRetry implements ports.Outbox: the job waits in the outbox until its NotBefore.
func (s *Outbox) EnqueueRetry(ctx context.Context, job ports.DeliveryJob) error {
	return interpretError(s.queries.InsertOutboxJobs(ctx, insertOutboxParams([]ports.DeliveryJob{job})))
}

// publishError carries publish's own error through the transaction unchanged, so the caller sees what the
// queue said rather than a database error.
type publishError struct{ err error }

func (e *publishError) Error() string { return e.err.Error() }
func (e *publishError) Unwrap() error { return e.err }

// eventsAbout fills in what events about one subject leave empty: their organization and the message or
// domain they are about. The caller's slice is not changed.
func eventsAbout(events []ports.Event, orgID, messageID, domainID string) []ports.Event {
	out := make([]ports.Event, len(events))
	for i, e := range events {
		if e.OrganizationID == "" {
			e.OrganizationID = orgID
		}
		if e.MessageID == "" {
			e.MessageID = messageID
		}
		if e.DomainID == "" {
			e.DomainID = domainID
		}
		out[i] = e
	}
	return out
}

// jobOf fills in the organization and message a job of one message leaves empty.
func jobOf(j ports.DeliveryJob, orgID, messageID string) ports.DeliveryJob {
	if j.OrganizationID == "" {
		j.OrganizationID = orgID
	}
	if j.MessageID == "" {
		j.MessageID = messageID
	}
	return j
}

// insertEventsParams lays events out as parallel arrays. Absent ids travel as "" and are stored as NULL;
// a missing event id is generated.
func insertEventsParams(events []ports.Event) db.InsertEventsParams {
	n := len(events)
	p := db.InsertEventsParams{
		Ids:               make([]string, n),
		OrganizationIds:   make([]string, n),
		Types:             make([]string, n),
		MessageIds:        make([]string, n),
		RecipientIds:      make([]string, n),
		DomainIds:         make([]string, n),
		HasResponses:      make([]bool, n),
		ProviderResponses: make([]string, n),
		OccurredAt:        make([]time.Time, n),
		Urls:              make([]string, n),
		LinkIds:           make([]string, n),
		BounceClasses:     make([]string, n),
	}
	for i, e := range events {
		p.Ids[i] = idOrNew(e.ID)
		p.OrganizationIds[i] = e.OrganizationID
		p.Types[i] = e.Type
		p.MessageIds[i] = e.MessageID
		p.RecipientIds[i] = e.RecipientID
		p.DomainIds[i] = e.DomainID
		if e.ProviderResponse != nil {
			p.HasResponses[i] = true
			p.ProviderResponses[i] = *e.ProviderResponse
		}
		p.OccurredAt[i] = e.OccurredAt
		p.Urls[i] = e.URL
		p.LinkIds[i] = e.LinkID
		p.BounceClasses[i] = e.BounceClass
	}
	return p
}

// insertOutboxParams lays jobs out as parallel arrays. Each job's recipient ids travel joined with commas
// because PostgreSQL arrays of arrays must be rectangular; UUIDs never contain a comma.
func insertOutboxParams(jobs []ports.DeliveryJob) db.InsertOutboxJobsParams {
	return db.InsertOutboxJobsParams(jobArrays(jobs))
}

// jobColumns is the column layout shared by the outbox and the queue inserts.
type jobColumns struct {
	Ids             []string
	OrganizationIds []string
	MessageIds      []string
	Domains         []string
	RecipientIds    []string
	Attempts        []int32
	FirstQueuedAt   []time.Time
	NotBefore       []time.Time
	Bulk            []bool
}

func jobArrays(jobs []ports.DeliveryJob) jobColumns {
	n := len(jobs)
	c := jobColumns{
		Ids:             make([]string, n),
		OrganizationIds: make([]string, n),
		MessageIds:      make([]string, n),
		Domains:         make([]string, n),
		RecipientIds:    make([]string, n),
		Attempts:        make([]int32, n),
		FirstQueuedAt:   make([]time.Time, n),
		NotBefore:       make([]time.Time, n),
		Bulk:            make([]bool, n),
	}
	for i, j := range jobs {
		c.Ids[i] = idOrNew(j.ID)
		c.OrganizationIds[i] = j.OrganizationID
		c.MessageIds[i] = j.MessageID
		c.Domains[i] = strings.ToLower(j.Domain)
		c.RecipientIds[i] = strings.Join(j.RecipientIDs, ",")
		c.Attempts[i] = int32(max(j.Attempt, 1))
		c.FirstQueuedAt[i] = j.FirstQueuedAt
		c.NotBefore[i] = j.NotBefore
		c.Bulk[i] = j.Bulk
	}
	return c
}

func jobFromFields(id, orgID, messageID, domain string, recipientIDs []string, attempt int32, firstQueuedAt, notBefore time.Time) ports.DeliveryJob {
	return ports.DeliveryJob{
		ID:             id,
		OrganizationID: orgID,
		MessageID:      messageID,
		Domain:         domain,
		RecipientIDs:   recipientIDs,
		Attempt:        int(attempt),
		FirstQueuedAt:  firstQueuedAt.UTC(),
		NotBefore:      notBefore.UTC(),
	}
}
