package tracking

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// untouchedStore fails the test on any call: the paths under test must refuse a token before reaching the
// store. The store-backed paths are tested against PostgreSQL where the store is wired.
type untouchedStore struct{ tb testing.TB }

func (s untouchedStore) MessageHTML(context.Context, string, string) (string, error) {
	s.tb.Errorf("MessageHTML called")
	return "", ports.NotFound("message not found")
}

func (s untouchedStore) RecordEngagement(context.Context, ports.Event, bool) (bool, error) {
	s.tb.Errorf("RecordEngagement called")
	return false, nil
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// MustService builds a Service over tr whose store must not be reached.
func MustService(tb testing.TB, tr *Tracker) *Service {
	tb.Helper()
	s, err := NewService(tr, untouchedStore{tb}, fixedClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)), nil)
	if err != nil {
		tb.Fatalf("NewService: %v", err)
	}
	return s
}

func TestServiceRefusesTokens(t *testing.T) {
	t.Parallel()
	tr := MustTracker(t)
	svc := MustService(t, tr)
	ctx := context.Background()
	open := MustEncode(t, tr, openToken())
	click := MustEncode(t, tr, clickToken(0, "https://a.test/"))
	other, err := NewTracker(MustKeyring(t, masterB), "https")
	if err != nil {
		t.Fatal(err)
	}
	foreign := MustEncode(t, other, clickToken(0, "https://a.test/"))

	for name, tok := range map[string]string{
		"open token at the click route": open,
		"foreign token":                 foreign,
		"truncated":                     click[:len(click)-1],
		"empty":                         "",
	} {
		if url, err := svc.Click(ctx, tok); ports.ErrorCode(err) != ports.CodeInvalidArgument || url != "" {
			t.Errorf("Click(%s) = %q, %v; want invalid_argument", name, url, err)
		}
	}
	for name, tok := range map[string]string{
		"click token at the open route": click,
		"foreign token":                 MustEncode(t, other, openToken()),
		"truncated":                     open[:10],
	} {
		if err := svc.Open(ctx, tok); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("Open(%s) = %v; want invalid_argument", name, err)
		}
	}
}

func TestNewServiceRequires(t *testing.T) {
	t.Parallel()
	if _, err := NewService(nil, untouchedStore{t}, nil, nil); err == nil {
		t.Error("NewService without a tracker succeeded")
	}
	if _, err := NewService(MustTracker(t), nil, nil, nil); err == nil {
		t.Error("NewService without a store succeeded")
	}
}

func TestResolveLink(t *testing.T) {
	t.Parallel()
	links := []string{"https://a.test/", "https://b.test/", "https://a.test/"}
	tests := []struct {
		name   string
		tok    Token
		want   string
		wantOK bool
	}{
		{"index and digest agree", clickToken(1, "https://b.test/"), "https://b.test/", true},
		{"the link moved: found by digest", clickToken(0, "https://b.test/"), "https://b.test/", true},
		{"index past the end: found by digest", clickToken(9, "https://b.test/"), "https://b.test/", true},
		{"repeated link", clickToken(2, "https://a.test/"), "https://a.test/", true},
		{"the message no longer links there", clickToken(1, "https://evil.test/"), "", false},
		{"index past the end, unknown link", clickToken(3, "https://c.test/"), "", false},
	}
	for _, tt := range tests {
		got, ok := resolveLink(links, tt.tok)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: resolveLink = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
	if _, ok := resolveLink(nil, clickToken(0, "")); ok {
		t.Error("resolveLink found a link in a message without links")
	}
}
