package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postmill/postmill/ports"
)

var _ ports.ChangeFeed = (*ChangeFeed)(nil)

// changeChannel is the channel the announce_change trigger (migration 00015) notifies on commit of every
// change to an organization's paused flag or plan and to a domain's status.
const changeChannel = "postmill_changes"

// maxListenBackoff bounds the wait before listening again after the connection was lost.
const maxListenBackoff = 10 * time.Second

// ChangeFeed is ports.ChangeFeed on PostgreSQL. The database itself announces changes (a trigger notifies
// postmill_changes when they commit, whoever wrote them), and Run listens on a connection of its own,
// outside the pool so that it never takes one of the pool's connections for good. Whenever it starts
// listening — at first and after a lost connection — it tells subscribers ChangeAll, since changes
// committed meanwhile were not heard. Publish reaches this process's subscribers only: the trigger tells
// every process, this one included. Safe for concurrent use.
type ChangeFeed struct {
	connConfig *pgx.ConnConfig
	logger     *slog.Logger

	mu   sync.Mutex
	subs map[int]func(ports.Change)
	next int
}

// NewChangeFeed returns a feed that connects like pool (same server, credentials and search_path); call
// Run to listen. logger may be nil.
func NewChangeFeed(pool *pgxpool.Pool, logger *slog.Logger) *ChangeFeed {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &ChangeFeed{
		connConfig: pool.Config().ConnConfig.Copy(),
		logger:     logger.With("component", "change-feed"),
		subs:       make(map[int]func(ports.Change)),
	}
}

// Publish implements ports.ChangeFeed: subscribers of this process are called before it returns.
func (f *ChangeFeed) Publish(c ports.Change) { f.deliver(c) }

// Subscribe implements ports.ChangeFeed.
func (f *ChangeFeed) Subscribe(fn func(ports.Change)) (cancel func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.next
	f.next++
	f.subs[id] = fn
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, id)
	}
}

// deliver calls every subscriber with c, outside the lock so that a subscriber may subscribe or cancel.
func (f *ChangeFeed) deliver(c ports.Change) {
	f.mu.Lock()
	fns := make([]func(ports.Change), 0, len(f.subs))
	for _, fn := range f.subs {
		fns = append(fns, fn)
	}
	f.mu.Unlock()
	for _, fn := range fns {
		fn(c)
	}
}

// Run listens for announced changes and hands them to subscribers until ctx ends, then returns nil. A lost
// connection is logged and opened again after a growing pause (at most ten seconds).
func (f *ChangeFeed) Run(ctx context.Context) error {
	listenAlways(ctx, f.connConfig, changeChannel, f.logger.With("listening_for", "changes"),
		func() { f.deliver(ports.Change{Kind: ports.ChangeAll}) },
		func(payload string) {
			if c, ok := parseChange(payload); ok {
				f.deliver(c)
			} else {
				f.logger.Warn("unknown change announcement ignored", "payload", storableText(payload, 200))
			}
		})
	return nil
}

// listenAlways listens to channel on a connection of its own (made from cfg, outside any pool) until ctx
// ends, calling listening each time listening begins (at first and after a lost connection: what was
// announced meanwhile was not heard) and heard for each notification's payload. A lost connection is
// logged and opened again after a growing pause (at most maxListenBackoff).
func listenAlways(ctx context.Context, cfg *pgx.ConnConfig, channel string, logger *slog.Logger, listening func(), heard func(payload string)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		began, err := listenOnce(ctx, cfg, channel, listening, heard)
		if ctx.Err() != nil {
			return
		}
		if began {
			backoff = 100 * time.Millisecond
		}
		logger.Warn("listening for notifications failed; listening again", "channel", channel, "error", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// listenOnce opens a connection, listens and hands over notifications until the connection fails or ctx
// ends. began reports whether listening had begun.
func listenOnce(ctx context.Context, cfg *pgx.ConnConfig, channel string, listening func(), heard func(string)) (began bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	if listening != nil {
		listening()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait: %w", err)
		}
		heard(n.Payload)
	}
}

// parseChange reads announce_change's payload: "organization <org id>" or "domain <org id> <domain id>".
func parseChange(payload string) (ports.Change, bool) {
	fields := strings.Fields(payload)
	switch {
	case len(fields) == 2 && fields[0] == string(ports.ChangeOrganization):
		return ports.Change{Kind: ports.ChangeOrganization, OrganizationID: fields[1]}, true
	case len(fields) == 3 && fields[0] == string(ports.ChangeDomain):
		return ports.Change{Kind: ports.ChangeDomain, OrganizationID: fields[1], DomainID: fields[2]}, true
	}
	return ports.Change{}, false
}
