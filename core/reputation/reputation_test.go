package reputation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postmill/postmill/core/reputation"
	"github.com/postmill/postmill/ports"
)

type fakeStore struct {
	days   []ports.DomainDay
	health []ports.OrganizationHealth
	paused map[string]string
	caps   map[string]int64
	stepOn map[string]time.Time
}

func newFake() *fakeStore {
	return &fakeStore{paused: map[string]string{}, caps: map[string]int64{}, stepOn: map[string]time.Time{}}
}

func (f *fakeStore) ReputationDays(context.Context, string, time.Time) ([]ports.DomainDay, error) {
	return f.days, nil
}
func (f *fakeStore) BounceClassCounts(context.Context, string, time.Time) ([]ports.BounceClassCount, error) {
	return []ports.BounceClassCount{{Domain: "a.example", Class: "bad_mailbox", Count: 3}, {Domain: "a.example", Class: "spam_block", Count: 9}}, nil
}
func (f *fakeStore) Protection(_ context.Context, org string) (ports.Protection, error) {
	r, ok := f.paused[org]
	return ports.Protection{BroadcastsPaused: ok, Reason: r}, nil
}
func (f *fakeStore) SetBroadcastsPaused(_ context.Context, org string, paused bool, reason string, _ time.Time) (ports.Protection, error) {
	if paused {
		f.paused[org] = reason
	} else {
		delete(f.paused, org)
	}
	return ports.Protection{BroadcastsPaused: paused, Reason: reason}, nil
}
func (f *fakeStore) OrganizationsHealth(context.Context, time.Time) ([]ports.OrganizationHealth, error) {
	return f.health, nil
}
func (f *fakeStore) QueueDepths(context.Context, int) ([]ports.QueueDepth, error) {
	return []ports.QueueDepth{{Domain: "gmail.com", Queued: 7}}, nil
}
func (f *fakeStore) StepWarmup(_ context.Context, org string, c int64, day, _ time.Time) (bool, error) {
	if d, ok := f.stepOn[org]; ok && !d.Before(day) {
		return false, nil
	}
	f.stepOn[org], f.caps[org] = day, c
	return true, nil
}

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

var now = time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)

func TestReputationReport(t *testing.T) {
	st := newFake()
	d1, d2 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	st.days = []ports.DomainDay{
		{Domain: "b.example", ReputationDay: ports.ReputationDay{Date: d1, Sent: 1000, Delivered: 1000, HardBounced: 1, Complained: 2}},
		{Domain: "a.example", ReputationDay: ports.ReputationDay{Date: d2, Sent: 500, Delivered: 500, HardBounced: 30}},
		{Domain: "a.example", ReputationDay: ports.ReputationDay{Date: d1, Sent: 500, Delivered: 500, HardBounced: 10}},
		{Domain: "c.example", ReputationDay: ports.ReputationDay{Date: d1, Sent: 10, Delivered: 10, Complained: 5}},
	}
	svc, _ := reputation.New(reputation.Config{}, reputation.Deps{Store: st, Clock: &clock{now}})
	r, err := svc.Reputation(context.Background(), "o1", 7)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Since.Equal(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)) || len(r.Domains) != 3 {
		t.Fatalf("report: %+v", r)
	}
	a, b, c := r.Domains[0], r.Domains[1], r.Domains[2]
	// a: 40 hard bounces of 1000 (4%): warning; days oldest first; classes most frequent first.
	if a.Domain != "a.example" || a.Status != ports.ReputationWarning || a.BounceRate != 0.04 || !a.Days[0].Date.Equal(d1) || a.BounceClasses[0].Class != "spam_block" {
		t.Errorf("a = %+v", a)
	}
	// b: 2 complaints of 1000 delivered (0.2%): warning, under Gmail's 0.3%.
	if b.Status != ports.ReputationWarning || b.ComplaintRate != 0.002 {
		t.Errorf("b = %+v", b)
	}
	// c: a 50% complaint rate over 10 emails is below the minimum volume: good.
	if c.Status != ports.ReputationGood {
		t.Errorf("c = %+v", c)
	}
	for _, days := range []int{0, 91, -1} {
		_, err := svc.Reputation(context.Background(), "o1", days)
		var pe *ports.Error
		if !errors.As(err, &pe) || pe.Code != ports.CodeInvalidArgument || pe.Details[0].Path != "days" {
			t.Errorf("days=%d: %v", days, err)
		}
	}
}

func TestProtectionPausesOverTheLimit(t *testing.T) {
	st := newFake()
	st.health = []ports.OrganizationHealth{
		{OrganizationID: "spammy", Sent: 1000, Delivered: 1000, Complained: 3},  // 0.3%: at the limit
		{OrganizationID: "clean", Sent: 1000, Delivered: 1000, Complained: 2},   // 0.2%
		{OrganizationID: "bouncy", Sent: 1000, Delivered: 950, HardBounced: 50}, // 5%
		{OrganizationID: "small", Sent: 50, Delivered: 50, Complained: 50},      // under the minimum volume
	}
	svc, _ := reputation.New(reputation.Config{}, reputation.Deps{Store: st, Clock: &clock{now}})
	if err := svc.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.paused["spammy"]; !ok {
		t.Error("complaint rate at the limit did not pause broadcasts")
	}
	if _, ok := st.paused["bouncy"]; !ok {
		t.Error("hard-bounce rate at the limit did not pause broadcasts")
	}
	if _, ok := st.paused["clean"]; ok {
		t.Error("a clean organization was paused")
	}
	if _, ok := st.paused["small"]; ok {
		t.Error("an organization under the minimum volume was paused")
	}
	if p, _ := svc.ResumeBroadcasts(context.Background(), "spammy"); p.BroadcastsPaused {
		t.Error("resume did not lift the pause")
	}
}

func TestWarmupRaisesWhileHealthy(t *testing.T) {
	st := newFake()
	clk := &clock{now}
	svc, _ := reputation.New(reputation.Config{WarmupCeiling: 400}, reputation.Deps{Store: st, Clock: clk})
	st.health = []ports.OrganizationHealth{
		{OrganizationID: "healthy", Sent: 200, Delivered: 200, WarmupCap: 200},
		{OrganizationID: "sick", Sent: 200, Delivered: 200, HardBounced: 10, WarmupCap: 200}, // 5%: at risk
	}
	if err := svc.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st.caps["healthy"] != 300 || st.caps["sick"] != 200 {
		t.Fatalf("caps after day 1: %v", st.caps)
	}
	// Once a day: a second check the same day changes nothing.
	st.health[0].WarmupCap = 300
	_ = svc.Check(context.Background())
	if st.caps["healthy"] != 300 {
		t.Fatalf("second step the same day: %v", st.caps)
	}
	// The next day 300 × 1.5 = 450 passes the ceiling of 400: the cap is lifted.
	clk.t = now.AddDate(0, 0, 1)
	_ = svc.Check(context.Background())
	if st.caps["healthy"] != 0 {
		t.Fatalf("cap at the ceiling = %d, want 0 (lifted)", st.caps["healthy"])
	}
}

func TestPlatformView(t *testing.T) {
	st := newFake()
	st.health = []ports.OrganizationHealth{
		{OrganizationID: "clean", Sent: 1000, Delivered: 1000},
		{OrganizationID: "spammy", Sent: 1000, Delivered: 1000, Complained: 5},
	}
	svc, _ := reputation.New(reputation.Config{}, reputation.Deps{Store: st, Clock: &clock{now}})
	v, err := svc.PlatformView(context.Background())
	if err != nil || len(v.Organizations) != 2 || v.Organizations[0].OrganizationID != "spammy" ||
		v.Organizations[0].Status != ports.ReputationAtRisk || v.Organizations[1].Status != ports.ReputationGood ||
		len(v.Queues) != 1 || v.Window != 24*time.Hour {
		t.Fatalf("PlatformView = %+v, %v", v, err)
	}
}
