package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.DomainStore = (*Domains)(nil)

// Domains is the PostgreSQL store of sending domains and their DNS records (ports.DomainStore). Safe for
// concurrent use.
type Domains struct{ shared }

// InsertDomain writes the domain, its records (kept in the given order) and the domain.created event with
// no bound on the organization's domains: InsertDomainWithin with max 0, for tools and tests that place
// rows directly. Errors: already_exists naming domains_org_name_key.
func (s *Domains) InsertDomain(ctx context.Context, d ports.Domain, e ports.Event) error {
	_, err := s.InsertDomainWithin(ctx, d, e, 0)
	return err
}

// InsertDomainWithin implements ports.DomainStore in one transaction: a per-organization advisory lock,
// then the domain inserted only while the organization holds fewer than max (the count is read after the
// lock, so concurrent creations take turns and never pass max), then its records (kept in the given order)
// and the domain.created event. Errors: already_exists naming domains_org_name_key when the organization
// already has the name.
func (s *Domains) InsertDomainWithin(ctx context.Context, d ports.Domain, e ports.Event, max int) (bool, error) {
	status := d.Status
	if status == "" {
		status = ports.DomainPending
	}
	inserted := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n int64
		err := runPipeline(ctx, tx,
			func(q *db.Queries) error { return q.LockOrganizationDomains(ctx, d.OrganizationID) },
			func(q *db.Queries) (err error) {
				n, err = q.InsertDomainWithin(ctx, db.InsertDomainWithinParams{
					ID:             d.ID,
					OrganizationID: d.OrganizationID,
					Name:           d.Name,
					Status:         string(status),
					Region:         d.Region,
					DkimSelector:   d.DKIMSelector,
					DkimPrivateKey: d.DKIMPrivateKey,
					DkimPublicKey:  d.DKIMPublicKey,
					VerifiedAt:     d.VerifiedAt,
					CreatedAt:      d.CreatedAt,
					MaxDomains:     clampInt32(max),
				})
				return err
			})
		if err != nil || n == 0 {
			return err
		}
		inserted = true
		var steps []pipelineStep
		if len(d.Records) > 0 {
			p := insertDNSRecordsParams(d)
			steps = append(steps, func(q *db.Queries) error { return q.InsertDNSRecords(ctx, p) })
		}
		if e.Type != "" {
			p := insertEventsParams(eventsAbout([]ports.Event{e}, d.OrganizationID, "", d.ID))
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(steps) == 0 {
			return nil
		}
		return runPipeline(ctx, tx, steps...)
	})
	if err != nil {
		return false, interpretError(err)
	}
	return inserted, nil
}

// ListDomains implements ports.DomainStore: the organization's domains without records, newest first, with
// keyset paging on (created_at, id).
func (s *Domains) ListDomains(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	limit, beforeAt, beforeID, err := listBounds(q)
	if err != nil {
		return ports.Page[ports.Domain]{}, err
	}
	if !isUUID(orgID) {
		return ports.Page[ports.Domain]{Data: []ports.Domain{}}, nil
	}
	rows, err := s.queries.ListDomains(ctx, db.ListDomainsParams{
		OrganizationID: orgID, BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
	})
	if err := listError(err); err != nil {
		return ports.Page[ports.Domain]{}, err
	}
	return pageOf(rows, limit, domainFromRow, func(r db.Domain) (time.Time, string) { return r.CreatedAt, r.ID }), nil
}

// GetDomain implements ports.DomainStore: the domain and its records in one round trip. Errors: not_found.
func (s *Domains) GetDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	var d ports.Domain
	err := runPipeline(ctx, s.pool, readDomainSteps(ctx, orgID, id, &d)...)
	if err != nil {
		return ports.Domain{}, interpretErrorFor("domain", err)
	}
	return d, nil
}

// DomainsHeld implements ports.DomainStore with one index scan of the organization's domains.
func (s *Domains) DomainsHeld(ctx context.Context, orgID, name string) (held int, taken bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(name = $2), false) FROM domains WHERE organization_id = $1`,
		orgID, name).Scan(&held, &taken)
	return held, taken, interpretErrorFor("domain", err)
}

// DomainByName implements ports.DomainStore for the send path: the domain without its records. The
// caller lower-cases name. Errors: not_found.
func (s *Domains) DomainByName(ctx context.Context, orgID, name string) (ports.Domain, error) {
	row, err := s.queries.DomainByName(ctx, db.DomainByNameParams{OrganizationID: orgID, Name: name})
	if err != nil {
		return ports.Domain{}, interpretErrorFor("domain", err)
	}
	return domainFromRow(row), nil
}

// SaveVerification implements ports.DomainStore: every record's verified flag and checkedAt, the status,
// verifiedAt and the events are written in one transaction. verifiedAt is kept once set, whatever d says
// (SPEC §2: never overwritten by later runs). Records are matched by id within the domain; a record
// without CheckedAt keeps its previous check time. Errors: not_found, with nothing written.
func (s *Domains) SaveVerification(ctx context.Context, d ports.Domain, events []ports.Event) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		n, err := s.queries.WithTx(tx).SaveDomainVerification(ctx, db.SaveDomainVerificationParams{
			Status:         string(d.Status),
			VerifiedAt:     d.VerifiedAt,
			OrganizationID: d.OrganizationID,
			ID:             d.ID,
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return pgx.ErrNoRows
		}
		var steps []pipelineStep
		if len(d.Records) > 0 {
			p := saveDNSRecordChecksParams(d)
			steps = append(steps, func(q *db.Queries) error { return q.SaveDNSRecordChecks(ctx, p) })
		}
		if len(events) > 0 {
			p := insertEventsParams(eventsAbout(events, d.OrganizationID, "", d.ID))
			steps = append(steps, func(q *db.Queries) error { return q.InsertEvents(ctx, p) })
		}
		if len(steps) == 0 {
			return nil
		}
		return runPipeline(ctx, tx, steps...)
	})
	return interpretErrorFor("domain", err)
}

// SetDomainStatus implements ports.DomainStore and returns the domain as it now is, with its records.
// Errors: not_found.
func (s *Domains) SetDomainStatus(ctx context.Context, orgID, id string, status ports.DomainStatus) (ports.Domain, error) {
	var d ports.Domain
	steps := readDomainSteps(ctx, orgID, id, &d)
	steps[0] = func(q *db.Queries) error {
		row, err := q.SetDomainStatus(ctx, db.SetDomainStatusParams{Status: string(status), OrganizationID: orgID, ID: id})
		d = domainFromRow(row)
		return err
	}
	if err := runPipeline(ctx, s.pool, steps...); err != nil {
		return ports.Domain{}, interpretErrorFor("domain", err)
	}
	return d, nil
}

// SetDomainTracking implements ports.DomainStore: settings left nil keep their value. It returns the domain
// with its records. Errors: not_found.
func (s *Domains) SetDomainTracking(ctx context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	var d ports.Domain
	steps := readDomainSteps(ctx, orgID, id, &d)
	steps[0] = func(q *db.Queries) error {
		row, err := q.SetDomainTracking(ctx, db.SetDomainTrackingParams{
			OpenTracking:   boolParam(t.OpenTracking),
			ClickTracking:  boolParam(t.ClickTracking),
			OrganizationID: orgID,
			ID:             id,
		})
		d = domainFromRow(row)
		return err
	}
	if err := runPipeline(ctx, s.pool, steps...); err != nil {
		return ports.Domain{}, interpretErrorFor("domain", err)
	}
	return d, nil
}

// boolParam is a nullable boolean parameter: nil is NULL.
func boolParam(b *bool) pgtype.Bool {
	if b == nil {
		return pgtype.Bool{}
	}
	return pgtype.Bool{Bool: *b, Valid: true}
}

// readDomainSteps reads the domain row, then its records in generation order.
func readDomainSteps(ctx context.Context, orgID, id string, d *ports.Domain) []pipelineStep {
	return []pipelineStep{
		func(q *db.Queries) error {
			row, err := q.DomainByID(ctx, db.DomainByIDParams{OrganizationID: orgID, ID: id})
			*d = domainFromRow(row)
			return err
		},
		func(q *db.Queries) error {
			rows, err := q.DNSRecordsByDomain(ctx, db.DNSRecordsByDomainParams{OrganizationID: orgID, DomainID: id})
			d.Records = make([]ports.DNSRecord, len(rows))
			for i, r := range rows {
				d.Records[i] = ports.DNSRecord{
					ID:        r.ID,
					DomainID:  r.DomainID,
					Type:      r.Type,
					Host:      r.Host,
					Value:     r.Value,
					TTL:       int(r.Ttl),
					Required:  r.Required,
					Verified:  r.Verified,
					CheckedAt: utcPtr(r.CheckedAt),
				}
			}
			return err
		},
	}
}

// insertDNSRecordsParams lays the records out as parallel arrays; a missing record id is generated.
func insertDNSRecordsParams(d ports.Domain) db.InsertDNSRecordsParams {
	n := len(d.Records)
	p := db.InsertDNSRecordsParams{
		DomainID:       d.ID,
		OrganizationID: d.OrganizationID,
		Ids:            make([]string, n),
		Positions:      make([]int32, n),
		Types:          make([]string, n),
		Hosts:          make([]string, n),
		RecordValues:   make([]string, n),
		Ttls:           make([]int32, n),
		Required:       make([]bool, n),
		Verified:       make([]bool, n),
		Checked:        make([]bool, n),
		CheckedAt:      make([]time.Time, n),
	}
	for i, r := range d.Records {
		p.Ids[i] = idOrNew(r.ID)
		p.Positions[i] = int32(i)
		p.Types[i] = r.Type
		p.Hosts[i] = r.Host
		p.RecordValues[i] = r.Value
		p.Ttls[i] = int32(r.TTL)
		p.Required[i] = r.Required
		p.Verified[i] = r.Verified
		if r.CheckedAt != nil {
			p.Checked[i] = true
			p.CheckedAt[i] = *r.CheckedAt
		}
	}
	return p
}

func saveDNSRecordChecksParams(d ports.Domain) db.SaveDNSRecordChecksParams {
	n := len(d.Records)
	p := db.SaveDNSRecordChecksParams{
		OrganizationID: d.OrganizationID,
		DomainID:       d.ID,
		Ids:            make([]string, n),
		Verified:       make([]bool, n),
		Checked:        make([]bool, n),
		CheckedAt:      make([]time.Time, n),
	}
	for i, r := range d.Records {
		p.Ids[i] = r.ID
		p.Verified[i] = r.Verified
		if r.CheckedAt != nil {
			p.Checked[i] = true
			p.CheckedAt[i] = *r.CheckedAt
		}
	}
	return p
}

func domainFromRow(r db.Domain) ports.Domain {
	return ports.Domain{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Name:           r.Name,
		Status:         ports.DomainStatus(r.Status),
		Region:         r.Region,
		DKIMSelector:   r.DkimSelector,
		DKIMPrivateKey: r.DkimPrivateKey,
		DKIMPublicKey:  r.DkimPublicKey,
		VerifiedAt:     utcPtr(r.VerifiedAt),
		CreatedAt:      r.CreatedAt.UTC(),
		OpenTracking:   r.OpenTracking,
		ClickTracking:  r.ClickTracking,
	}
}
