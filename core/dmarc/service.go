package dmarc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/ports"
)

// The window of GET /v1/reputation/dmarc?days= (SPEC §8).
const (
	MinDays = 1
	MaxDays = 365
)

// Deps are the ports the service uses.
type Deps struct {
	Store  ports.DMARCStore
	Clock  ports.Clock
	Logger *slog.Logger
}

// Service implements ports.DMARCService.
type Service struct{ deps Deps }

var _ ports.DMARCService = (*Service)(nil)

// New builds the service.
func New(deps Deps) (*Service, error) {
	if deps.Store == nil {
		return nil, errors.New("dmarc: Store is required")
	}
	if deps.Clock == nil {
		deps.Clock = ports.SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{deps: deps}, nil
}

// IngestDMARCReport parses the mail and stores each report once for every organization with a sending
// domain of the report's domain. A report of a domain nobody owns is dropped (and counted as not stored).
func (s *Service) IngestDMARCReport(ctx context.Context, raw []byte) (int, error) {
	reports, err := ParseMessage(raw)
	if err != nil {
		return 0, ports.Errorf(ports.CodeInvalidArgument, "%s", err.Error())
	}
	stored := 0
	now := s.deps.Clock.Now().UTC()
	for _, r := range reports {
		orgs, err := s.deps.Store.OrganizationsOwningDomain(ctx, r.Domain)
		if err != nil {
			return stored, fmt.Errorf("dmarc: owners of %s: %w", r.Domain, err)
		}
		if len(orgs) == 0 {
			s.deps.Logger.Info("dmarc: report for a domain no organization owns", "domain", r.Domain, "reporter", r.ReporterOrg)
		}
		for _, org := range orgs {
			r.ID, r.OrganizationID, r.ReceivedAt = id.New(), org, now
			if _, err := s.deps.Store.InsertDMARCReport(ctx, r); err != nil {
				return stored, fmt.Errorf("dmarc: store: %w", err)
			}
			stored++
		}
	}
	return stored, nil
}

// DMARCSummary sums the reports whose period ended in the last days days.
func (s *Service) DMARCSummary(ctx context.Context, orgID string, days int, domain string) ([]ports.DMARCSourceSummary, error) {
	if days < MinDays || days > MaxDays {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "days", Message: fmt.Sprintf("must be between %d and %d", MinDays, MaxDays)})
	}
	since := s.deps.Clock.Now().UTC().Add(-time.Duration(days) * 24 * time.Hour)
	out, err := s.deps.Store.DMARCSummary(ctx, orgID, since, strings.ToLower(strings.TrimSuffix(strings.TrimSpace(domain), ".")))
	if err != nil {
		return nil, fmt.Errorf("dmarc: summary: %w", err)
	}
	return out, nil
}
