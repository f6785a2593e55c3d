package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.DMARCStore = (*DMARC)(nil)

// DMARC is the PostgreSQL store of DMARC aggregate reports (ports.DMARCStore). Safe for concurrent use.
type DMARC struct{ shared }

// OrganizationsOwningDomain implements ports.DMARCStore.
func (s *DMARC) OrganizationsOwningDomain(ctx context.Context, domain string) ([]string, error) {
	ids, err := s.queries.OrganizationsOwningDomain(ctx, domain)
	if err := listError(err); err != nil {
		return nil, err
	}
	return ids, nil
}

// InsertDMARCReport implements ports.DMARCStore: the report and its records in one transaction; a report
// the organization already holds (same reporter and report id) writes nothing.
func (s *DMARC) InsertDMARCReport(ctx context.Context, r ports.DMARCReport) (bool, error) {
	inserted := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		n, err := q.InsertDMARCReport(ctx, db.InsertDMARCReportParams{
			ID: r.ID, OrganizationID: r.OrganizationID, ReporterOrg: r.ReporterOrg, ReporterEmail: r.ReporterEmail,
			ReportID: r.ReportID, Domain: r.Domain, Policy: r.Policy, BeginAt: r.Begin, EndAt: r.End, ReceivedAt: r.ReceivedAt,
		})
		if err != nil || n == 0 {
			return err
		}
		inserted = true
		for i, rec := range r.Records {
			if err := q.InsertDMARCRecord(ctx, db.InsertDMARCRecordParams{
				ReportID: r.ID, Position: int32(i), SourceIp: rec.SourceIP, Count: rec.Count, Disposition: rec.Disposition,
				DkimAligned: rec.DKIMAligned, SpfAligned: rec.SPFAligned, HeaderFrom: rec.HeaderFrom,
				DkimResult: rec.DKIMResult, SpfResult: rec.SPFResult,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, interpretError(err)
	}
	return inserted, nil
}

// DMARCSummary implements ports.DMARCStore; domain "" is every domain.
func (s *DMARC) DMARCSummary(ctx context.Context, orgID string, since time.Time, domain string) ([]ports.DMARCSourceSummary, error) {
	rows, err := s.queries.DMARCSummary(ctx, db.DMARCSummaryParams{OrganizationID: orgID, Since: since, Domain: domain})
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.DMARCSourceSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, ports.DMARCSourceSummary{
			Domain: r.Domain, Reporter: r.ReporterOrg, SourceIP: r.SourceIp, Messages: r.Messages,
			DKIMAligned: r.DkimAligned, SPFAligned: r.SpfAligned, DMARCPass: r.DmarcPass, DKIMPass: r.DkimPass,
			SPFPass: r.SpfPass, None: r.DispositionNone, Quarantine: r.DispositionQuarantine, Reject: r.DispositionReject,
		})
	}
	return out, nil
}
