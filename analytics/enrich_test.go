package analytics_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/postmill/postmill/analytics"
	"github.com/postmill/postmill/ports"
)

// fakeDimensions is a ports.MessageDimensionSource over a map, recording every call's refs.
type fakeDimensions struct {
	mu    sync.Mutex
	known map[ports.MessageRef]ports.MessageDimensions
	calls [][]ports.MessageRef
	err   error
}

func (f *fakeDimensions) MessageDimensions(_ context.Context, refs []ports.MessageRef) (map[ports.MessageRef]ports.MessageDimensions, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Clone(refs))
	if f.err != nil {
		return nil, f.err
	}
	out := map[ports.MessageRef]ports.MessageDimensions{}
	for _, r := range refs {
		if d, ok := f.known[r]; ok {
			out[r] = d
		}
	}
	return out, nil
}

const (
	orgA, orgB = "0190a000-0000-7000-8000-00000000000a", "0190b000-0000-7000-8000-00000000000b"
	msg1, msg2 = "0190a000-0000-7000-8000-000000000001", "0190a000-0000-7000-8000-000000000002"
	unknown    = "0190a000-0000-7000-8000-0000000000ff"
)

func event(org, msg string) ports.AnalyticsEvent {
	return ports.AnalyticsEvent{OrganizationID: org, MessageID: msg, Type: ports.EventEmailDelivered}
}

func newFake() *fakeDimensions {
	return &fakeDimensions{known: map[ports.MessageRef]ports.MessageDimensions{
		{OrganizationID: orgA, MessageID: msg1}: {Domain: "a.example", Tags: []string{"campaign:launch", "tier:gold"}},
		{OrganizationID: orgA, MessageID: msg2}: {Domain: "a.example"},
	}}
}

// TestEnricher: a batch's unremembered messages are read in one call, each asked once; events get their
// message's domain and tags; a message the store does not hold (another organization's id included)
// leaves its events bare and is asked again next time; a remembered one is not asked again.
func TestEnricher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	e := analytics.NewEnricher(f, 0)
	batch := []ports.AnalyticsEvent{event(orgA, msg1), event(orgA, msg2), event(orgA, msg1), event(orgB, msg1),
		event(orgA, unknown), event(orgA, "")}
	if err := e.Enrich(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || len(f.calls[0]) != 4 {
		t.Fatalf("calls %v; want one naming four messages", f.calls)
	}
	want := []struct {
		domain string
		tags   []string
	}{
		{"a.example", []string{"campaign:launch", "tier:gold"}}, {"a.example", nil},
		{"a.example", []string{"campaign:launch", "tier:gold"}}, {"", nil}, {"", nil}, {"", nil},
	}
	for i, w := range want {
		if batch[i].Domain != w.domain || !slices.Equal(batch[i].Tags, w.tags) {
			t.Errorf("event %d (%s/%s): %q %v; want %q %v", i, batch[i].OrganizationID, batch[i].MessageID,
				batch[i].Domain, batch[i].Tags, w.domain, w.tags)
		}
	}

	again := []ports.AnalyticsEvent{event(orgA, msg1), event(orgA, msg2), event(orgB, msg1)}
	if err := e.Enrich(ctx, again); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || !slices.Equal(f.calls[1], []ports.MessageRef{{OrganizationID: orgB, MessageID: msg1}}) {
		t.Fatalf("second batch asked %v; want only the message not found before", f.calls[1:])
	}
	if again[0].Domain != "a.example" || again[2].Domain != "" {
		t.Errorf("second batch: %+v", again)
	}

	if err := e.Enrich(ctx, []ports.AnalyticsEvent{event(orgA, msg1), event(orgA, "")}); err != nil || len(f.calls) != 2 {
		t.Errorf("a batch of remembered messages: %v, %d calls; want no call", err, len(f.calls))
	}
}

// TestEnricher_ErrorFailsTheBatch: an error of the store fails the batch and nothing is remembered.
func TestEnricher_ErrorFailsTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	f.err = errors.New("store down")
	e := analytics.NewEnricher(f, 0)
	if err := e.Enrich(ctx, []ports.AnalyticsEvent{event(orgA, msg1)}); !errors.Is(err, f.err) {
		t.Fatalf("Enrich = %v; want the store's error", err)
	}
	f.err = nil
	batch := []ports.AnalyticsEvent{event(orgA, msg1)}
	if err := e.Enrich(ctx, batch); err != nil || batch[0].Domain != "a.example" || len(f.calls) != 2 {
		t.Errorf("after the store is back: %v, %+v, %d calls", err, batch[0], len(f.calls))
	}
}

// TestEnricher_Bounded: the memory holds at most size messages; when full it is emptied, and a forgotten
// message is read again.
func TestEnricher_Bounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	e := analytics.NewEnricher(f, 1)
	for _, msg := range []string{msg1, msg2, msg1} {
		batch := []ports.AnalyticsEvent{event(orgA, msg)}
		if err := e.Enrich(ctx, batch); err != nil || batch[0].Domain != "a.example" {
			t.Fatalf("%s: %v, %+v", msg, err, batch[0])
		}
	}
	if len(f.calls) != 3 {
		t.Errorf("%d calls; want 3 (each message forgotten when the next is remembered)", len(f.calls))
	}
}
