package rpc_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// broadcastAnswers are what the fake core answers for the broadcast and unsubscribe services, kept beside
// fakeCore so that the broadcast area adds a file rather than growing the fake.
type broadcastAnswers struct {
	broadcast  ports.Broadcast
	broadcasts []ports.Broadcast
	stats      ports.BroadcastStats
	recipients []ports.BroadcastRecipient
	total      int64
	view       ports.UnsubscribeView
}

var broadcastByFake sync.Map // *fakeCore -> *broadcastAnswers

func (f *fakeCore) bc() *broadcastAnswers {
	a, _ := broadcastByFake.LoadOrStore(f, &broadcastAnswers{})
	return a.(*broadcastAnswers)
}

func (f *fakeCore) CreateBroadcast(ctx context.Context, orgID string, b ports.NewBroadcast) (ports.Broadcast, error) {
	return f.bc().broadcast, f.record(ctx, "CreateBroadcast", orgID, b)
}
func (f *fakeCore) ListBroadcasts(ctx context.Context, orgID string, limit, offset int) ([]ports.Broadcast, error) {
	return f.bc().broadcasts, f.record(ctx, "ListBroadcasts", orgID, limit, offset)
}
func (f *fakeCore) GetBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	return f.bc().broadcast, f.record(ctx, "GetBroadcast", orgID, id)
}
func (f *fakeCore) UpdateBroadcast(ctx context.Context, orgID, id string, p ports.BroadcastPatch) (ports.Broadcast, error) {
	return f.bc().broadcast, f.record(ctx, "UpdateBroadcast", orgID, id, p)
}
func (f *fakeCore) DeleteBroadcast(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteBroadcast", orgID, id)
}
func (f *fakeCore) SendBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	return f.bc().broadcast, f.record(ctx, "SendBroadcast", orgID, id)
}
func (f *fakeCore) ScheduleBroadcast(ctx context.Context, orgID, id string, at time.Time) (ports.Broadcast, error) {
	return f.bc().broadcast, f.record(ctx, "ScheduleBroadcast", orgID, id, at)
}
func (f *fakeCore) CancelBroadcast(ctx context.Context, orgID, id string) (ports.Broadcast, error) {
	return f.bc().broadcast, f.record(ctx, "CancelBroadcast", orgID, id)
}
func (f *fakeCore) BroadcastStats(ctx context.Context, orgID, id string) (ports.BroadcastStats, error) {
	return f.bc().stats, f.record(ctx, "BroadcastStats", orgID, id)
}

// recipientsAnswer carries BroadcastRecipients' two results through a round trip as one value.
type recipientsAnswer struct {
	Recipients []ports.BroadcastRecipient
	Total      int64
}

func (f *fakeCore) BroadcastRecipients(ctx context.Context, orgID, id string, limit, offset int) ([]ports.BroadcastRecipient, int64, error) {
	return f.bc().recipients, f.bc().total, f.record(ctx, "BroadcastRecipients", orgID, id, limit, offset)
}
func (f *fakeCore) PreviewUnsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	return f.bc().view, f.record(ctx, "PreviewUnsubscribe", token)
}
func (f *fakeCore) Unsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	return f.bc().view, f.record(ctx, "Unsubscribe", token)
}

func broadcastRoundTrips() []roundTrip {
	full := ports.Broadcast{
		ID: "b1", OrganizationID: "org1", Name: "November", Subject: "Hi {{ contact.firstName }}", From: "news@acme.test",
		ReplyTo: "r@acme.test", HTML: "<p>h</p>", Text: "t", TemplateID: "tpl1", SegmentID: "s1", TopicID: "tp1",
		ScheduledAt: ptr(t0), Status: ports.BroadcastSending, Cursor: "c9", PausedUntil: ptr(t1), FailureReason: "cap",
		StartedAt: ptr(t0), CompletedAt: ptr(t1), CreatedAt: t0, UpdatedAt: t1,
	}
	nb := ports.NewBroadcast{Name: "n", Subject: "s", From: "f@acme.test", ReplyTo: "r@acme.test", HTML: "h", Text: "t",
		TemplateID: "tpl", SegmentID: "seg", TopicID: "top", ScheduledAt: ptr(t1)}
	patch := ports.BroadcastPatch{Name: ptr("n"), Subject: ptr(""), From: ptr("f@acme.test"), ReplyTo: ptr(""),
		HTML: ptr("h"), Text: ptr("t"), TemplateID: ptr("tpl"), SegmentID: ptr("seg"), TopicID: ptr("top"),
		ScheduledAt: ptr(t1), ClearSegment: true, ClearTopic: true, ClearScheduledAt: true}
	stats := ports.BroadcastStats{Recipients: 9, Sent: 8, Delivered: 7, Bounced: 1, Complained: 2, Opened: 3, Clicked: 4, Unsubscribed: 5, Failed: 6}
	rs := []ports.BroadcastRecipient{{ContactID: "c1", Email: "a@b.test", MessageID: "m1", Status: "delivered", CreatedAt: t0},
		{ContactID: "c2", Email: "b@b.test", Status: "suppressed", CreatedAt: t1}}
	view := ports.UnsubscribeView{MaskedEmail: "a•••@b.test", TopicName: "News", PreferencesToken: "prefs-token"}

	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }
	one := func(method string, call func(context.Context, ports.Core) (any, error), args ...any) {
		add(roundTrip{name: method, answer: func(f *fakeCore) { f.bc().broadcast = full }, call: call, want: full, method: method, args: args})
	}
	one("CreateBroadcast", func(ctx context.Context, c ports.Core) (any, error) {
		return c.Broadcasts.CreateBroadcast(ctx, "org1", nb)
	}, "org1", nb)
	one("GetBroadcast", func(ctx context.Context, c ports.Core) (any, error) {
		return c.Broadcasts.GetBroadcast(ctx, "org1", "b1")
	}, "org1", "b1")
	one("UpdateBroadcast", func(ctx context.Context, c ports.Core) (any, error) {
		return c.Broadcasts.UpdateBroadcast(ctx, "org1", "b1", patch)
	}, "org1", "b1", patch)
	one("SendBroadcast", func(ctx context.Context, c ports.Core) (any, error) {
		return c.Broadcasts.SendBroadcast(ctx, "org1", "b1")
	}, "org1", "b1")
	one("ScheduleBroadcast", func(ctx context.Context, c ports.Core) (any, error) {
		return c.Broadcasts.ScheduleBroadcast(ctx, "org1", "b1", t1)
	}, "org1", "b1", t1)
	one("CancelBroadcast", func(ctx context.Context, c ports.Core) (any, error) {
		return c.Broadcasts.CancelBroadcast(ctx, "org1", "b1")
	}, "org1", "b1")
	add(roundTrip{name: "UpdateBroadcast/empty patch", answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Broadcasts.UpdateBroadcast(ctx, "org1", "b1", ports.BroadcastPatch{})
		},
		want: ports.Broadcast{}, method: "UpdateBroadcast", args: []any{"org1", "b1", ports.BroadcastPatch{}}})
	add(roundTrip{name: "ListBroadcasts", answer: func(f *fakeCore) { f.bc().broadcasts = []ports.Broadcast{full, {ID: "b2"}} },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Broadcasts.ListBroadcasts(ctx, "org1", 2, 11)
		},
		want:   []ports.Broadcast{full, {ID: "b2"}},
		method: "ListBroadcasts", args: []any{"org1", 2, 11}})
	add(roundTrip{name: "DeleteBroadcast", answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Broadcasts.DeleteBroadcast(ctx, "org1", "b1")
		},
		want:   nil,
		method: "DeleteBroadcast", args: []any{"org1", "b1"}})
	add(roundTrip{name: "BroadcastStats", answer: func(f *fakeCore) { f.bc().stats = stats },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Broadcasts.BroadcastStats(ctx, "org1", "b1")
		},
		want:   stats,
		method: "BroadcastStats", args: []any{"org1", "b1"}})
	add(roundTrip{name: "BroadcastRecipients", answer: func(f *fakeCore) { f.bc().recipients, f.bc().total = rs, 41 },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			items, total, err := c.Broadcasts.BroadcastRecipients(ctx, "org1", "b1", 200, 40)
			if err != nil {
				return recipientsAnswer{}, err
			}
			return recipientsAnswer{Recipients: items, Total: total}, nil
		},
		want:   recipientsAnswer{Recipients: rs, Total: 41},
		method: "BroadcastRecipients", args: []any{"org1", "b1", 200, 40}})
	// Tokens reach the core byte for byte, one that is not UTF-8 included, so the core refuses it.
	for _, token := range []string{sealedToken, "", "\xff\xfe%2F.."} {
		for _, m := range []string{"PreviewUnsubscribe", "Unsubscribe"} {
			add(roundTrip{name: fmt.Sprintf("%s/%q", m, token), answer: func(f *fakeCore) { f.bc().view = view },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					if m == "Unsubscribe" {
						return c.Unsubscribe.Unsubscribe(ctx, token)
					}
					return c.Unsubscribe.PreviewUnsubscribe(ctx, token)
				},
				want: view, method: m, args: []any{token}})
		}
	}
	return trips
}
