// Package clickhouse is the scale adapter of the analytics store (ports.AnalyticsStore) over ClickHouse's
// native protocol (clickhouse-go/v2). Its SQL runs on Debian's clickhouse-server 18.16 and on current
// ClickHouse, so it avoids what 18.16 lacks: DateTime64 (times are a DateTime plus a microseconds column),
// TTL clauses (retention drops partitions), ILIKE (lower() and position()), insert deduplication of
// non-replicated tables and the Nullable/LowCardinality niceties. Requests and events are ReplacingMergeTree
// tables keyed on the row id. A materialized view adds each inserted event to hourly SummingMergeTree
// rollups that GET /v1/analytics reads with sum() and GROUP BY; because the view counts whatever is
// inserted, an event whose id is already stored is dropped before the insert, so a re-delivered batch is
// counted once.
package clickhouse

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/postmill/postmill/ports"
)

var _ ports.AnalyticsStore = (*Analytics)(nil)

// Analytics is the ClickHouse analytics store, confined to one database. Safe for concurrent use.
type Analytics struct {
	conn driver.Conn
	db   string
}

// Open connects to the ClickHouse server at addr (host:port of the native protocol) and creates the
// database and its tables when missing.
func Open(ctx context.Context, addr, database string) (*Analytics, error) {
	if !validName(database) {
		return nil, fmt.Errorf("clickhouse: database name %q is not [A-Za-z0-9_]+", database)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: open %s: %w", addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse: connect %s: %w", addr, err)
	}
	a := &Analytics{conn: conn, db: database}
	for _, q := range a.schema() {
		if err := conn.Exec(ctx, q); err != nil {
			conn.Close()
			return nil, fmt.Errorf("clickhouse: create schema: %w", err)
		}
	}
	if err := a.createRollups(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse: create rollups: %w", err)
	}
	if err := a.scrubLoggedSeeds(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse: scrub logged TOTP seeds: %w", err)
	}
	return a, nil
}

// loggedSeeds selects the TOTP enrolment answers an older edge logged with the seed inside otpauthUrl
// (PostgreSQL's migration 00046 does the same for its table).
const loggedSeeds = `route = '/v1/auth/2fa/enroll' AND position(response_body, 'otpauth') > 0`

// scrubLoggedSeeds replaces the bodies of such answers, when there are any: a mutation only then, since
// one rewrites the parts it touches.
func (a *Analytics) scrubLoggedSeeds(ctx context.Context) error {
	var n uint64
	if err := a.conn.QueryRow(ctx, `SELECT count() FROM `+a.db+`.requests WHERE `+loggedSeeds).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return a.conn.Exec(ctx, `ALTER TABLE `+a.db+`.requests UPDATE response_body = '[redacted]' WHERE `+loggedSeeds)
}

// Close closes the connection.
func (a *Analytics) Close() error { return a.conn.Close() }

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func (a *Analytics) schema() []string {
	return []string{
		`CREATE DATABASE IF NOT EXISTS ` + a.db,
		`CREATE TABLE IF NOT EXISTS ` + a.db + `.requests (
    organization_id String, id String, occurred_at DateTime, occurred_us UInt32,
    method String, route String, path String, status UInt16, latency_us UInt64,
    api_key_id String, user_id String, user_agent String, client_ip String, request_id String,
    request_body String, response_body String
) ENGINE = ReplacingMergeTree() PARTITION BY toYYYYMMDD(occurred_at) ORDER BY (organization_id, occurred_at, occurred_us, id)`,
		`CREATE TABLE IF NOT EXISTS ` + a.db + `.events (
    organization_id String, occurred_at DateTime, id String, type String, message_id String,
    domain String, tags Array(String)
) ENGINE = ReplacingMergeTree() PARTITION BY toYYYYMMDD(occurred_at) ORDER BY (organization_id, occurred_at, id)`,
	}
}

// rollupSelect turns events into rollup rows: one per event, hour and dimension, the dimension being the empty string
// (everything), 'd:<sending domain>' (when the event has one) and 't:<name:value>' for each tag.
const rollupSelect = `SELECT organization_id, dim, toStartOfHour(occurred_at, 'UTC') AS hour, type, toUInt64(count()) AS n
FROM %s ARRAY JOIN arrayFilter(k -> k != 'd:', arrayConcat(['', concat('d:', domain)], arrayMap(x -> concat('t:', x), tags))) AS dim
GROUP BY organization_id, dim, hour, type`

// createRollups creates the hourly rollup table and the materialized view that feeds it from every insert
// into events. A rollup table made for a database whose events table already holds rows is first filled
// from those rows (FINAL: each stored event once).
func (a *Analytics) createRollups(ctx context.Context) error {
	var exists uint8
	if err := a.conn.QueryRow(ctx, `SELECT toUInt8(count()) FROM system.tables WHERE database = ? AND name = 'rollups'`,
		a.db).Scan(&exists); err != nil {
		return err
	}
	if err := a.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+a.db+`.rollups (
    organization_id String, dim String, hour DateTime, type String, n UInt64
) ENGINE = SummingMergeTree((n)) PARTITION BY toYYYYMMDD(hour) ORDER BY (organization_id, dim, hour, type)`); err != nil {
		return err
	}
	if exists == 0 {
		if err := a.conn.Exec(ctx, `INSERT INTO `+a.db+`.rollups (organization_id, dim, hour, type, n) `+
			fmt.Sprintf(rollupSelect, a.db+`.events FINAL`)); err != nil {
			return err
		}
	}
	return a.conn.Exec(ctx, `CREATE MATERIALIZED VIEW IF NOT EXISTS `+a.db+`.rollups_mv TO `+a.db+`.rollups AS `+
		fmt.Sprintf(rollupSelect, a.db+`.events`))
}

// InsertRequests implements ports.AnalyticsStore with one native batch.
func (a *Analytics) InsertRequests(ctx context.Context, rows []ports.RequestLog) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := a.conn.PrepareBatch(ctx, `INSERT INTO `+a.db+`.requests (organization_id, id, occurred_at, occurred_us, method, route, path, status, latency_us, api_key_id, user_id, user_agent, client_ip, request_id, request_body, response_body)`)
	if err != nil {
		return fmt.Errorf("clickhouse: insert requests: %w", err)
	}
	for _, r := range rows {
		at := r.OccurredAt.UTC()
		if err := b.Append(r.OrganizationID, r.ID, at.Truncate(time.Second), uint32(at.Nanosecond()/1000),
			r.Method, r.Route, r.Path, uint16(r.Status), uint64(r.Latency.Microseconds()), r.APIKeyID, r.UserID,
			r.UserAgent, r.ClientIP, r.RequestID, r.RequestBody, r.ResponseBody); err != nil {
			_ = b.Abort()
			return fmt.Errorf("clickhouse: insert requests: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert requests: %w", err)
	}
	return nil
}

// InsertEvents implements ports.AnalyticsStore with one native batch of the events not stored yet. The
// materialized view adds every inserted row to the rollups, and a ReplacingMergeTree does not take back what
// a view has counted (nor has 18.16 insert deduplication for non-replicated tables), so a re-delivered event
// is dropped here: once within the batch, and once more if the events table already holds its id.
func (a *Analytics) InsertEvents(ctx context.Context, rows []ports.AnalyticsEvent) error {
	if len(rows) == 0 {
		return nil
	}
	fresh, err := a.newEvents(ctx, rows)
	if err != nil {
		return fmt.Errorf("clickhouse: insert events: %w", err)
	}
	if len(fresh) == 0 {
		return nil
	}
	b, err := a.conn.PrepareBatch(ctx, `INSERT INTO `+a.db+`.events (organization_id, occurred_at, id, type, message_id, domain, tags)`)
	if err != nil {
		return fmt.Errorf("clickhouse: insert events: %w", err)
	}
	for _, e := range fresh {
		tags := e.Tags
		if tags == nil {
			tags = []string{}
		}
		if err := b.Append(e.OrganizationID, e.OccurredAt.UTC().Truncate(time.Second), e.ID, e.Type, e.MessageID,
			e.Domain, tags); err != nil {
			_ = b.Abort()
			return fmt.Errorf("clickhouse: insert events: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert events: %w", err)
	}
	return nil
}

// newEvents returns the events of rows whose id appears neither earlier in rows nor in the events table.
// The ids travel as an external table (no query-size limit), and the lookup is bounded by the batch's
// organizations and time span so it reads only the primary-key ranges the batch could have touched.
func (a *Analytics) newEvents(ctx context.Context, rows []ports.AnalyticsEvent) ([]ports.AnalyticsEvent, error) {
	seen := make(map[string]bool, len(rows))
	unique := make([]ports.AnalyticsEvent, 0, len(rows))
	ids, err := ext.NewTable("batch_ids", ext.Column("organization_id", "String"), ext.Column("id", "String"))
	if err != nil {
		return nil, err
	}
	lo, hi := rows[0].OccurredAt.UTC().Truncate(time.Second), rows[0].OccurredAt.UTC().Truncate(time.Second)
	for _, e := range rows {
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		unique = append(unique, e)
		at := e.OccurredAt.UTC().Truncate(time.Second)
		if at.Before(lo) {
			lo = at
		}
		if at.After(hi) {
			hi = at
		}
		if err := ids.Append(e.OrganizationID, e.ID); err != nil {
			return nil, err
		}
	}
	qctx := clickhouse.Context(ctx, clickhouse.WithExternalTable(ids))
	found, err := a.conn.Query(qctx, `SELECT id FROM `+a.db+`.events
WHERE organization_id IN (SELECT organization_id FROM batch_ids) AND occurred_at >= ? AND occurred_at <= ?
    AND id IN (SELECT id FROM batch_ids)`, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("look up stored ids: %w", err)
	}
	defer found.Close()
	stored := map[string]bool{}
	for found.Next() {
		var id string
		if err := found.Scan(&id); err != nil {
			return nil, fmt.Errorf("look up stored ids: %w", err)
		}
		stored[id] = true
	}
	if err := found.Err(); err != nil {
		return nil, fmt.Errorf("look up stored ids: %w", err)
	}
	if len(stored) == 0 {
		return unique, nil
	}
	fresh := unique[:0]
	for _, e := range unique {
		if !stored[e.ID] {
			fresh = append(fresh, e)
		}
	}
	return fresh, nil
}

const requestColumns = `id, organization_id, occurred_at, occurred_us, method, route, path, status, latency_us,
    api_key_id, user_id, user_agent, client_ip, request_id, request_body, response_body`

func scanRequest(scan func(...any) error) (ports.RequestLog, error) {
	var r ports.RequestLog
	var at time.Time
	var us uint32
	var status uint16
	var latency uint64
	err := scan(&r.ID, &r.OrganizationID, &at, &us, &r.Method, &r.Route, &r.Path, &status, &latency,
		&r.APIKeyID, &r.UserID, &r.UserAgent, &r.ClientIP, &r.RequestID, &r.RequestBody, &r.ResponseBody)
	r.OccurredAt = at.UTC().Add(time.Duration(us) * time.Microsecond)
	r.Status, r.Latency = int(status), time.Duration(latency)*time.Microsecond
	return r, err
}

var errBadCursor = ports.ValidationError(ports.FieldViolation{Path: "cursor", Message: "invalid cursor"})

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "|" + id))
}

func decodeCursor(c string) (time.Time, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", false
	}
	us, id, ok := strings.Cut(string(b), "|")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", false
	}
	return time.UnixMicro(n).UTC(), id, true
}

// ListRequests implements ports.AnalyticsStore: newest first, keyset-paged on (time, id).
func (a *Analytics) ListRequests(ctx context.Context, organizationID string, f ports.LogFilter, q ports.PageQuery) (ports.Page[ports.RequestLog], error) {
	limit := q.Limit
	if limit == 0 {
		limit = ports.DefaultListLimit
	}
	if limit < 1 || limit > ports.MaxUnpagedListRows {
		return ports.Page[ports.RequestLog]{}, ports.ValidationError(ports.FieldViolation{Path: "limit", Message: "must be between 1 and 100"})
	}
	where := []string{"organization_id = ?"}
	args := []any{organizationID}
	if q.Cursor != "" {
		at, id, ok := decodeCursor(q.Cursor)
		if !ok {
			return ports.Page[ports.RequestLog]{}, errBadCursor
		}
		sec, us := at.Truncate(time.Second), uint32(at.Nanosecond()/1000)
		where = append(where, "(occurred_at < ? OR (occurred_at = ? AND (occurred_us < ? OR (occurred_us = ? AND id < ?))))")
		args = append(args, sec, sec, us, us, id)
	}
	add := func(cond string, v ...any) { where, args = append(where, cond), append(args, v...) }
	if !f.From.IsZero() {
		add("(occurred_at > ? OR (occurred_at = ? AND occurred_us >= ?))", f.From.UTC().Truncate(time.Second),
			f.From.UTC().Truncate(time.Second), uint32(f.From.Nanosecond()/1000))
	}
	if !f.To.IsZero() {
		add("(occurred_at < ? OR (occurred_at = ? AND occurred_us < ?))", f.To.UTC().Truncate(time.Second),
			f.To.UTC().Truncate(time.Second), uint32(f.To.Nanosecond()/1000))
	}
	if f.Method != "" {
		add("method = ?", f.Method)
	}
	if f.Status != 0 {
		add("status = ?", f.Status)
	}
	if f.StatusClass != 0 {
		add("intDiv(status, 100) = ?", f.StatusClass)
	}
	if f.Route != "" {
		add("route = ?", f.Route)
	}
	if f.APIKeyID != "" {
		add("api_key_id = ?", f.APIKeyID)
	}
	if f.Search != "" {
		add("position(lower(path), lower(?)) > 0", f.Search)
	}
	// The newest rows are looked for in a widening window below the upper bound (an hour, a day, a week,
	// then everything), so a first page reads the last hour's parts rather than sorting the organization's
	// whole history. LIMIT 1 BY id drops a row stored twice and not yet merged; it costs far less than FINAL.
	upper := time.Now().UTC().Add(time.Minute)
	if q.Cursor != "" {
		upper, _, _ = decodeCursor(q.Cursor)
	}
	if !f.To.IsZero() && f.To.Before(upper) {
		upper = f.To.UTC()
	}
	var page ports.Page[ports.RequestLog]
	for _, window := range []time.Duration{time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 0} {
		cond, wargs := strings.Join(where, " AND "), args
		if window > 0 {
			lower := upper.Add(-window).Truncate(time.Second)
			if !f.From.IsZero() && !lower.After(f.From) {
				window = 0
			} else {
				cond += " AND occurred_at >= ?"
				wargs = append(slices.Clone(args), lower)
			}
		}
		var err error
		if page, err = a.listPage(ctx, cond, wargs, limit); err != nil {
			return page, err
		}
		if window == 0 || len(page.Data) > limit {
			break
		}
	}
	if len(page.Data) > limit {
		page.Data = page.Data[:limit]
		last := page.Data[limit-1]
		page.NextCursor = encodeCursor(last.OccurredAt, last.ID)
	}
	return page, nil
}

// listPage reads up to limit+1 requests matching cond, newest first.
func (a *Analytics) listPage(ctx context.Context, cond string, args []any, limit int) (ports.Page[ports.RequestLog], error) {
	rows, err := a.conn.Query(ctx, `SELECT `+requestColumns+` FROM `+a.db+`.requests WHERE `+cond+
		` ORDER BY occurred_at DESC, occurred_us DESC, id DESC LIMIT 1 BY id LIMIT `+strconv.Itoa(limit+1), args...)
	if err != nil {
		return ports.Page[ports.RequestLog]{}, fmt.Errorf("clickhouse: list requests: %w", err)
	}
	defer rows.Close()
	page := ports.Page[ports.RequestLog]{Data: []ports.RequestLog{}}
	for rows.Next() {
		r, err := scanRequest(rows.Scan)
		if err != nil {
			return ports.Page[ports.RequestLog]{}, fmt.Errorf("clickhouse: list requests: %w", err)
		}
		page.Data = append(page.Data, r)
	}
	if err := rows.Err(); err != nil {
		return ports.Page[ports.RequestLog]{}, fmt.Errorf("clickhouse: list requests: %w", err)
	}
	return page, nil
}

// GetRequest implements ports.AnalyticsStore.
func (a *Analytics) GetRequest(ctx context.Context, organizationID, id string) (ports.RequestLog, error) {
	row := a.conn.QueryRow(ctx, `SELECT `+requestColumns+` FROM `+a.db+`.requests FINAL
WHERE organization_id = ? AND id = ? LIMIT 1`, organizationID, id)
	r, err := scanRequest(row.Scan)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return ports.RequestLog{}, ports.NotFound("Log not found")
		}
		return ports.RequestLog{}, fmt.Errorf("clickhouse: get request: %w", err)
	}
	return r, nil
}

// Summarize implements ports.AnalyticsStore from the hourly rollups: sum() with GROUP BY, so rows of
// parts not merged yet add up like merged ones. A range reads at most one row per hour and event type of
// one dimension (everything, one domain or one tag).
func (a *Analytics) Summarize(ctx context.Context, organizationID string, q ports.AnalyticsQuery) (ports.AnalyticsSummary, error) {
	bucket := time.Hour
	trunc := "hour"
	if q.Bucket >= 24*time.Hour {
		bucket, trunc = 24*time.Hour, "toStartOfDay(hour, 'UTC')"
	}
	from, to := q.From.UTC().Truncate(bucket), q.To.UTC()
	sum := ports.AnalyticsSummary{Buckets: []ports.AnalyticsBucket{}}
	if !to.After(from) {
		return sum, nil
	}
	dim := ""
	switch {
	case q.Domain != "":
		dim = "d:" + q.Domain
	case q.Tag != "":
		dim = "t:" + q.Tag
	}
	rows, err := a.conn.Query(ctx, `SELECT toUInt32(`+trunc+`) AS b, type, sum(n) FROM `+a.db+`.rollups
WHERE organization_id = ? AND dim = ? AND hour >= ? AND hour < ? GROUP BY b, type`, organizationID, dim, from, to)
	if err != nil {
		return sum, fmt.Errorf("clickhouse: summarize: %w", err)
	}
	defer rows.Close()
	counts := map[time.Time]*ports.AnalyticsCounts{}
	for rows.Next() {
		var b uint32
		var typ string
		var n uint64
		if err := rows.Scan(&b, &typ, &n); err != nil {
			return sum, fmt.Errorf("clickhouse: summarize: %w", err)
		}
		at := time.Unix(int64(b), 0).UTC()
		c := counts[at]
		if c == nil {
			c = &ports.AnalyticsCounts{}
			counts[at] = c
		}
		if p := field(c, typ); p != nil {
			*p += int64(n)
		}
	}
	if err := rows.Err(); err != nil {
		return sum, fmt.Errorf("clickhouse: summarize: %w", err)
	}
	for at := from; at.Before(to); at = at.Add(bucket) {
		var c ports.AnalyticsCounts
		if p := counts[at]; p != nil {
			c = *p
		}
		sum.Buckets = append(sum.Buckets, ports.AnalyticsBucket{Start: at, AnalyticsCounts: c})
		for _, ty := range countedTypes {
			*field(&sum.Totals, ty) += *field(&c, ty)
		}
	}
	return sum, nil
}

var countedTypes = []string{ports.EventEmailSent, ports.EventEmailDelivered, ports.EventEmailBounced,
	ports.EventEmailComplained, ports.EventEmailOpened, ports.EventEmailClicked, ports.EventEmailFailed,
	ports.EventEmailDeliveryDelayed}

func field(c *ports.AnalyticsCounts, typ string) *int64 {
	switch typ {
	case ports.EventEmailSent:
		return &c.Sent
	case ports.EventEmailDelivered:
		return &c.Delivered
	case ports.EventEmailBounced:
		return &c.Bounced
	case ports.EventEmailComplained:
		return &c.Complained
	case ports.EventEmailOpened:
		return &c.Opened
	case ports.EventEmailClicked:
		return &c.Clicked
	case ports.EventEmailFailed:
		return &c.Failed
	case ports.EventEmailDeliveryDelayed:
		return &c.Delayed
	}
	return nil
}

// Maintain implements ports.AnalyticsStore. ClickHouse makes a day's partition with its first row, so
// nothing is prepared; partitions (days) wholly older than the retention are dropped. Rows are kept by
// whole day: a partition goes once its day has ended before the cutoff.
func (a *Analytics) Maintain(ctx context.Context, now time.Time, r ports.AnalyticsRetention) error {
	if r.Requests <= 0 {
		r.Requests = ports.DefaultAnalyticsRetention.Requests
	}
	if r.Events <= 0 {
		r.Events = ports.DefaultAnalyticsRetention.Events
	}
	for table, keep := range map[string]time.Duration{"requests": r.Requests, "events": r.Events, "rollups": r.Events} {
		cutoff := now.UTC().Add(-keep)
		rows, err := a.conn.Query(ctx, `SELECT DISTINCT partition FROM system.parts
WHERE database = ? AND table = ? AND active`, a.db, table)
		if err != nil {
			return fmt.Errorf("clickhouse: list partitions: %w", err)
		}
		var parts []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return fmt.Errorf("clickhouse: list partitions: %w", err)
			}
			parts = append(parts, p)
		}
		rows.Close()
		for _, p := range parts {
			day, err := time.Parse("20060102", p)
			if err != nil || day.AddDate(0, 0, 1).After(cutoff) {
				continue
			}
			if err := a.conn.Exec(ctx, `ALTER TABLE `+a.db+`.`+table+` DROP PARTITION `+p); err != nil {
				return fmt.Errorf("clickhouse: drop partition %s of %s: %w", p, table, err)
			}
		}
	}
	return nil
}

// OpenDSN opens the store named by dsn: "host:port" (database postmill) or
// "clickhouse://host:port/database".
func OpenDSN(ctx context.Context, dsn string) (*Analytics, error) {
	addr, db := dsn, "postmill"
	if rest, ok := strings.CutPrefix(dsn, "clickhouse://"); ok {
		addr = rest
		if h, d, ok := strings.Cut(rest, "/"); ok {
			addr = h
			if d != "" {
				db = d
			}
		}
	}
	if addr == "" {
		return nil, errors.New("clickhouse: POSTMILL_CLICKHOUSE_DSN names no host:port")
	}
	return Open(ctx, addr, db)
}
