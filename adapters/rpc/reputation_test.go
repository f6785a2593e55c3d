package rpc_test

import (
	"context"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// reputationAnswers are what the fake core answers for the reputation service, kept beside fakeCore so
// that the reputation area adds a file rather than growing the fake.
type reputationAnswers struct {
	rep  ports.Reputation
	prot ports.Protection
	view ports.PlatformView
}

var reputationByFake sync.Map // *fakeCore -> *reputationAnswers

func (f *fakeCore) rep() *reputationAnswers {
	a, _ := reputationByFake.LoadOrStore(f, &reputationAnswers{})
	return a.(*reputationAnswers)
}

func (f *fakeCore) Reputation(ctx context.Context, orgID string, days int) (ports.Reputation, error) {
	return f.rep().rep, f.record(ctx, "Reputation", orgID, days)
}

func (f *fakeCore) Protection(ctx context.Context, orgID string) (ports.Protection, error) {
	return f.rep().prot, f.record(ctx, "Protection", orgID)
}

func (f *fakeCore) ResumeBroadcasts(ctx context.Context, orgID string) (ports.Protection, error) {
	return f.rep().prot, f.record(ctx, "ResumeBroadcasts", orgID)
}

func (f *fakeCore) PlatformView(ctx context.Context) (ports.PlatformView, error) {
	return f.rep().view, f.record(ctx, "PlatformView")
}

func reputationRoundTrips() []roundTrip {
	paused := ports.Protection{BroadcastsPaused: true, Reason: "complaint rate 0.40%", PausedAt: ptr(t1)}
	day := ports.ReputationDay{Date: t0, Sent: 1000, Delivered: 990, HardBounced: 7, SoftBounced: 3, Complained: 4}
	full := ports.Reputation{
		Days: 7, Since: t0,
		Thresholds: ports.ReputationThresholds{ComplaintWarning: 0.001, ComplaintAtRisk: 0.003, BounceWarning: 0.02, BounceAtRisk: 0.05, MinVolume: 100},
		Domains: []ports.DomainReputation{{
			Domain: "mail.acme.test", Days: []ports.ReputationDay{day, {Date: t1}}, Total: day,
			BounceRate: 0.007, ComplaintRate: 0.00404, Status: ports.ReputationAtRisk,
			BounceClasses: []ports.BounceClassCount{{Domain: "mail.acme.test", Class: "bad_mailbox", Count: 7}},
		}},
		Protection: paused,
	}
	view := ports.PlatformView{
		Window: 24 * time.Hour,
		Organizations: []ports.AdminOrganization{{
			OrganizationHealth: ports.OrganizationHealth{OrganizationID: "org1", Name: "Acme", Sent: 1000, Delivered: 990,
				HardBounced: 7, Complained: 4, WarmupCap: 500, Protection: paused, WarmupStepOn: ptr(t0)},
			BounceRate: 0.007, ComplaintRate: 0.004, Status: ports.ReputationAtRisk,
		}},
		Queues: []ports.QueueDepth{{Domain: "gmail.com", Queued: 12, Leased: 3, Outbox: 2, OldestQueuedAt: ptr(t1)}},
	}
	return []roundTrip{
		{
			name: "PlatformView", answer: func(f *fakeCore) { f.rep().view = view },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Reputation.PlatformView(ctx)
			},
			want: view, method: "PlatformView", args: nil,
		},
		{
			name: "Reputation", answer: func(f *fakeCore) { f.rep().rep = full },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Reputation.Reputation(ctx, "org1", 7)
			},
			want: full, method: "Reputation", args: []any{"org1", 7},
		},
		{
			name: "Protection", answer: func(f *fakeCore) { f.rep().prot = paused },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Reputation.Protection(ctx, "org1")
			},
			want: paused, method: "Protection", args: []any{"org1"},
		},
		{
			name: "ResumeBroadcasts", answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Reputation.ResumeBroadcasts(ctx, "org1")
			},
			want: ports.Protection{}, method: "ResumeBroadcasts", args: []any{"org1"},
		},
	}
}
