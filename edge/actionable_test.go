package edge_test

import (
	"slices"
	"testing"

	"github.com/postmill/postmill/ports"
)

// Answers a user can act on without the docs: each DNS record names its DNS type, a verify answer says per
// record what DNS returned and what is wrong, a blocked webhook delivery says why, and the refusals SPEC §7
// words exactly carry a hint beside their message.

func TestDomainRecordsSayTheirTypeAndProblem(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	recs := fake.domain.Records
	for i := range recs {
		recs[i].RecordType = map[string]string{
			ports.RecordSPF: ports.RRTypeTXT, ports.RecordDKIM: ports.RRTypeTXT, ports.RecordDMARC: ports.RRTypeTXT,
			ports.RecordReturnPath: ports.RRTypeCNAME, ports.RecordTracking: ports.RRTypeCNAME,
		}[recs[i].Type]
	}
	const problem = "the SPF record at example.org does not authorise Postmill; add include:spf.postmill.local to it"
	recs[0].Verified = false
	recs[0].Found = []string{"v=spf1 include:_spf.google.com ~all", "google-site-verification=abc"}
	recs[0].Problem = problem
	b := MustStartEdge(t, fake, nil)

	r := mustStatus(t, b.do(t, "POST", "/v1/domains/"+domainID+"/verify", userToken, nil), 201)
	records, _ := r.body["records"].([]any)
	if len(records) != 5 {
		t.Fatalf("verify: %s", r.raw)
	}
	var types []string
	for _, rec := range records {
		types = append(types, rec.(map[string]any)["recordType"].(string))
	}
	if want := []string{"TXT", "TXT", "TXT", "CNAME", "CNAME"}; !slices.Equal(types, want) {
		t.Errorf("recordType = %v, want %v", types, want)
	}
	spf := records[0].(map[string]any)
	found, _ := spf["found"].([]any)
	if spf["problem"] != problem || len(found) != 2 || found[0] != "v=spf1 include:_spf.google.com ~all" {
		t.Errorf("failing SPF record: %v", spf)
	}
	// A record without a problem carries neither field.
	if _, ok := records[1].(map[string]any)["problem"]; ok {
		t.Errorf("record without a problem has one: %v", records[1])
	}
	if _, ok := records[1].(map[string]any)["found"]; ok {
		t.Errorf("record with nothing found has found: %v", records[1])
	}

	r = mustStatus(t, b.do(t, "GET", "/v1/domains/"+domainID+"/dns-records", userToken, nil), 200)
	if rt := r.list[3].(map[string]any)["recordType"]; rt != "CNAME" {
		t.Errorf("dns-records RETURN_PATH recordType = %v: %s", rt, r.raw)
	}
}

func TestBlockedWebhookDeliverySaysWhy(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	const why = "hooks.example.com resolves to 10.0.0.5, a private address (10.0.0.0/8, RFC 1918); an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5"
	fake.deliveries[0].Status = ports.WebhookBlocked
	fake.deliveries[0].BlockedReason = why
	fake.deliveries[0].NextRetryAt, fake.deliveries[0].ResponseCode = nil, 0
	// A reason on a delivery that is not blocked is not shown: it would explain a state the delivery is not in.
	fake.deliveries[1].BlockedReason = "stale"
	b := MustStartEdge(t, fake, nil)

	r := mustStatus(t, b.do(t, "GET", "/v1/webhook-events", starKey, nil), 200)
	if len(r.list) != 2 {
		t.Fatalf("webhook-events: %s", r.raw)
	}
	blocked, delivered := r.list[0].(map[string]any), r.list[1].(map[string]any)
	if blocked["status"] != "blocked" || blocked["responseCode"] != float64(0) || blocked["blockedReason"] != why {
		t.Errorf("blocked delivery: %v", blocked)
	}
	if v, ok := delivered["blockedReason"]; !ok || v != nil {
		t.Errorf("delivered delivery blockedReason = %v (present %v), want null", v, ok)
	}
	r = mustStatus(t, b.do(t, "POST", "/v1/webhooks/"+webhookID+"/test", starKey, nil), 201)
	if r.body["blockedReason"] != why {
		t.Errorf("test delivery: %s", r.raw)
	}
}

func TestRefusalsCarryAHint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err     *ports.Error
		status  int
		errWord string
		message string
	}{
		{(&ports.Error{Code: ports.CodePaymentRequired, Reason: "plan_limit_exceeded", Message: "Plan limit reached for emails_sent",
			Fields: map[string]any{"metric": ports.MetricEmailsSent, "limit": int64(3000)}}).
			WithHint("The monthly allowance of 3000 emails is used up; sends are accepted again from 2026-12-01T00:00:00Z"),
			402, "plan_limit_exceeded", "Plan limit reached for emails_sent"},
		{(&ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"}).
			WithHint("ask a platform admin to resume it"), 403, "org_suspended", "organization sending is paused"},
		{ports.Errorf(ports.CodeInvalidArgument, "domain example.org is not verified").
			WithHint("The domain is suspended; it sends again once POST /v1/domains/x/verify finds its required records"),
			400, "Bad Request", "domain example.org is not verified"},
	}
	for _, c := range cases {
		t.Run(c.errWord, func(t *testing.T) {
			t.Parallel()
			fake := newFakeCore()
			fake.sendErr = c.err
			b := MustStartEdge(t, fake, nil)
			r := b.do(t, "POST", "/v1/emails", sendKey, minimal())
			body := mustError(t, r, c.status, c.errWord, c.message)
			if body["hint"] != c.err.Hint() {
				t.Errorf("hint = %v, want %q: %s", body["hint"], c.err.Hint(), r.raw)
			}
			if c.status == 402 && (body["metric"] != "emails_sent" || body["limit"] != float64(3000)) {
				t.Errorf("402 lost its coded fields: %s", r.raw)
			}
			if _, ok := body["details"]; ok {
				t.Errorf("the hint must not travel as validation details: %s", r.raw)
			}
		})
	}

	// An error without a hint has no hint field.
	fake := newFakeCore()
	fake.sendErr = ports.Errorf(ports.CodeInvalidArgument, "recipient suppressed: bob@example.net")
	b := MustStartEdge(t, fake, nil)
	if _, ok := mustError(t, b.do(t, "POST", "/v1/emails", sendKey, minimal()), 400, "", "")["hint"]; ok {
		t.Error("an error without a hint carries one")
	}
}
