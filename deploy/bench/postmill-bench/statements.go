package main

import (
	"context"
	"fmt"
)

// statementCounters reads pg_stat_statements (when the server preloads it) for the statements of one run,
// counted from resetStatements on. It observes without polling, which a sampler does not: no broadcast has
// yet run slow under the 100 ms sampler of -sample (docs/benchmarks.md).
type statementCounters struct {
	url string
}

// resetStatements clears the cluster's counters (which needs the right to reset them) and returns nil
// counters, with a note, when they are not available.
func resetStatements(ctx context.Context, url string) *statementCounters {
	conn, err := connect(ctx, url)
	if err != nil {
		fmt.Printf("  statement counters: %v\n", err)
		return nil
	}
	defer conn.Close(context.Background())
	// The benchmark's database is its own (its public schema is reset at every run), so the extension is
	// created there when missing; it counts only if the server preloads it.
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		fmt.Printf("  statement counters: %v\n", err)
		return nil
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		fmt.Printf("  statement counters (pg_stat_statements must be in shared_preload_libraries): %v\n", err)
		return nil
	}
	return &statementCounters{url: url}
}

// print writes the run's n most time-consuming statements of the benchmark's database: time, calls, rows,
// shared buffers hit and read, and the statement's first words.
func (c *statementCounters) print(ctx context.Context, n int) {
	if c == nil {
		return
	}
	conn, err := connect(ctx, c.url)
	if err != nil {
		fmt.Printf("  statement counters: %v\n", err)
		return
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT total_exec_time, calls, rows, shared_blks_hit, shared_blks_read,
			left(regexp_replace(query, '\s+', ' ', 'g'), 70)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		fmt.Printf("  statement counters: %v\n", err)
		return
	}
	defer rows.Close()
	fmt.Printf("  PostgreSQL statements of this run by time (pg_stat_statements): seconds, calls, rows, buffers hit, read, statement\n")
	for rows.Next() {
		var ms float64
		var calls, nrows, hit, read int64
		var query string
		if err := rows.Scan(&ms, &calls, &nrows, &hit, &read, &query); err != nil {
			fmt.Printf("  statement counters: %v\n", err)
			return
		}
		fmt.Printf("  %8.1f %8d %9d %10d %7d  %s\n", ms/1000, calls, nrows, hit, read, query)
	}
}
