package sending

import (
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestRefusalHints: the refusals a client can act on keep SPEC §7's exact message and say the way out in
// their hint, and the way out depends on the state: a suspended domain is verified again, a pending one is
// published first.
func TestRefusalHints(t *testing.T) {
	t.Parallel()
	paused := orgPausedError()
	if paused.Message != "organization sending is paused" || !strings.Contains(paused.Hint(), "/v1/admin/organizations/{id}/resume") {
		t.Errorf("org paused: message %q, hint %q", paused.Message, paused.Hint())
	}

	const id = "0190b9a2-0000-7000-8000-0000000000d1"
	suspended := unverifiedDomainHint(ports.Domain{ID: id, Status: ports.DomainSuspended})
	if !strings.Contains(suspended, "suspended") || !strings.Contains(suspended, "POST /v1/domains/"+id+"/verify") {
		t.Errorf("suspended domain hint = %q", suspended)
	}
	for _, st := range []ports.DomainStatus{ports.DomainPending, ports.DomainFailed} {
		h := unverifiedDomainHint(ports.Domain{ID: id, Status: st})
		if !strings.Contains(h, "is "+string(st)) || !strings.Contains(h, "GET /v1/domains/"+id) ||
			!strings.Contains(h, "POST /v1/domains/"+id+"/verify") || strings.Contains(h, "suspended") {
			t.Errorf("%s domain hint = %q", st, h)
		}
	}

	// Without a period the hint still says what happened, without a date.
	h := overLimitHint(ports.UsageLimit{Metric: ports.MetricEmailsSent, Max: 10})
	if !strings.HasPrefix(h, "The monthly allowance of 10 emails is used up; sends are accepted again when the period resets") {
		t.Errorf("hint without a period = %q", h)
	}
	if h := overLimitHint(ports.UsageLimit{Metric: "contacts", Max: 1}); h != "" {
		t.Errorf("hint of an unknown meter = %q, want none", h)
	}
}
