package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

// errAlreadyApplied rolls back an application whose job id was applied before.
var errAlreadyApplied = errors.New("postgres: delivery already applied")

// ApplyDelivery implements ports.DeliveryStore, once per job id: the job id goes into applied_jobs first,
// and when it is already there (a redelivered job, or a concurrent application of the same job, which this
// one waits for) nothing is written and applied is false.
//
// The message row is then locked, so applications of different jobs of one message (one job per
// recipient domain) run one after the other. That is what makes a.MessageStatus == "" safe: the store then
// reads every recipient's state after this job's updates, under the lock, and derives the message status
// with ports.DeriveMessageStatus. A status the caller computed before the transaction may be stale when
// another job of the same message is applied concurrently.
//
// Then recipient statuses, the message status, events, suppressions (idempotent as in AddSuppression) and
// the retry job are written, all in the same transaction. Errors: not_found when the message is not the
// organization's.
//
// Concurrent calls share transactions (see applyGroup): every commit waits for a WAL flush, and the MTA
// reports one job after another from many workers. Each call is still answered on its own: applied once per
// job id, not_found for its own message only, and a group that fails as a whole is written again one
// application at a time, so one bad application never fails the others. Once queued, an application is
// written even if ctx ends while it waits; ApplyDelivery then returns ctx's error.
func (s *Delivery) ApplyDelivery(ctx context.Context, a ports.DeliveryApplication) (bool, error) {
	return s.apply(ctx, &pendingApply{ctx: ctx, a: a, done: make(chan applyResult, 1)})
}

// ApplyDeliveryReport implements ports.DeliveryStore: ApplyDelivery, with decide called inside the
// transaction on the recipients read under the message's lock (in the round trip that takes the lock). A
// job applied before does not call decide.
func (s *Delivery) ApplyDeliveryReport(ctx context.Context, jobID, orgID, messageID string, decide func([]ports.Recipient) ports.DeliveryApplication) (bool, error) {
	a := ports.DeliveryApplication{JobID: jobID, OrganizationID: orgID, MessageID: messageID}
	return s.apply(ctx, &pendingApply{ctx: ctx, a: a, decide: decide, done: make(chan applyResult, 1)})
}

// apply queues p for the next group and waits for its answer.
func (s *Delivery) apply(ctx context.Context, p *pendingApply) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.applies.add(p)
	select {
	case r := <-p.done:
		return r.applied, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// applyOne is ApplyDelivery (or, with decide, ApplyDeliveryReport) for one application in a transaction of
// its own.
func (s *Delivery) applyOne(ctx context.Context, a ports.DeliveryApplication, decide func([]ports.Recipient) ports.DeliveryApplication) (bool, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var inserted int64
		var current []ports.Recipient
		steps := []pipelineStep{
			func(q *db.Queries) error { return q.ProbePlans(ctx) },
			func(q *db.Queries) (err error) {
				inserted, err = q.InsertAppliedJob(ctx, a.JobID)
				return err
			},
			func(q *db.Queries) error {
				_, err := q.LockMessage(ctx, db.LockMessageParams{OrganizationID: a.OrganizationID, ID: a.MessageID})
				return err
			},
		}
		if decide != nil {
			steps = append(steps, func(q *db.Queries) error {
				rows, err := q.RecipientsByMessage(ctx, db.RecipientsByMessageParams{OrganizationID: a.OrganizationID, MessageID: a.MessageID})
				current = recipientsFromRows(rows)
				return err
			})
		}
		if err := runPipeline(ctx, tx, steps...); err != nil {
			return err
		}
		if inserted == 0 {
			return errAlreadyApplied
		}
		if decide != nil {
			var err error
			if a, err = decided(a, decide, current); err != nil {
				return err
			}
		}

		steps = nil
		if len(a.Recipients) > 0 {
			p := db.SetRecipientStatusesParams{OrganizationID: a.OrganizationID, MessageID: a.MessageID}
			for id, status := range a.Recipients {
				p.Ids = append(p.Ids, id)
				p.Statuses = append(p.Statuses, string(status))
			}
			steps = append(steps, func(q *db.Queries) error { return q.SetRecipientStatuses(ctx, p) })
		}
		if a.MessageStatus != "" {
			steps = append(steps, setMessageStatusStep(ctx, a, a.MessageStatus))
		}
		var recipientStatuses []string
		if a.MessageStatus == "" {
			steps = append(steps, func(q *db.Queries) (err error) {
				recipientStatuses, err = q.RecipientStatuses(ctx, db.RecipientStatusesParams{OrganizationID: a.OrganizationID, MessageID: a.MessageID})
				return err
			})
		}
		if len(a.Events) > 0 {
			p := insertEventsParams(eventsAbout(a.Events, a.OrganizationID, a.MessageID, ""))
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(a.Suppressions) > 0 {
			p := insertSuppressionsParams(a.Suppressions)
			steps = append(steps, func(q *db.Queries) error { return q.InsertSuppressions(ctx, p) })
		}
		if len(a.Bounces) > 0 {
			p := insertBouncesParams(a.Bounces, a.OrganizationID, a.MessageID)
			steps = append(steps, func(q *db.Queries) error { return q.InsertBounces(ctx, p) })
		}
		if a.Retry != nil {
			p := insertOutboxParams([]ports.DeliveryJob{jobOf(*a.Retry, a.OrganizationID, a.MessageID)})
			steps = append(steps, func(q *db.Queries) error { return q.InsertOutboxJobs(ctx, p) })
		}
		if len(steps) > 0 {
			if err := runPipeline(ctx, tx, steps...); err != nil {
				return err
			}
		}
		if a.MessageStatus == "" {
			statuses := make([]ports.MessageStatus, len(recipientStatuses))
			for i, st := range recipientStatuses {
				statuses[i] = ports.MessageStatus(st)
			}
			if derived := ports.DeriveMessageStatus(statuses); derived != "" {
				return runPipeline(ctx, tx, setMessageStatusStep(ctx, a, derived))
			}
		}
		return nil
	})
	if errors.Is(err, errAlreadyApplied) {
		return false, nil
	}
	if err != nil {
		return false, interpretErrorFor("message", err)
	}
	return true, nil
}

func setMessageStatusStep(ctx context.Context, a ports.DeliveryApplication, status ports.MessageStatus) pipelineStep {
	return func(q *db.Queries) error {
		return q.SetMessageStatus(ctx, db.SetMessageStatusParams{Status: string(status), OrganizationID: a.OrganizationID, ID: a.MessageID})
	}
}

// Bounds of one group of applications written together.
const (
	// maxApplyGroup bounds the applications of one transaction, so that its statements' arrays stay small
	// and the message locks it holds are few.
	maxApplyGroup = 64
	// applyGroupTimeout bounds a group's transaction, which runs detached from its callers' contexts.
	applyGroupTimeout = 30 * time.Second
	// applyLinger is how long the writer waits after a group of several applications before it takes the
	// next (combiner.linger): under a steady stream of outcomes the groups grow from about 8 to about 10-20,
	// which took a sixth of PostgreSQL's CPU per message off the end-to-end benchmark
	// (docs/benchmarks.md). Only the recording of an outcome waits, never the SMTP session, and a lone
	// outcome is written at once.
	applyLinger = 3 * time.Millisecond
)

// pendingApply is one ApplyDelivery call waiting for its group to be written.
type pendingApply struct {
	ctx context.Context
	a   ports.DeliveryApplication // with decide: only its ids, the rest comes from decide
	// decide, when set, decides the application from the message's recipients under the lock.
	decide func([]ports.Recipient) ports.DeliveryApplication
	done   chan applyResult
}

// decided runs decide on current and returns its application for the job, message and organization of a.
// decide is the caller's code running on a group's writer: a panic in it becomes an error, which fails the
// group (whose applications are then written one at a time) and then only that application.
func decided(a ports.DeliveryApplication, decide func([]ports.Recipient) ports.DeliveryApplication, current []ports.Recipient) (d ports.DeliveryApplication, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("postgres: deciding the application of job %s panicked: %v", a.JobID, p)
		}
	}()
	d = decide(current)
	d.JobID, d.OrganizationID, d.MessageID = a.JobID, a.OrganizationID, a.MessageID
	return d, nil
}

type applyResult struct {
	applied bool
	err     error
}

// writeApplies writes one group taken from the combiner. Applications of one message (or one job id) are
// split into rounds written one after the other, so that a transaction holds at most one application per
// message: each then sees the recipients' states the one before it left, as with one transaction each.
func (s *Delivery) writeApplies(group []*pendingApply) {
	live := make([]*pendingApply, 0, len(group))
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- applyResult{err: err} // the caller has gone; nothing is written for it
			continue
		}
		live = append(live, p)
	}
	for len(live) > 0 {
		round := make([]*pendingApply, 0, len(live))
		var later []*pendingApply
		seen := make(map[string]bool, 2*len(live))
		for _, p := range live {
			if seen[p.a.MessageID] || seen[p.a.JobID] {
				later = append(later, p)
				continue
			}
			seen[p.a.MessageID], seen[p.a.JobID] = true, true
			round = append(round, p)
		}
		s.applyGroup(round)
		live = later
	}
}

// applyGroup writes a round of applications of distinct messages and job ids in one transaction and
// answers each. When the transaction fails as a whole (a deadlock with another process, an application the
// database refuses), each application is written again in a transaction of its own, so that each caller
// gets its own answer.
func (s *Delivery) applyGroup(group []*pendingApply) {
	if len(group) == 1 {
		p := group[0]
		applied, err := s.applyOne(p.ctx, p.a, p.decide)
		p.done <- applyResult{applied: applied, err: err}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(group[0].ctx), applyGroupTimeout)
	defer cancel()
	results, err := s.applyMany(ctx, group)
	if err != nil {
		for _, p := range group {
			applied, err := s.applyOne(p.ctx, p.a, p.decide)
			p.done <- applyResult{applied: applied, err: err}
		}
		return
	}
	for i, p := range group {
		p.done <- results[i]
	}
}

// errMessageVanished fails a group whose recorded job names a message the lock did not find (deleted
// between the two statements); the group is then written one application at a time.
var errMessageVanished = errors.New("postgres: message of a recorded job not found under lock")

// applyMany is applyOne for several applications of distinct messages and job ids: the same statements,
// each over all of them, in three round trips and one commit. results[i] answers group[i].
func (s *Delivery) applyMany(ctx context.Context, group []*pendingApply) ([]applyResult, error) {
	n := len(group)
	ins := db.InsertAppliedJobsParams{JobIds: make([]string, n), OrganizationIds: make([]string, n), MessageIds: make([]string, n)}
	lock := db.LockMessagesParams{OrganizationIds: make([]string, n), Ids: make([]string, n)}
	for i, p := range group {
		ins.JobIds[i], ins.OrganizationIds[i], ins.MessageIds[i] = p.a.JobID, p.a.OrganizationID, p.a.MessageID
		lock.OrganizationIds[i], lock.Ids[i] = p.a.OrganizationID, p.a.MessageID
	}
	var toDecide db.OutboundRecipientsParams
	for _, p := range group {
		if p.decide != nil {
			toDecide.OrganizationIds = append(toDecide.OrganizationIds, p.a.OrganizationID)
			toDecide.MessageIds = append(toDecide.MessageIds, p.a.MessageID)
		}
	}
	var results []applyResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		results = make([]applyResult, n)
		var inserted []string
		var locked []db.LockMessagesRow
		var currentRows []db.OutboundRecipientsRow
		steps := []pipelineStep{
			func(q *db.Queries) error { return q.ProbePlans(ctx) },
			func(q *db.Queries) (err error) {
				inserted, err = q.InsertAppliedJobs(ctx, ins)
				return err
			},
			func(q *db.Queries) (err error) {
				locked, err = q.LockMessages(ctx, lock)
				return err
			},
		}
		if len(toDecide.MessageIds) > 0 {
			// After the lock in the same pipeline, so the recipients are read under it.
			steps = append(steps, func(q *db.Queries) (err error) {
				currentRows, err = q.OutboundRecipients(ctx, toDecide)
				return err
			})
		}
		if err := runPipeline(ctx, tx, steps...); err != nil {
			return err
		}
		current := make(map[string][]ports.Recipient, len(toDecide.MessageIds))
		for _, row := range currentRows {
			r := row.Recipient
			current[r.MessageID] = append(current[r.MessageID], recipientsFromRows([]db.Recipient{r})...)
		}
		fresh := make(map[string]bool, len(inserted))
		for _, id := range inserted {
			fresh[id] = true
		}
		status := make(map[string]ports.MessageStatus, len(locked))
		for _, m := range locked {
			status[m.ID] = ports.MessageStatus(m.Status)
		}

		var (
			orgOf      = make(map[string]string, n) // message id → organization, of the applications written
			recipients db.SetRecipientStatusesOfMessagesParams
			derive     db.RecipientStatusesOfMessagesParams
			statuses   db.SetMessageStatusesParams
			events     []ports.Event
			sups       []ports.Suppression
			bounces    []ports.Bounce
			retries    []ports.DeliveryJob
		)
		for i, p := range group {
			a := p.a
			_, found := status[a.MessageID]
			switch {
			case fresh[a.JobID] && !found:
				return errMessageVanished
			case !found:
				results[i].err = interpretErrorFor("message", pgx.ErrNoRows)
				continue
			case !fresh[a.JobID]:
				continue // applied before: applied stays false
			}
			if p.decide != nil {
				var err error
				if a, err = decided(a, p.decide, current[a.MessageID]); err != nil {
					return err
				}
			}
			results[i].applied = true
			orgOf[a.MessageID] = a.OrganizationID
			ids := make([]string, 0, len(a.Recipients))
			for id := range a.Recipients {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				recipients.OrganizationIds = append(recipients.OrganizationIds, a.OrganizationID)
				recipients.MessageIds = append(recipients.MessageIds, a.MessageID)
				recipients.Ids = append(recipients.Ids, id)
				recipients.Statuses = append(recipients.Statuses, string(a.Recipients[id]))
			}
			if a.MessageStatus == "" {
				derive.OrganizationIds = append(derive.OrganizationIds, a.OrganizationID)
				derive.MessageIds = append(derive.MessageIds, a.MessageID)
			} else if a.MessageStatus != status[a.MessageID] {
				statuses.OrganizationIds = append(statuses.OrganizationIds, a.OrganizationID)
				statuses.Ids = append(statuses.Ids, a.MessageID)
				statuses.Statuses = append(statuses.Statuses, string(a.MessageStatus))
			}
			events = append(events, eventsAbout(a.Events, a.OrganizationID, a.MessageID, "")...)
			sups = append(sups, a.Suppressions...)
			bounces = append(bounces, bouncesAbout(a.Bounces, a.OrganizationID, a.MessageID)...)
			if a.Retry != nil {
				retries = append(retries, jobOf(*a.Retry, a.OrganizationID, a.MessageID))
			}
		}
		if len(orgOf) == 0 {
			return nil
		}

		steps = nil
		if len(recipients.Ids) > 0 {
			steps = append(steps, func(q *db.Queries) error { return q.SetRecipientStatusesOfMessages(ctx, recipients) })
		}
		var states []db.RecipientStatusesOfMessagesRow
		if len(derive.MessageIds) > 0 {
			steps = append(steps, func(q *db.Queries) (err error) {
				states, err = q.RecipientStatusesOfMessages(ctx, derive)
				return err
			})
		}
		if len(events) > 0 {
			p := insertEventsParams(events)
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(sups) > 0 {
			p := insertSuppressionsParams(sups)
			steps = append(steps, func(q *db.Queries) error { return q.InsertSuppressions(ctx, p) })
		}
		if len(bounces) > 0 {
			p := insertBouncesParams(bounces, "", "")
			steps = append(steps, func(q *db.Queries) error { return q.InsertBounces(ctx, p) })
		}
		if len(retries) > 0 {
			p := insertOutboxParams(retries)
			steps = append(steps, func(q *db.Queries) error { return q.InsertOutboxJobs(ctx, p) })
		}
		if len(steps) > 0 {
			if err := runPipeline(ctx, tx, steps...); err != nil {
				return err
			}
		}

		// states holds each derived message's recipients, ordered by message then position.
		for i := 0; i < len(states); {
			j := i
			var all []ports.MessageStatus
			for ; j < len(states) && states[j].MessageID == states[i].MessageID; j++ {
				all = append(all, ports.MessageStatus(states[j].Status))
			}
			id := states[i].MessageID
			if derived := ports.DeriveMessageStatus(all); derived != "" && derived != status[id] {
				statuses.OrganizationIds = append(statuses.OrganizationIds, orgOf[id])
				statuses.Ids = append(statuses.Ids, id)
				statuses.Statuses = append(statuses.Statuses, string(derived))
			}
			i = j
		}
		if len(statuses.Ids) > 0 {
			return runPipeline(ctx, tx, func(q *db.Queries) error { return q.SetMessageStatuses(ctx, statuses) })
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// PruneAppliedJobs implements ports.DeliveryStore: it forgets job ids applied before before, at most limit
// per call, so applied_jobs stays as small as the window in which a job can be delivered again.
func (s *Delivery) PruneAppliedJobs(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := s.queries.PruneAppliedJobs(ctx, db.PruneAppliedJobsParams{Before: before, BatchLimit: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return 0, interpretError(err)
	}
	return int(n), nil
}
