package sending

import (
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// Hints of the send refusals a client can act on. SPEC §7 fixes the messages word for word, so what to do
// about a refusal travels beside the message as ports.FieldHint (the REST body's `hint`).
const (
	hintOrgPaused = "A platform admin paused sending for this organization; sends are refused, and nothing is " +
		"queued, until an admin resumes it (POST /v1/admin/organizations/{id}/resume). Scheduled messages are " +
		"checked again when they fall due."
	hintDomainNotFound = "Add the domain with POST /v1/domains, publish the DNS records of the answer, then call " +
		"POST /v1/domains/{id}/verify."
)

// unverifiedDomainHint says how a domain that may not send gets out of its state: a suspended one by a
// verify run that finds every required record (the only way out of suspended), a pending or failed one by
// publishing its records and verifying.
func unverifiedDomainHint(d ports.Domain) string {
	if d.Status == ports.DomainSuspended {
		return fmt.Sprintf("The domain is suspended; it sends again once POST /v1/domains/%s/verify finds its "+
			"required records (SPF, DKIM, RETURN_PATH) published.", d.ID)
	}
	return fmt.Sprintf("The domain is %s: publish the DNS records of GET /v1/domains/%s, then call POST "+
		"/v1/domains/%s/verify; each record of its answer says what DNS returned and what is wrong.", d.Status, d.ID, d.ID)
}

// overLimitHint says when a metered refusal ends: at the start of the next period of the limit (month or
// UTC day), or sooner if an admin raises the organization's limits.
func overLimitHint(limit ports.UsageLimit) string {
	var what string
	var next time.Time
	switch limit.Metric {
	case ports.MetricEmailsSent:
		what = fmt.Sprintf("The monthly allowance of %d emails is used up", limit.Max)
		if !limit.Period.IsZero() {
			next = limit.Period.UTC().AddDate(0, 1, 0)
		}
	case ports.MetricEmailsSentDaily:
		what = fmt.Sprintf("Today's warm-up cap of %d emails is used up", limit.Max)
		if !limit.Period.IsZero() {
			next = limit.Period.UTC().AddDate(0, 0, 1)
		}
	default:
		return ""
	}
	when := "when the period resets"
	if !next.IsZero() {
		when = "from " + next.Format(time.RFC3339)
	}
	return what + "; sends are accepted again " + when + ", or sooner if a platform admin raises the " +
		"organization's limits (PUT /v1/admin/organizations/{id}/limits). GET /v1/billing/subscription shows the usage."
}
