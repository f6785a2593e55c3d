package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

func TestNextAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	ok := func(code int) ports.WebhookResponse { return ports.WebhookResponse{StatusCode: code} }
	netErr := errors.New("dial tcp 192.0.2.1:443: connect: connection refused")
	blocked := ports.WebhookResponse{Blocked: true, Reason: "address 10.0.0.1 is private"}
	tests := []struct {
		name      string
		attempts  int
		resp      ports.WebhookResponse
		err       error
		status    string
		code      int
		retryIn   time.Duration // 0: NextRetryAt nil
		delivered bool
	}{
		{"200 on the first attempt", 1, ok(200), nil, ports.WebhookDelivered, 200, 0, true},
		{"204", 1, ok(204), nil, ports.WebhookDelivered, 204, 0, true},
		{"299 is still 2xx", 2, ok(299), nil, ports.WebhookDelivered, 299, 0, true},
		{"2xx on the fifth attempt", 5, ok(202), nil, ports.WebhookDelivered, 202, 0, true},
		{"199 is not 2xx", 1, ok(199), nil, ports.WebhookFailed, 199, 15 * time.Minute, false},
		{"301 (redirects are not followed)", 1, ok(301), nil, ports.WebhookFailed, 301, 15 * time.Minute, false},
		{"300", 1, ok(300), nil, ports.WebhookFailed, 300, 15 * time.Minute, false},
		{"400", 1, ok(400), nil, ports.WebhookFailed, 400, 15 * time.Minute, false},
		{"410", 2, ok(410), nil, ports.WebhookFailed, 410, 30 * time.Minute, false},
		{"500", 1, ok(500), nil, ports.WebhookFailed, 500, 15 * time.Minute, false},
		{"503 on attempt 3", 3, ok(503), nil, ports.WebhookFailed, 503, time.Hour, false},
		{"network error on attempt 4", 4, ports.WebhookResponse{}, netErr, ports.WebhookFailed, 0, 2 * time.Hour, false},
		{"timeout", 2, ports.WebhookResponse{}, context.DeadlineExceeded, ports.WebhookFailed, 0, 30 * time.Minute, false},
		{"5th failure is dead", 5, ok(500), nil, ports.WebhookDead, 500, 0, false},
		{"5th network error is dead", 5, ports.WebhookResponse{}, netErr, ports.WebhookDead, 0, 0, false},
		{"past the cap is still dead", 6, ok(404), nil, ports.WebhookDead, 404, 0, false},
		{"blocked on the first attempt", 1, blocked, nil, ports.WebhookBlocked, 0, 0, false},
		{"blocked on a retry is permanent too", 3, blocked, nil, ports.WebhookBlocked, 0, 0, false},
		{"an error wins over a response", 1, ok(200), netErr, ports.WebhookFailed, 0, 15 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := NextAttempt(tt.attempts, now, DefaultSchedule, tt.resp, tt.err)
			if a.Status != tt.status || a.Attempts != tt.attempts || a.ResponseCode != tt.code {
				t.Fatalf("NextAttempt = %+v, want status %s, attempts %d, code %d", a, tt.status, tt.attempts, tt.code)
			}
			switch {
			case tt.retryIn == 0 && a.NextRetryAt != nil:
				t.Fatalf("NextRetryAt = %s, want nil", a.NextRetryAt)
			case tt.retryIn != 0 && (a.NextRetryAt == nil || !a.NextRetryAt.Equal(now.Add(tt.retryIn))):
				t.Fatalf("NextRetryAt = %v, want now+%s", a.NextRetryAt, tt.retryIn)
			}
			if tt.delivered != (a.DeliveredAt != nil) || (a.DeliveredAt != nil && !a.DeliveredAt.Equal(now)) {
				t.Fatalf("DeliveredAt = %v, want set: %v", a.DeliveredAt, tt.delivered)
			}
		})
	}
}

// TestNextAttemptSchedule walks a permanently failing endpoint through SPEC §6's table: attempts 1-4 fail
// and wait 15 min, 30 min, 1 h and 2 h; the 5th is dead, about 3.75 hours after the first.
func TestNextAttemptSchedule(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	at := start
	var statuses []string
	for n := 1; ; n++ {
		a := NextAttempt(n, at, DefaultSchedule, ports.WebhookResponse{StatusCode: 500}, nil)
		statuses = append(statuses, a.Status)
		if a.NextRetryAt == nil {
			break
		}
		at = *a.NextRetryAt
	}
	if got := at.Sub(start); got != 3*time.Hour+45*time.Minute {
		t.Fatalf("last attempt %s after the first, want 3h45m", got)
	}
	want := []string{"failed", "failed", "failed", "failed", "dead"}
	if len(statuses) != len(want) {
		t.Fatalf("statuses = %v, want %v", statuses, want)
	}
	for i := range want {
		if statuses[i] != want[i] {
			t.Fatalf("statuses = %v, want %v", statuses, want)
		}
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	d := ports.WebhookDelivery{ID: "d", EventID: "e", Status: ports.WebhookPending, Payload: []byte("{}")}
	got := apply(d, NextAttempt(1, now, DefaultSchedule, ports.WebhookResponse{StatusCode: 502}, nil))
	if got.ID != "d" || got.EventID != "e" || got.Status != ports.WebhookFailed || got.Attempts != 1 || got.ResponseCode != 502 ||
		got.NextRetryAt == nil || !got.NextRetryAt.Equal(now.Add(15*time.Minute)) || got.DeliveredAt != nil || string(got.Payload) != "{}" {
		t.Fatalf("apply = %+v", got)
	}
}

// TestBlockedReason: a blocked attempt keeps the guard's reason, printable and bounded, and apply puts it
// on the delivery; no other outcome carries one.
func TestBlockedReason(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	const reason = "10.0.0.5 is a private address (10.0.0.0/8, RFC 1918); an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5"
	d := ports.WebhookDelivery{ID: "d", Status: ports.WebhookPending}
	got := apply(d, NextAttempt(1, now, DefaultSchedule, ports.WebhookResponse{Blocked: true, Reason: reason}, nil))
	if got.Status != ports.WebhookBlocked || got.BlockedReason != reason {
		t.Fatalf("apply(blocked) = %+v, want blocked with reason %q", got, reason)
	}

	for _, tt := range []struct {
		name string
		resp ports.WebhookResponse
		err  error
	}{
		{"delivered", ports.WebhookResponse{StatusCode: 200}, nil},
		{"failed", ports.WebhookResponse{StatusCode: 500}, nil},
		{"network error", ports.WebhookResponse{}, errors.New("connection refused")},
		// A blocked response that also came with an error is a failure, and its reason is not kept.
		{"error wins", ports.WebhookResponse{Blocked: true, Reason: reason}, errors.New("timeout")},
	} {
		if a := NextAttempt(1, now, DefaultSchedule, tt.resp, tt.err); a.BlockedReason != "" {
			t.Errorf("%s: BlockedReason = %q, want empty", tt.name, a.BlockedReason)
		}
	}

	long := "host\r\nX-Injected: 1 " + strings.Repeat("é", 400)
	a := NextAttempt(1, now, DefaultSchedule, ports.WebhookResponse{Blocked: true, Reason: long}, nil)
	if strings.ContainsAny(a.BlockedReason, "\r\n") || len(a.BlockedReason) > maxReasonBytes+len("…") ||
		!utf8.ValidString(a.BlockedReason) || !strings.HasPrefix(a.BlockedReason, "host  X-Injected") {
		t.Errorf("BlockedReason of a hostile reason = %q", a.BlockedReason)
	}
	if a := NextAttempt(1, now, DefaultSchedule, ports.WebhookResponse{Blocked: true}, nil); a.BlockedReason == "" {
		t.Error("a blocked attempt without a reason has an empty BlockedReason; want a generic one")
	}
}
