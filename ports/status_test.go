package ports_test

import (
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestDeriveMessageStatus(t *testing.T) {
	t.Parallel()
	const (
		queued    = ports.StatusQueued
		scheduled = ports.StatusScheduled
		delayed   = ports.StatusDeliveryDelayed
		sent      = ports.StatusSent
		delivered = ports.StatusDelivered
		bounced   = ports.StatusBounced
		failed    = ports.StatusFailed
		cancelled = ports.StatusCancelled
		opened    = ports.StatusOpened
		clicked   = ports.StatusClicked
		complain  = ports.StatusComplained
	)
	tests := []struct {
		name     string
		statuses []ports.MessageStatus
		want     ports.MessageStatus
	}{
		{"no recipients", nil, ""},
		{"only unknown", []ports.MessageStatus{"", "weird"}, ""},
		{"one queued", []ports.MessageStatus{queued}, queued},
		{"one delivered", []ports.MessageStatus{delivered}, delivered},
		{"all delivered", []ports.MessageStatus{delivered, delivered, delivered}, delivered},
		{"queued is least advanced", []ports.MessageStatus{delivered, queued, sent}, queued},
		{"delayed below sent", []ports.MessageStatus{sent, delayed}, delayed},
		{"delayed below delivered", []ports.MessageStatus{delivered, delayed}, delayed},
		{"queued below delayed", []ports.MessageStatus{delayed, queued}, queued},
		{"sent below delivered", []ports.MessageStatus{delivered, sent}, sent},
		{"scheduled below queued", []ports.MessageStatus{queued, scheduled}, scheduled},
		{"engagement above delivered", []ports.MessageStatus{opened, delivered, clicked}, delivered},
		{"all opened", []ports.MessageStatus{opened, opened}, opened},
		{"opened below clicked", []ports.MessageStatus{clicked, opened}, opened},
		{"all complained", []ports.MessageStatus{complain}, complain},
		{"one bounced", []ports.MessageStatus{bounced}, bounced},
		{"all bounced", []ports.MessageStatus{bounced, bounced}, bounced},
		{"all failed", []ports.MessageStatus{failed, failed}, failed},
		{"bounced and delivered is delivered", []ports.MessageStatus{bounced, delivered}, delivered},
		{"failed and delivered is delivered", []ports.MessageStatus{delivered, failed}, delivered},
		{"bounced and delayed is delayed", []ports.MessageStatus{bounced, delayed}, delayed},
		{"failed and queued is queued", []ports.MessageStatus{failed, queued}, queued},
		{"bounced and failed is bounced", []ports.MessageStatus{failed, bounced, failed}, bounced},
		{"all cancelled", []ports.MessageStatus{cancelled, cancelled}, cancelled},
		{"failed over cancelled", []ports.MessageStatus{cancelled, failed}, failed},
		{"unknown ignored", []ports.MessageStatus{"", delivered, "weird"}, delivered},
		{"order does not matter", []ports.MessageStatus{delivered, bounced, sent, delayed, failed, delivered}, delayed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ports.DeriveMessageStatus(tt.statuses); got != tt.want {
				t.Fatalf("ports.DeriveMessageStatus(%v) = %q, want %q", tt.statuses, got, tt.want)
			}
		})
	}
}

func TestEngagementAdvances(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		current, next ports.MessageStatus
		want          bool
	}{
		{ports.StatusDelivered, ports.StatusOpened, true},
		{ports.StatusSent, ports.StatusOpened, true},
		{ports.StatusOpened, ports.StatusClicked, true},
		{ports.StatusDelivered, ports.StatusComplained, true},
		{ports.StatusClicked, ports.StatusOpened, false},
		{ports.StatusOpened, ports.StatusOpened, false},
		{ports.StatusComplained, ports.StatusClicked, false},
		{ports.StatusBounced, ports.StatusOpened, false},
		{ports.StatusQueued, ports.StatusOpened, false},
		{ports.StatusDelivered, ports.StatusFailed, false},
	} {
		if got := ports.EngagementAdvances(tt.current, tt.next); got != tt.want {
			t.Errorf("EngagementAdvances(%s, %s) = %v, want %v", tt.current, tt.next, got, tt.want)
		}
	}
}
