package sending

import (
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// Messages of SPEC §7's metering refusals.
const (
	reasonPlanLimit = "plan_limit_exceeded"
	reasonWarmupCap = "warmup_cap_reached"
	msgWarmupCap    = "warm-up daily send cap reached"
)

// sendUsage decides what an accepted send may use (SPEC §4.2, §8): one unit per recipient, counted after
// to, cc and bcc are deduplicated, in the calendar month and the day of now, both in UTC. Scheduled and
// sandbox sends count like any other: their plan and metering checks run at request time, and a scheduled
// message is not metered again when the scheduler promotes it. An idempotent replay is not metered: Send
// answers it before metering, and one racing the first use of its key is left unmetered by the store.
//
// The monthly allowance (plan.MonthlyLimit, metric emails_sent) comes first and the daily warm-up cap
// (plan.WarmupCap, metric emails_sent_daily) second, so a send that would pass both is refused as over the
// allowance: 402 for the rest of the month rather than 429 until tomorrow. A limit of 0 counts without
// limiting. A send without recipients meters nothing.
func sendUsage(plan ports.Plan, recipients int, now time.Time) ports.Usage {
	if recipients <= 0 {
		return ports.Usage{}
	}
	day := utcDay(now)
	month := time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC)
	return ports.Usage{
		Units: int64(recipients),
		Limits: []ports.UsageLimit{
			{Metric: ports.MetricEmailsSent, Period: month, Max: limitOrNone(plan.MonthlyLimit)},
			{Metric: ports.MetricEmailsSentDaily, Period: day, Max: limitOrNone(plan.WarmupCap)},
		},
	}
}

// limitOrNone reads a plan limit, where 0 (or less) means none.
func limitOrNone(limit int64) int64 {
	if limit <= 0 {
		return ports.NoLimit
	}
	return limit
}

// overLimitError is SPEC §7's refusal of a send whose units did not fit under limit: 402
// plan_limit_exceeded naming the metric and the allowance for the monthly meter, 429 warmup_cap_reached
// (retry tomorrow, so no retryAfterSeconds) for the daily one; each with a hint saying when it ends.
func overLimitError(limit ports.UsageLimit) error {
	switch limit.Metric {
	case ports.MetricEmailsSent:
		return (&ports.Error{
			Code:    ports.CodePaymentRequired,
			Reason:  reasonPlanLimit,
			Message: "Plan limit reached for " + ports.MetricEmailsSent,
			Fields:  map[string]any{"metric": ports.MetricEmailsSent, "limit": limit.Max},
		}).WithHint(overLimitHint(limit))
	case ports.MetricEmailsSentDaily:
		return (&ports.Error{Code: ports.CodeResourceExhausted, Reason: reasonWarmupCap, Message: msgWarmupCap}).
			WithHint(overLimitHint(limit))
	default:
		return fmt.Errorf("sending: the store refused a send over a limit of unknown meter %q", limit.Metric)
	}
}

// utcDay is the start of now's UTC day: the warm-up cap's period, whose month is the allowance's.
func utcDay(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
}
