package sending

import (
	"errors"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestSendUsage(t *testing.T) {
	t.Parallel()
	utc := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		name         string
		plan         ports.Plan
		recipients   int
		now          time.Time
		wantUnits    int64
		wantMonth    time.Time
		wantDay      time.Time
		wantMonthMax int64
		wantDayMax   int64
	}{
		{"both limits", ports.Plan{MonthlyLimit: 3000, WarmupCap: 100}, 3, time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC),
			3, utc(2026, 3, 1), utc(2026, 3, 14), 3000, 100},
		{"no warm-up cap counts the day without limiting it", ports.Plan{MonthlyLimit: 50}, 1, time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC),
			1, utc(2026, 3, 1), utc(2026, 3, 14), 50, ports.NoLimit},
		{"no limits still count", ports.Plan{}, 7, time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC),
			7, utc(2026, 3, 1), utc(2026, 3, 14), ports.NoLimit, ports.NoLimit},
		{"a negative limit is none", ports.Plan{MonthlyLimit: -1, WarmupCap: -5}, 2, time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC),
			2, utc(2026, 3, 1), utc(2026, 3, 14), ports.NoLimit, ports.NoLimit},
		// 23:30 at UTC-5 on 31 January is 1 February in UTC: a new day and a new month for both meters.
		{"periods are UTC", ports.Plan{MonthlyLimit: 10, WarmupCap: 5}, 1, time.Date(2026, 1, 31, 23, 30, 0, 0, time.FixedZone("EST", -5*3600)),
			1, utc(2026, 2, 1), utc(2026, 2, 1), 10, 5},
		{"last instant of a month", ports.Plan{MonthlyLimit: 10}, 4, time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
			4, utc(2026, 12, 1), utc(2026, 12, 31), 10, ports.NoLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := sendUsage(tt.plan, tt.recipients, tt.now)
			if u.Units != tt.wantUnits || len(u.Limits) != 2 {
				t.Fatalf("usage = %+v, want %d units under two limits", u, tt.wantUnits)
			}
			// The allowance comes first: a send over both limits is refused as over the allowance.
			month, day := u.Limits[0], u.Limits[1]
			if month.Metric != ports.MetricEmailsSent || !month.Period.Equal(tt.wantMonth) || month.Period.Location() != time.UTC || month.Max != tt.wantMonthMax {
				t.Errorf("monthly limit = %+v, want %s from %v up to %d", month, ports.MetricEmailsSent, tt.wantMonth, tt.wantMonthMax)
			}
			if day.Metric != ports.MetricEmailsSentDaily || !day.Period.Equal(tt.wantDay) || day.Period.Location() != time.UTC || day.Max != tt.wantDayMax {
				t.Errorf("daily limit = %+v, want %s from %v up to %d", day, ports.MetricEmailsSentDaily, tt.wantDay, tt.wantDayMax)
			}
		})
	}
}

func TestSendUsage_NoRecipientsMetersNothing(t *testing.T) {
	t.Parallel()
	if u := sendUsage(ports.Plan{MonthlyLimit: 1}, 0, time.Now()); u.Units != 0 || len(u.Limits) != 0 {
		t.Fatalf("usage = %+v, want nothing", u)
	}
}

func TestOverLimitError(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		limit      ports.UsageLimit
		wantCode   ports.Code
		wantReason string
		wantMsg    string
		wantFields map[string]any
	}{
		{"monthly allowance", ports.UsageLimit{Metric: ports.MetricEmailsSent, Period: at, Max: 3000},
			ports.CodePaymentRequired, "plan_limit_exceeded", "Plan limit reached for emails_sent",
			map[string]any{"metric": "emails_sent", "limit": int64(3000), "hint": "The monthly allowance of 3000 emails " +
				"is used up; sends are accepted again from 2026-04-01T00:00:00Z, or sooner if a platform admin raises " +
				"the organization's limits (PUT /v1/admin/organizations/{id}/limits). GET /v1/billing/subscription shows the usage."}},
		{"warm-up cap", ports.UsageLimit{Metric: ports.MetricEmailsSentDaily, Period: at, Max: 50},
			ports.CodeResourceExhausted, "warmup_cap_reached", "warm-up daily send cap reached",
			map[string]any{"hint": "Today's warm-up cap of 50 emails is used up; sends are accepted again from " +
				"2026-03-02T00:00:00Z, or sooner if a platform admin raises the organization's limits " +
				"(PUT /v1/admin/organizations/{id}/limits). GET /v1/billing/subscription shows the usage."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, ok := ports.AsError(overLimitError(tt.limit))
			if !ok || e.Code != tt.wantCode || e.Reason != tt.wantReason || e.Message != tt.wantMsg || e.RetryAfterSeconds != 0 {
				t.Fatalf("error = %+v, want %s %s %q", e, tt.wantCode, tt.wantReason, tt.wantMsg)
			}
			if len(e.Fields) != len(tt.wantFields) {
				t.Fatalf("fields = %v, want %v", e.Fields, tt.wantFields)
			}
			for k, v := range tt.wantFields {
				if e.Fields[k] != v {
					t.Fatalf("field %s = %#v, want %#v", k, e.Fields[k], v)
				}
			}
		})
	}
	// A meter the core never asked for is a store fault, not a refusal the caller could act on.
	err := overLimitError(ports.UsageLimit{Metric: "contacts", Max: 1})
	if err == nil || ports.ErrorCode(err) == ports.CodePaymentRequired || ports.ErrorCode(err) == ports.CodeResourceExhausted {
		t.Fatalf("unknown meter: %v", err)
	}
	var pe *ports.Error
	if errors.As(err, &pe) {
		t.Fatalf("unknown meter gave a coded error %+v", pe)
	}
}
