package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

// ProbedStatements names the array-driven statements that run after ProbePlans: the send path's inserts,
// the MTA's reads, the outcome writes, the queue's lease and acks and the relay's take.
var ProbedStatements = map[string]func(q *db.Queries){
	"InsertMessageRecipients": func(q *db.Queries) {
		_ = q.InsertMessageRecipients(context.Background(), db.InsertMessageRecipientsParams{})
	},
	"InsertSendEvents": func(q *db.Queries) { _ = q.InsertSendEvents(context.Background(), db.InsertSendEventsParams{}) },
	"InsertSendJobs":   func(q *db.Queries) { _ = q.InsertSendJobs(context.Background(), db.InsertSendJobsParams{}) },
	"InsertSendQueueJobs": func(q *db.Queries) {
		_ = q.InsertSendQueueJobs(context.Background(), db.InsertSendQueueJobsParams{})
	},
	"MeterSends":         func(q *db.Queries) { _, _ = q.MeterSends(context.Background(), db.MeterSendsParams{}) },
	"SendOutcomes":       func(q *db.Queries) { _, _ = q.SendOutcomes(context.Background(), db.SendOutcomesParams{}) },
	"OutboundMessages":   func(q *db.Queries) { _, _ = q.OutboundMessages(context.Background(), db.OutboundMessagesParams{}) },
	"OutboundMessage":    func(q *db.Queries) { _, _ = q.OutboundMessage(context.Background(), db.OutboundMessageParams{}) },
	"OutboundRecipients": func(q *db.Queries) { _, _ = q.OutboundRecipients(context.Background(), db.OutboundRecipientsParams{}) },
	"InsertAppliedJobs":  func(q *db.Queries) { _, _ = q.InsertAppliedJobs(context.Background(), db.InsertAppliedJobsParams{}) },
	"LockMessages":       func(q *db.Queries) { _, _ = q.LockMessages(context.Background(), db.LockMessagesParams{}) },
	"LockMessage":        func(q *db.Queries) { _, _ = q.LockMessage(context.Background(), db.LockMessageParams{}) },
	"SetRecipientStatusesOfMessages": func(q *db.Queries) {
		_ = q.SetRecipientStatusesOfMessages(context.Background(), db.SetRecipientStatusesOfMessagesParams{})
	},
	"RecipientStatusesOfMessages": func(q *db.Queries) {
		_, _ = q.RecipientStatusesOfMessages(context.Background(), db.RecipientStatusesOfMessagesParams{})
	},
	"SetMessageStatuses": func(q *db.Queries) { _ = q.SetMessageStatuses(context.Background(), db.SetMessageStatusesParams{}) },
	"SetMessageStatus":   func(q *db.Queries) { _ = q.SetMessageStatus(context.Background(), db.SetMessageStatusParams{}) },
	"AckJobs":            func(q *db.Queries) { _, _ = q.AckJobs(context.Background(), db.AckJobsParams{}) },
	"TakeDueOutboxJobs":  func(q *db.Queries) { _, _ = q.TakeDueOutboxJobs(context.Background(), db.TakeDueOutboxJobsParams{}) },
	"Lease":              func(q *db.Queries) { _, _ = q.LeaseJobs(context.Background(), db.LeaseJobsParams{}) },
}

var paramPattern = regexp.MustCompile(`\$(\d+)`)

// probedSQL is the text of the named statement of ProbedStatements.
func probedSQL(name string) string {
	rec := &batchRecorder{}
	ProbedStatements[name](db.New(rec))
	return rec.batch.QueuedQueries[0].SQL
}

// nullArgs is the argument list that gives each parameter of sql a NULL, for EXPLAIN EXECUTE.
func nullArgs(sql string) string {
	n := 0
	for _, m := range paramPattern.FindAllStringSubmatch(sql, -1) {
		var k int
		_, _ = fmt.Sscan(m[1], &k)
		n = max(n, k)
	}
	return strings.TrimSuffix(strings.Repeat("NULL,", n), ",")
}

// GenericPlan returns the generic plan PostgreSQL makes for the named statement, with ProbePlans' settings
// first when probe is set (inside a transaction that is rolled back).
func (s *Store) GenericPlan(ctx context.Context, name string, probe bool) (string, error) {
	plans, err := s.genericPlans(ctx, probe, probedSQL(name))
	if err != nil {
		return "", err
	}
	return plans[0], nil
}

// genericPlans returns the generic plan PostgreSQL makes for each statement, every parameter NULL, with
// ProbePlans' settings first when probe is set, inside one transaction that is rolled back.
func (s *Store) genericPlans(ctx context.Context, probe bool, statements ...string) ([]string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if probe {
		if _, err := tx.Exec(ctx, probePlansSQL); err != nil {
			return nil, err
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return nil, err
	}
	plans := make([]string, len(statements))
	for i, sql := range statements {
		if _, err := tx.Exec(ctx, "PREPARE probed AS "+sql); err != nil {
			return nil, err
		}
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE probed("+nullArgs(sql)+")", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		plans[i] = strings.Join(lines, "\n")
		// Prepared statements outlive the transaction: each goes once explained.
		if _, err := tx.Exec(ctx, "DEALLOCATE probed"); err != nil {
			return nil, err
		}
	}
	return plans, nil
}

// ProbePlansTexts returns the statement of the generated ProbePlans, without its name comment, and the
// copy the queue sends in batches it builds by hand.
func ProbePlansTexts() (generated, copied string) {
	rec := &batchRecorder{}
	_ = db.New(rec).ProbePlans(context.Background())
	_, body, _ := strings.Cut(rec.batch.QueuedQueries[0].SQL, "\n")
	return strings.TrimSpace(body), probePlansSQL
}

// IdempotencyLookupPlan is the plan MessagesByIdempotencyKeys gets now, as the store runs it (planned on
// the call, PlanEachCall), for orgID and keys.
func (s *Store) IdempotencyLookupPlan(ctx context.Context, orgID string, keys []string) (string, error) {
	rec := &batchRecorder{}
	_, _ = db.New(rec).MessagesByIdempotencyKeys(ctx, db.MessagesByIdempotencyKeysParams{OrganizationID: orgID, IdempotencyKeys: keys})
	q := rec.batch.QueuedQueries[0]
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := db.New(tx).PlanEachCall(ctx); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+q.SQL, q.Arguments...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// MeterSendsWork runs MeterSends as the send path does (after ProbePlans, in a transaction, here rolled back)
// for ids, each of one unit under one daily meter of the given maximum, and returns the rows its plan nodes
// produced in all (each node's rows times its loops): a measure of the statement's work that does not
// depend on the machine's speed.
func (s *Store) MeterSendsWork(ctx context.Context, orgID string, day time.Time, ids []string, max int64) (int64, error) {
	p := db.MeterSendsParams{OrganizationID: orgID, Metrics: []string{ports.MetricEmailsSentDaily}, Periods: []time.Time{day}, Ids: ids}
	for range ids {
		p.Units = append(p.Units, 1)
		p.Maxes = append(p.Maxes, max)
	}
	rec := &batchRecorder{}
	_, _ = db.New(rec).MeterSends(ctx, p)
	q := rec.batch.QueuedQueries[0]
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := db.New(tx).ProbePlans(ctx); err != nil {
		return 0, err
	}
	if err := db.New(tx).LockUsageMeters(ctx, db.LockUsageMetersParams{OrganizationID: orgID, Metrics: p.Metrics, Periods: p.Periods}); err != nil {
		return 0, err
	}
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "+q.SQL, q.Arguments...).Scan(&plan); err != nil {
		return 0, err
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		return 0, fmt.Errorf("EXPLAIN output: %v", err)
	}
	return doc[0].Plan.work(), nil
}

type planNode struct {
	Rows  float64    `json:"Actual Rows"`
	Loops float64    `json:"Actual Loops"`
	Plans []planNode `json:"Plans"`
}

func (n planNode) work() int64 {
	w := int64(n.Rows * n.Loops)
	for _, c := range n.Plans {
		w += c.work()
	}
	return w
}

// PlansKeptFromNow returns, for each named statement of ProbedStatements, the generic plan a connection
// makes for it now (after ProbePlans, as the store runs it) and then keeps: the plan is made on one
// connection, grow runs, and the plan is explained again on that connection, where PostgreSQL reuses the
// plan it cached unless something invalidated it meanwhile.
func (s *Store) PlansKeptFromNow(ctx context.Context, names []string, grow func() error) (map[string]string, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	args := make([]string, len(names))
	explain := func(i int) (string, error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, probePlansSQL); err != nil {
			return "", err
		}
		rows, err := tx.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE kept%d(%s)", i, args[i]), pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return "", err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		return strings.Join(lines, "\n"), err
	}
	for i, name := range names {
		sql := probedSQL(name)
		args[i] = nullArgs(sql)
		if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE kept%d AS %s", i, sql)); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if _, err := explain(i); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	defer func() { _, _ = conn.Exec(context.Background(), "DEALLOCATE ALL") }()
	if err := grow(); err != nil {
		return nil, err
	}
	plans := make(map[string]string, len(names))
	for i, name := range names {
		plan, err := explain(i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		plans[name] = plan
	}
	return plans, nil
}
