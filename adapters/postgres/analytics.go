package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var (
	_ ports.AnalyticsStore       = (*Analytics)(nil)
	_ ports.AnalyticsEventSource = (*Analytics)(nil)
)

// Analytics is the embedded analytics store (ports.AnalyticsStore) over the tables of migration 00022, and
// the PostgreSQL event outbox the pipeline reads (ports.AnalyticsEventSource). Safe for concurrent use.
type Analytics struct{ shared }

// Analytics returns the analytics store over the Store's pool.
func (s *Store) Analytics() *Analytics {
	return &Analytics{shared{pool: s.pool, queries: s.Accounts.queries}}
}

// InsertRequests implements ports.AnalyticsStore in one statement; a row whose (organization, time, id)
// is already stored is skipped.
func (s *Analytics) InsertRequests(ctx context.Context, rows []ports.RequestLog) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	var (
		org, id, method, route, path, key, user, ua, ip, rid, reqBody, respBody = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		at      = make([]time.Time, n)
		status  = make([]int32, n)
		latency = make([]int64, n)
	)
	for i, r := range rows {
		if !isUUID(r.OrganizationID) || !isUUID(r.ID) {
			return fmt.Errorf("postgres: request log %q of organization %q: ids must be UUIDs", r.ID, r.OrganizationID)
		}
		org[i], id[i], at[i] = r.OrganizationID, r.ID, r.OccurredAt.UTC()
		method[i], route[i], path[i], status[i] = r.Method, r.Route, r.Path, int32(r.Status)
		latency[i] = r.Latency.Microseconds()
		key[i], user[i], ua[i], ip[i], rid[i] = r.APIKeyID, r.UserID, r.UserAgent, r.ClientIP, r.RequestID
		reqBody[i], respBody[i] = r.RequestBody, r.ResponseBody
	}
	_, err := s.pool.Exec(ctx, `
INSERT INTO analytics_requests (organization_id, id, occurred_at, method, route, path, status, latency_us,
    api_key_id, user_id, user_agent, client_ip, request_id, request_body, response_body)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
    $7::int[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[])
ON CONFLICT DO NOTHING`,
		org, id, at, method, route, path, status, latency, key, user, ua, ip, rid, reqBody, respBody)
	if err != nil {
		return interpretError(err)
	}
	return nil
}

// rollupsFromDims adds the rows of a CTE named dims (organization_id, domain, tag, occurred_at, type) to the
// hourly rollups, one count per counted event type, in key order (so concurrent writers lock rollup rows in
// the same order).
const rollupsFromDims = `
INSERT INTO analytics_rollups AS r (organization_id, domain, tag, bucket, sent, delivered, bounced, complained,
    opened, clicked, failed, delayed)
SELECT organization_id, domain, tag, date_trunc('hour', occurred_at, 'UTC') AS bucket,
    count(*) FILTER (WHERE type = 'email.sent'),
    count(*) FILTER (WHERE type = 'email.delivered'),
    count(*) FILTER (WHERE type = 'email.bounced'),
    count(*) FILTER (WHERE type = 'email.complained'),
    count(*) FILTER (WHERE type = 'email.opened'),
    count(*) FILTER (WHERE type = 'email.clicked'),
    count(*) FILTER (WHERE type = 'email.failed'),
    count(*) FILTER (WHERE type = 'email.delivery_delayed')
FROM dims
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
ON CONFLICT (organization_id, domain, tag, bucket) DO UPDATE SET
    sent = r.sent + EXCLUDED.sent, delivered = r.delivered + EXCLUDED.delivered,
    bounced = r.bounced + EXCLUDED.bounced, complained = r.complained + EXCLUDED.complained,
    opened = r.opened + EXCLUDED.opened, clicked = r.clicked + EXCLUDED.clicked,
    failed = r.failed + EXCLUDED.failed, delayed = r.delayed + EXCLUDED.delayed`

// InsertEvents implements ports.AnalyticsStore: the events and the hourly rollups they add to, in one
// statement, so a rollup counts exactly the events stored. An event already stored adds nothing.
func (s *Analytics) InsertEvents(ctx context.Context, rows []ports.AnalyticsEvent) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	id, org, typ, msg, domain := make([]string, n), make([]string, n), make([]string, n),
		make([]*string, n), make([]string, n)
	var tagOf []int32 // the row (1-based) each tag belongs to
	var tags []string
	at := make([]time.Time, n)
	for i, e := range rows {
		if !isUUID(e.OrganizationID) || !isUUID(e.ID) {
			return fmt.Errorf("postgres: analytics event %q of organization %q: ids must be UUIDs", e.ID, e.OrganizationID)
		}
		id[i], org[i], typ[i], domain[i], at[i] = e.ID, e.OrganizationID, e.Type, e.Domain, e.OccurredAt.UTC()
		if e.MessageID != "" {
			m := e.MessageID
			msg[i] = &m
		}
		for _, t := range e.Tags {
			tagOf, tags = append(tagOf, int32(i+1)), append(tags, t)
		}
	}
	_, err := s.pool.Exec(ctx, `
WITH tg AS (
    SELECT n, array_agg(tag ORDER BY k) AS tags
    FROM unnest($7::int[], $8::text[]) WITH ORDINALITY AS t (n, tag, k) GROUP BY n
), ins AS (
    INSERT INTO analytics_events (id, organization_id, occurred_at, type, message_id, domain, tags)
    SELECT i.id, i.org, i.at, i.type, i.msg, i.domain, coalesce(tg.tags, '{}')
    FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $5::uuid[], $6::text[])
        WITH ORDINALITY AS i (id, org, at, type, msg, domain, n)
    LEFT JOIN tg ON tg.n = i.n
    ON CONFLICT DO NOTHING
    RETURNING organization_id, occurred_at, type, domain, tags
), dims AS (
    SELECT organization_id, '' AS domain, '' AS tag, occurred_at, type FROM ins
    UNION ALL SELECT organization_id, domain, '', occurred_at, type FROM ins WHERE domain <> ''
    UNION ALL SELECT organization_id, '', t, occurred_at, type FROM ins, unnest(tags) AS t
)
`+rollupsFromDims,
		id, org, at, typ, msg, domain, tagOf, tags)
	if err != nil {
		return interpretError(err)
	}
	return nil
}

const requestColumns = `id, organization_id, occurred_at, method, route, path, status, latency_us, api_key_id,
    user_id, user_agent, client_ip, request_id, request_body, response_body`

func scanRequest(row pgx.Row) (ports.RequestLog, error) {
	var r ports.RequestLog
	var status int32
	var latency int64
	err := row.Scan(&r.ID, &r.OrganizationID, &r.OccurredAt, &r.Method, &r.Route, &r.Path, &status, &latency,
		&r.APIKeyID, &r.UserID, &r.UserAgent, &r.ClientIP, &r.RequestID, &r.RequestBody, &r.ResponseBody)
	r.Status, r.Latency, r.OccurredAt = int(status), time.Duration(latency)*time.Microsecond, r.OccurredAt.UTC()
	return r, err
}

// ListRequests implements ports.AnalyticsStore: newest first, keyset-paged on (time, id) along the
// primary key, with each filter a parameter.
func (s *Analytics) ListRequests(ctx context.Context, organizationID string, f ports.LogFilter, q ports.PageQuery) (ports.Page[ports.RequestLog], error) {
	limit, beforeAt, beforeID, err := pageBounds(q)
	if err != nil {
		return ports.Page[ports.RequestLog]{}, err
	}
	if !isUUID(organizationID) {
		return ports.Page[ports.RequestLog]{Data: []ports.RequestLog{}}, nil
	}
	args := []any{organizationID, beforeAt, beforeID}
	where := []string{"organization_id = $1", "(occurred_at, id) < ($2, $3::uuid)"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if !f.From.IsZero() {
		add("occurred_at >= ?", f.From)
	}
	if !f.To.IsZero() {
		add("occurred_at < ?", f.To)
	}
	if f.Method != "" {
		add("method = ?", f.Method)
	}
	if f.Status != 0 {
		add("status = ?", f.Status)
	}
	if f.StatusClass != 0 {
		add("status / 100 = ?", f.StatusClass)
	}
	if f.Route != "" {
		add("route = ?", f.Route)
	}
	if f.APIKeyID != "" {
		add("api_key_id = ?", f.APIKeyID)
	}
	if f.Search != "" {
		add(`path ILIKE '%' || ? || '%'`, likeEscape(f.Search))
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, `SELECT `+requestColumns+` FROM analytics_requests WHERE `+
		strings.Join(where, " AND ")+` ORDER BY occurred_at DESC, id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return ports.Page[ports.RequestLog]{}, listError(err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ports.RequestLog, error) { return scanRequest(r) })
	if err != nil {
		return ports.Page[ports.RequestLog]{}, listError(err)
	}
	return pageOf(list, limit, func(r ports.RequestLog) ports.RequestLog { return r },
		func(r ports.RequestLog) (time.Time, string) { return r.OccurredAt, r.ID }), nil
}

// likeEscape makes s match itself literally inside ILIKE's pattern.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// GetRequest implements ports.AnalyticsStore.
func (s *Analytics) GetRequest(ctx context.Context, organizationID, id string) (ports.RequestLog, error) {
	if !isUUID(organizationID) || !isUUID(id) {
		return ports.RequestLog{}, ports.NotFound("Log not found")
	}
	r, err := scanRequest(s.pool.QueryRow(ctx, `SELECT `+requestColumns+
		` FROM analytics_requests WHERE organization_id = $1 AND id = $2`, organizationID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ports.RequestLog{}, ports.NotFound("Log not found")
	}
	if err != nil {
		return ports.RequestLog{}, interpretError(err)
	}
	return r, nil
}

// Summarize implements ports.AnalyticsStore from the hourly rollups alone, summed into the query's
// buckets; buckets without events are returned with zero counts.
func (s *Analytics) Summarize(ctx context.Context, organizationID string, q ports.AnalyticsQuery) (ports.AnalyticsSummary, error) {
	return summarize(q, func(from, to time.Time, unit string) (map[time.Time]ports.AnalyticsCounts, error) {
		out := map[time.Time]ports.AnalyticsCounts{}
		if !isUUID(organizationID) {
			return out, nil
		}
		rows, err := s.pool.Query(ctx, `
SELECT date_trunc($6, bucket, 'UTC'), sum(sent), sum(delivered), sum(bounced), sum(complained), sum(opened),
    sum(clicked), sum(failed), sum(delayed)
FROM analytics_rollups
WHERE organization_id = $1 AND domain = $2 AND tag = $3 AND bucket >= $4 AND bucket < $5
GROUP BY 1`, organizationID, q.Domain, q.Tag, from, to, unit)
		if err != nil {
			return nil, interpretError(err)
		}
		defer rows.Close()
		for rows.Next() {
			var at time.Time
			var c ports.AnalyticsCounts
			if err := rows.Scan(&at, &c.Sent, &c.Delivered, &c.Bounced, &c.Complained, &c.Opened, &c.Clicked,
				&c.Failed, &c.Delayed); err != nil {
				return nil, interpretError(err)
			}
			out[at.UTC()] = c
		}
		return out, interpretError(rows.Err())
	})
}

// summarize aligns the query to its buckets, reads the counts per bucket start and fills in the buckets
// without events and the totals.
func summarize(q ports.AnalyticsQuery, read func(from, to time.Time, unit string) (map[time.Time]ports.AnalyticsCounts, error)) (ports.AnalyticsSummary, error) {
	unit := "hour"
	if q.Bucket >= 24*time.Hour {
		q.Bucket, unit = 24*time.Hour, "day"
	} else {
		q.Bucket = time.Hour
	}
	from, to := q.From.UTC().Truncate(q.Bucket), q.To.UTC()
	if !to.After(from) {
		return ports.AnalyticsSummary{Buckets: []ports.AnalyticsBucket{}}, nil
	}
	counts, err := read(from, to, unit)
	if err != nil {
		return ports.AnalyticsSummary{}, err
	}
	sum := ports.AnalyticsSummary{Buckets: []ports.AnalyticsBucket{}}
	for at := from; at.Before(to); at = at.Add(q.Bucket) {
		c := counts[at]
		sum.Buckets = append(sum.Buckets, ports.AnalyticsBucket{Start: at, AnalyticsCounts: c})
		sum.Totals.Sent += c.Sent
		sum.Totals.Delivered += c.Delivered
		sum.Totals.Bounced += c.Bounced
		sum.Totals.Complained += c.Complained
		sum.Totals.Opened += c.Opened
		sum.Totals.Clicked += c.Clicked
		sum.Totals.Failed += c.Failed
		sum.Totals.Delayed += c.Delayed
	}
	return sum, nil
}
