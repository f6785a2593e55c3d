package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

// SuppressedAmong implements ports.MessageStore: an address is suppressed when a row names it or its domain
// (the part after the last "@"), held by the organization in any scope or platform-wide (no organization).
// Other organizations' rows never count. Only suppressed addresses are in the map, keyed as given.
//
// It runs on every send, so concurrent calls (of any organizations) are answered together: while one
// query is in flight the calls arriving queue up and go into the next one, each address checked against
// its own call's organization. The query is sent with PreferGenericPlans in one round trip, so its plan
// (index probes on suppressions_address_idx) is made once per connection.
func (s *Messages) SuppressedAmong(ctx context.Context, orgID string, addresses []string) (map[string]bool, error) {
	if len(addresses) == 0 {
		return map[string]bool{}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &pendingSuppressed{ctx: ctx, orgID: orgID, addresses: addresses, done: make(chan suppressedResult, 1)}
	if len(addresses) > maxSuppressedShared {
		// A bulk send's many addresses are a query of their own, so a group's arrays stay bounded.
		s.readSuppressed([]*pendingSuppressed{p})
	} else {
		s.suppressed.add(p)
	}
	select {
	case r := <-p.done:
		return r.found, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Bounds of one group of suppression reads.
const (
	// maxSuppressedGroup bounds the calls answered by one query.
	maxSuppressedGroup = 256
	// maxSuppressedShared is the most addresses a call may have to share a query with others: with it a
	// group's query names at most maxSuppressedGroup × maxSuppressedShared addresses.
	maxSuppressedShared = 1000
	// suppressedGroupTimeout bounds a group's query, which runs detached from its callers' contexts.
	suppressedGroupTimeout = 30 * time.Second
)

// pendingSuppressed is one SuppressedAmong call waiting for its group's answer.
type pendingSuppressed struct {
	ctx       context.Context
	orgID     string
	addresses []string
	done      chan suppressedResult
}

type suppressedResult struct {
	found map[string]bool
	err   error
}

// readSuppressed answers one group of SuppressedAmong calls with one query.
func (s *Messages) readSuppressed(group []*pendingSuppressed) {
	live := make([]*pendingSuppressed, 0, len(group))
	var params db.SuppressedAmongParams
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- suppressedResult{err: err}
			continue
		}
		if !isUUID(p.orgID) {
			// The only input the database could refuse, answered as interpretError answers a malformed id,
			// so it never fails the group it would have joined.
			p.done <- suppressedResult{err: ports.NotFound("record not found")}
			continue
		}
		n := int32(len(live))
		live = append(live, p)
		for _, a := range p.addresses {
			params.Ns = append(params.Ns, n)
			params.OrganizationIds = append(params.OrganizationIds, p.orgID)
			params.Addresses = append(params.Addresses, a)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), suppressedGroupTimeout)
	defer cancel()
	var rows []db.SuppressedAmongRow
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error { return q.PreferGenericPlans(ctx) },
		func(q *db.Queries) (err error) {
			rows, err = q.SuppressedAmong(ctx, params)
			return err
		},
	)
	if err != nil {
		// Every call's input was checked above, so a failure is the database's (unreachable, timed out)
		// and is every call's answer: asking again call by call would only repeat it.
		err = interpretError(err)
		for _, p := range live {
			p.done <- suppressedResult{err: err}
		}
		return
	}
	found := make([]map[string]bool, len(live))
	for i := range found {
		found[i] = map[string]bool{}
	}
	for _, r := range rows {
		if int(r.N) < len(found) {
			found[r.N][r.Address] = true
		}
	}
	for i, p := range live {
		p.done <- suppressedResult{found: found[i]}
	}
}

// AddSuppression implements ports.MessageStore. The address is lower-cased; an existing suppression of
// the same organization (or none, for global), address and scope is kept unchanged, so repeated bounces
// of one address add one row. A missing id or creation time is filled in.
func (s *Messages) AddSuppression(ctx context.Context, sup ports.Suppression) error {
	return interpretError(s.queries.InsertSuppressions(ctx, insertSuppressionsParams([]ports.Suppression{sup})))
}

// insertSuppressionsParams lays suppressions out as parallel arrays, sorted by organization and address: every
// writer (delivery groups, feedback, single inserts) then takes the unique index's locks in one order, so two
// transactions inserting the same addresses wait for each other instead of deadlocking.
func insertSuppressionsParams(sups []ports.Suppression) db.InsertSuppressionsParams {
	sups = slices.Clone(sups)
	slices.SortFunc(sups, func(x, y ports.Suppression) int {
		return strings.Compare(x.OrganizationID+"\x00"+strings.ToLower(x.Address), y.OrganizationID+"\x00"+strings.ToLower(y.Address))
	})
	n := len(sups)
	p := db.InsertSuppressionsParams{
		Ids:             make([]string, n),
		OrganizationIds: make([]string, n),
		Addresses:       make([]string, n),
		Scopes:          make([]string, n),
		Reasons:         make([]string, n),
		CreatedAt:       make([]time.Time, n),
	}
	for i, sup := range sups {
		scope, reason, at := sup.Scope, sup.Reason, sup.CreatedAt
		if scope == "" {
			scope = ports.SuppressionScopeTenant
		}
		if reason == "" {
			reason = ports.SuppressionManual
		}
		if at.IsZero() {
			at = time.Now()
		}
		p.Ids[i] = idOrNew(sup.ID)
		p.OrganizationIds[i] = sup.OrganizationID
		p.Addresses[i] = strings.ToLower(sup.Address)
		p.Scopes[i] = scope
		p.Reasons[i] = reason
		p.CreatedAt[i] = at
	}
	return p
}

// ListSuppressions implements ports.DeliverabilityStore: the organization's rows, or the platform-wide ones
// for orgID "", newest first with keyset paging on (created_at, id).
func (s *Deliverability) ListSuppressions(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Suppression], error) {
	limit, beforeAt, beforeID, err := listBounds(q)
	if err != nil {
		return ports.Page[ports.Suppression]{}, err
	}
	key := func(r db.ListSuppressionsRow) (time.Time, string) { return r.CreatedAt, r.ID }
	convert := func(r db.ListSuppressionsRow) ports.Suppression {
		return suppressionFromFields(r.ID, r.OrganizationID, r.Address, r.Scope, r.Reason, r.CreatedAt)
	}
	if orgID == "" {
		rows, err := s.queries.ListGlobalSuppressions(ctx, db.ListGlobalSuppressionsParams{
			BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
		})
		if err != nil {
			return ports.Page[ports.Suppression]{}, interpretError(err)
		}
		same := make([]db.ListSuppressionsRow, len(rows))
		for i, r := range rows {
			same[i] = db.ListSuppressionsRow(r)
		}
		return pageOf(same, limit, convert, key), nil
	}
	if !isUUID(orgID) {
		return ports.Page[ports.Suppression]{Data: []ports.Suppression{}}, nil
	}
	rows, err := s.queries.ListSuppressions(ctx, db.ListSuppressionsParams{
		OrganizationID: orgID, BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
	})
	if err != nil {
		return ports.Page[ports.Suppression]{}, interpretError(err)
	}
	return pageOf(rows, limit, convert, key), nil
}
