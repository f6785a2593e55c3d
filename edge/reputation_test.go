package edge_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// fakeAnalysis stands in for the billing, reputation and DMARC services.
type fakeAnalysis struct{}

func (fakeAnalysis) BillingSubscription(_ context.Context, org string) (ports.BillingSubscription, error) {
	return ports.BillingSubscription{OrganizationID: org, PlanID: "free", PlanName: "Free"}, nil
}
func (fakeAnalysis) Subscribe(_ context.Context, org, plan string) (ports.BillingSubscription, error) {
	if plan != "free" {
		return ports.BillingSubscription{}, ports.ValidationError(ports.FieldViolation{Path: "plan", Message: "unknown plan"})
	}
	return ports.BillingSubscription{OrganizationID: org, PlanID: plan}, nil
}
func (fakeAnalysis) Plans(context.Context) ([]ports.PlanOffer, error) {
	return []ports.PlanOffer{{ID: "free", Name: "Free"}}, nil
}
func (fakeAnalysis) Reputation(_ context.Context, _ string, days int) (ports.Reputation, error) {
	return ports.Reputation{Days: days}, nil
}
func (fakeAnalysis) Protection(context.Context, string) (ports.Protection, error) {
	return ports.Protection{}, nil
}
func (fakeAnalysis) ResumeBroadcasts(context.Context, string) (ports.Protection, error) {
	return ports.Protection{}, nil
}
func (fakeAnalysis) PlatformView(context.Context) (ports.PlatformView, error) {
	return ports.PlatformView{}, nil
}
func (fakeAnalysis) IngestDMARCReport(context.Context, []byte) (int, error) { return 0, nil }
func (fakeAnalysis) DMARCSummary(context.Context, string, int, string) ([]ports.DMARCSourceSummary, error) {
	return nil, nil
}

// TestBillingReputationOpenAPI holds the billing, reputation, DMARC and platform routes to the rules the
// default fake core's routes meet: every field and parameter described, every body example accepted.
func TestBillingReputationOpenAPI(t *testing.T) {
	t.Parallel()
	fake := newFakeCore()
	core := fake.core()
	core.Billing, core.Reputation, core.DMARC = fakeAnalysis{}, fakeAnalysis{}, fakeAnalysis{}
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	b := &testBundle{fake: fake, srv: srv, logs: &syncBuffer{}, reg: prometheus.NewRegistry()}
	doc := mustOpenAPI(t, b)
	ops := 0
	doc.eachOperation(func(method, path string, op openAPIOperation) {
		if !strings.HasPrefix(path, "/v1/billing") && !strings.HasPrefix(path, "/v1/reputation") &&
			path != "/v1/admin/platform" && !strings.HasSuffix(path, "/broadcasts/resume") {
			return
		}
		ops++
		for _, p := range op.Parameters {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s %s parameter %s has no description", method, path, p.Name)
			}
		}
		if op.RequestBody == nil {
			return
		}
		examples := op.RequestBody.Content["application/json"].values()
		if len(examples) == 0 {
			t.Errorf("%s %s has no body example", method, path)
		}
		for i, ex := range examples {
			if r := b.do(t, method, path, credentialFor(op), ex); r.status >= 400 {
				t.Errorf("%s %s: example %d refused: %d %s", method, path, i, r.status, r.raw)
			}
		}
	})
	if ops != 7 {
		t.Errorf("%d operations documented, want 7", ops)
	}
	for name, s := range doc.Components.Schemas {
		for prop, p := range s.Properties {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
}
