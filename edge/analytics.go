package edge

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

type analyticsInput struct {
	Range  string `query:"range" maxLength:"8" doc:"24h (hourly buckets), 7d, 30d or 90d (daily buckets); default 7d" example:"30d"`
	Domain string `query:"domain" maxLength:"253" doc:"Only mail from this sending domain" example:"example.com"`
	Tag    string `query:"tag" maxLength:"512" doc:"Only mail carrying this tag, as name:value" example:"campaign:welcome"`
}

type analyticsCounts struct {
	Sent       int64 `json:"sent" doc:"Messages handed to the receiving server's queue for delivery (email.sent)"`
	Delivered  int64 `json:"delivered" doc:"Recipients whose server accepted the message"`
	Bounced    int64 `json:"bounced" doc:"Recipients whose server refused the message"`
	Complained int64 `json:"complained" doc:"Recipients who reported the message as spam"`
	Opened     int64 `json:"opened" doc:"Opens (tracked messages only)"`
	Clicked    int64 `json:"clicked" doc:"Link clicks (tracked messages only)"`
	Failed     int64 `json:"failed" doc:"Messages that could not be sent"`
	Delayed    int64 `json:"delayed" doc:"Deliveries deferred for a retry"`
}

type analyticsBucket struct {
	Start time.Time `json:"start" doc:"Start of the bucket (UTC), an hour or a day long"`
	analyticsCounts
}

type analyticsRates struct {
	Delivery  float64 `json:"delivery" doc:"delivered / sent, 0 when nothing was sent" example:"0.98"`
	Bounce    float64 `json:"bounce" doc:"bounced / sent" example:"0.01"`
	Complaint float64 `json:"complaint" doc:"complained / delivered" example:"0.0005"`
	Open      float64 `json:"open" doc:"opened / delivered" example:"0.4"`
	Click     float64 `json:"click" doc:"clicked / delivered" example:"0.05"`
}

type analyticsResponse struct {
	Range   string            `json:"range" doc:"The range answered" example:"30d"`
	Bucket  string            `json:"bucket" enum:"hour,day" doc:"Width of each bucket"`
	Domain  *string           `json:"domain" doc:"The sending domain asked for; null for all"`
	Tag     *string           `json:"tag" doc:"The tag asked for; null for all"`
	From    time.Time         `json:"from" doc:"Start of the first bucket"`
	To      time.Time         `json:"to" doc:"End of the range (now)"`
	Buckets []analyticsBucket `json:"buckets" nullable:"false" doc:"Every bucket of the range, oldest first, empty ones included"`
	Totals  analyticsCounts   `json:"totals" doc:"Sums over the range"`
	Rates   analyticsRates    `json:"rates" doc:"Rates over the range, from 0 to 1"`
}

func (s *Server) registerAnalyticsRoutes() {
	if s.core.Analytics == nil {
		return
	}
	register(s, huma.Operation{
		OperationID: "get-analytics", Method: http.MethodGet, Path: "/v1/analytics",
		Tags: []string{tagLogs}, Summary: "Sending analytics",
		Description: "Counts of sent, delivered, bounced, complained, opened, clicked, failed and delayed in " +
			"hourly (24h) or daily buckets, with totals and rates, for everything, one sending domain " +
			"(domain=) or one tag (tag=name:value). Answered from rollups; events appear within seconds.",
	}, access{kind: authSession}, s.getAnalytics, http.StatusBadRequest)
}

func (s *Server) getAnalytics(ctx context.Context, in *analyticsInput) (*body[analyticsResponse], error) {
	rng := in.Range
	if rng == "" {
		rng = ports.Range7d
	}
	r, ok := ports.AnalyticsRanges[rng]
	if !ok {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "range", Message: "must be one of 24h, 7d, 30d, 90d"})
	}
	if in.Domain != "" && in.Tag != "" {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "tag", Message: "cannot be combined with domain"})
	}
	now := time.Now().UTC()
	// The range ends now and covers Length: its first bucket is the one holding now-Length+Bucket, so a 24h
	// range has 24 hourly buckets and a 30d range 30 daily ones, the last of each being the current one.
	from := now.Add(-r.Length + r.Bucket).Truncate(r.Bucket)
	sum, err := s.core.Analytics.Summarize(ctx, principalFrom(ctx).OrganizationID, ports.AnalyticsQuery{
		From: from, To: now, Bucket: r.Bucket, Domain: in.Domain, Tag: in.Tag})
	if err != nil {
		return nil, err
	}
	out := analyticsResponse{Range: rng, Bucket: "day", From: from, To: now, Buckets: make([]analyticsBucket, 0, len(sum.Buckets)),
		Totals: countsOf(sum.Totals), Rates: ratesOf(sum.Totals)}
	if r.Bucket == time.Hour {
		out.Bucket = "hour"
	}
	if in.Domain != "" {
		out.Domain = &in.Domain
	}
	if in.Tag != "" {
		out.Tag = &in.Tag
	}
	for _, b := range sum.Buckets {
		out.Buckets = append(out.Buckets, analyticsBucket{Start: b.Start.UTC(), analyticsCounts: countsOf(b.AnalyticsCounts)})
	}
	return &body[analyticsResponse]{out}, nil
}

func countsOf(c ports.AnalyticsCounts) analyticsCounts {
	return analyticsCounts{Sent: c.Sent, Delivered: c.Delivered, Bounced: c.Bounced, Complained: c.Complained,
		Opened: c.Opened, Clicked: c.Clicked, Failed: c.Failed, Delayed: c.Delayed}
}

func ratesOf(c ports.AnalyticsCounts) analyticsRates {
	ratio := func(a, b int64) float64 {
		if b == 0 {
			return 0
		}
		return math.Round(float64(a)/float64(b)*1e6) / 1e6
	}
	return analyticsRates{Delivery: ratio(c.Delivered, c.Sent), Bounce: ratio(c.Bounced, c.Sent),
		Complaint: ratio(c.Complained, c.Delivered), Open: ratio(c.Opened, c.Delivered), Click: ratio(c.Clicked, c.Delivered)}
}
