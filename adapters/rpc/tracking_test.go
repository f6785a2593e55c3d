package rpc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/postmill/postmill/ports"
)

// sealedToken stands for a token the core made: opaque base64url, as the edge finds it in the path.
const sealedToken = "AZC5ogAAcACAAAAAAAAAAQ.tK9qv3l5Yg0X8s1m2Q-_x"

func trackingRoundTrips() []roundTrip {
	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }

	// Tokens reach the core byte for byte: one that is not UTF-8 (a mangled or hostile URL) included,
	// so that the core, not the hop, refuses it.
	for _, token := range []string{sealedToken, "", "not-a-token", "\xff\xfe%2F..", "ünïcödé/../x"} {
		add(roundTrip{
			name:   fmt.Sprintf("Open/%q", token),
			answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return nil, c.Tracking.Open(ctx, token)
			},
			want:   nil,
			method: "Open",
			args:   []any{token},
		})
		add(roundTrip{
			name:   fmt.Sprintf("Click/%q", token),
			answer: func(f *fakeCore) { f.clickURL = "https://example.org/pricing?plan=pro&utm_source=x#top" },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Tracking.Click(ctx, token)
			},
			want:   "https://example.org/pricing?plan=pro&utm_source=x#top",
			method: "Click",
			args:   []any{token},
		})
	}
	add(roundTrip{
		name:   "Click/zero answer",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Tracking.Click(ctx, sealedToken)
		},
		want:   "",
		method: "Click",
		args:   []any{sealedToken},
	})
	return trips
}

// TestTrackingRefusalCrosses checks that a token the core refuses comes back as the core's own error
// (the edge answers a 404 for it, a pixel for an open), not as an internal failure of the hop, even
// when the token is not UTF-8.
func TestTrackingRefusalCrosses(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]*ports.Error{
		"not ours": ports.Errorf(ports.CodeInvalidArgument, "tracking token is not valid"),
		"gone":     ports.NotFound("message not found"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &fakeCore{err: want, clickURL: "https://example.org"})
			ctx := context.Background()
			for _, token := range []string{sealedToken, "\xc3\x28-bad-utf8"} {
				assertSameError(t, b.client.Core().Tracking.Open(ctx, token), want)
				url, err := b.client.Core().Tracking.Click(ctx, token)
				assertSameError(t, err, want)
				if url != "" {
					t.Errorf("Click with an error answered %q, want no URL", url)
				}
			}
			if calls := b.fake.recorded(); len(calls) != 4 {
				t.Errorf("implementation calls = %d, want 4: every token reaches the core", len(calls))
			}
		})
	}
}
