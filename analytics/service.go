package analytics

import (
	"context"
	"time"

	"github.com/postmill/postmill/ports"
)

var (
	_ ports.LogService       = (*Service)(nil)
	_ ports.AnalyticsService = (*Service)(nil)
)

// Service answers the request log and analytics routes from the analytics store.
type Service struct{ store ports.AnalyticsStore }

// NewService returns the service over store.
func NewService(store ports.AnalyticsStore) *Service { return &Service{store: store} }

// ListLogs implements ports.LogService: limit 1-100, default 25 (SPEC §8).
func (s *Service) ListLogs(ctx context.Context, organizationID string, f ports.LogFilter, q ports.PageQuery) (ports.Page[ports.RequestLog], error) {
	q, err := q.Checked()
	if err != nil {
		return ports.Page[ports.RequestLog]{}, err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		return ports.Page[ports.RequestLog]{}, ports.ValidationError(ports.FieldViolation{Path: "to", Message: "must be after from"})
	}
	return s.store.ListRequests(ctx, organizationID, f, q)
}

// GetLog implements ports.LogService.
func (s *Service) GetLog(ctx context.Context, organizationID, id string) (ports.RequestLog, error) {
	return s.store.GetRequest(ctx, organizationID, id)
}

// RecordRequests implements ports.LogService.
func (s *Service) RecordRequests(ctx context.Context, rows []ports.RequestLog) error {
	return s.store.InsertRequests(ctx, rows)
}

// Summarize implements ports.AnalyticsService; the range is at most 90 days and buckets an hour or a day.
func (s *Service) Summarize(ctx context.Context, organizationID string, q ports.AnalyticsQuery) (ports.AnalyticsSummary, error) {
	if q.To.Sub(q.From) > 92*24*time.Hour {
		return ports.AnalyticsSummary{}, ports.ValidationError(ports.FieldViolation{Path: "range", Message: "must be one of 24h, 7d, 30d, 90d"})
	}
	return s.store.Summarize(ctx, organizationID, q)
}
