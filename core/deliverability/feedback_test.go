package deliverability

import (
	"context"
	"strings"
	"testing"

	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/ports"
)

const (
	testRecipientID = "0196886c-3c00-7abc-8def-00000000000a"
	testMessageID   = "0196886c-3c00-7abc-8def-0000000000ff"
)

func TestAcceptsRecipient(t *testing.T) {
	t.Parallel()
	key := MustVERPKey(t)
	otherKey := []byte("another-verp-key-another-verp-key")
	rcpt := sending.EncodeVERP(key, sending.VERPRecipient, testRecipientID, "acme.example")
	msg := sending.EncodeVERP(key, sending.VERPMessage, testMessageID, "acme.example")
	forged := sending.EncodeVERP(otherKey, sending.VERPRecipient, testRecipientID, "acme.example")
	local, _, _ := strings.Cut(rcpt, "@")
	flipped := "0"
	if local[len(local)-1] == '0' {
		flipped = "1"
	}
	tampered := local[:len(local)-1] + flipped + "@bounce.acme.example"

	s := MustService(t, Config{FeedbackAddress: "FBL@Bounces.Postmill.Local"})
	none := MustService(t, Config{})
	tests := []struct {
		name string
		svc  *Service
		rcpt string
		want bool
	}{
		{"recipient VERP", s, rcpt, true},
		{"message VERP", s, msg, true},
		{"VERP in upper case", s, strings.ToUpper(rcpt), true},
		{"VERP in angle brackets", s, "<" + rcpt + ">", true},
		{"VERP at another domain", s, local + "@bounce.other.example", true},
		{"VERP made with another key", s, forged, false},
		{"VERP with a changed MAC", s, tampered, false},
		{"VERP local part without domain", s, local, false},
		{"VERP local part with empty domain", s, local + "@", false},
		{"feedback address in any case", s, "fbl@bounces.postmill.local", true},
		{"feedback address as configured", s, "FBL@BOUNCES.POSTMILL.LOCAL", true},
		{"feedback address at another domain", s, "fbl@postmill.local", false},
		{"no feedback address configured", none, "fbl@bounces.postmill.local", false},
		{"empty", none, "", false},
		{"ordinary address", s, "postmaster@bounces.postmill.local", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.svc.AcceptsRecipient(context.Background(), tt.rcpt)
			if err != nil || got != tt.want {
				t.Errorf("AcceptsRecipient(%q) = %v, %v; want %v", tt.rcpt, got, err, tt.want)
			}
		})
	}
}

// TestFeedbackRefusedBeforeTheStore covers the reports that must be answered from the report alone: the
// store fails the test if it is asked.
func TestFeedbackRefusedBeforeTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := MustVERPKey(t)
	s := MustService(t, Config{FeedbackAddress: "fbl@bounces.postmill.local"})
	verp := sending.EncodeVERP(key, sending.VERPRecipient, testRecipientID, "acme.example")
	forged := sending.EncodeVERP([]byte("another-verp-key-another-verp-key"), sending.VERPMessage, testMessageID, "acme.example")
	hard := []ports.DSNRecipient{{FinalRecipient: "a@x.com", Action: "failed", Status: "5.1.1"}}

	t.Run("bounce to a forged return path", func(t *testing.T) {
		t.Parallel()
		err := s.RecordBounce(ctx, ports.BounceReport{Rcpt: forged, Recipients: hard})
		wantCode(t, err, ports.CodeInvalidArgument)
	})
	t.Run("bounce to the feedback address", func(t *testing.T) {
		t.Parallel()
		err := s.RecordBounce(ctx, ports.BounceReport{Rcpt: "fbl@bounces.postmill.local", Recipients: hard})
		wantCode(t, err, ports.CodeInvalidArgument)
	})
	t.Run("bounce naming no recipient", func(t *testing.T) {
		t.Parallel()
		err := s.RecordBounce(ctx, ports.BounceReport{Rcpt: verp})
		wantCode(t, err, ports.CodeInvalidArgument)
	})
	t.Run("not-spam records nothing", func(t *testing.T) {
		t.Parallel()
		if err := s.RecordComplaint(ctx, ports.ComplaintReport{Rcpt: verp, FeedbackType: "not-spam"}); err != nil {
			t.Errorf("not-spam: %v, want nil", err)
		}
	})
	t.Run("auth-failure records nothing", func(t *testing.T) {
		t.Parallel()
		if err := s.RecordComplaint(ctx, ports.ComplaintReport{Rcpt: verp, FeedbackType: "auth-failure"}); err != nil {
			t.Errorf("auth-failure: %v, want nil", err)
		}
	})
	t.Run("complaint with no VERP anywhere", func(t *testing.T) {
		t.Parallel()
		err := s.RecordComplaint(ctx, ports.ComplaintReport{Rcpt: "fbl@bounces.postmill.local", FeedbackType: "abuse",
			OriginalMailFrom: "news@acme.example", OriginalRcptTo: []string{"a@x.com"}})
		wantCode(t, err, ports.CodeInvalidArgument)
	})
	t.Run("complaint with a forged Original-Mail-From", func(t *testing.T) {
		t.Parallel()
		err := s.RecordComplaint(ctx, ports.ComplaintReport{Rcpt: "fbl@bounces.postmill.local", OriginalMailFrom: "<" + forged + ">"})
		wantCode(t, err, ports.CodeInvalidArgument)
	})
}

func TestUnmapped(t *testing.T) {
	t.Parallel()
	if code := ports.ErrorCode(unmapped("bounce", ports.NotFound("no such recipient"))); code != ports.CodeInvalidArgument {
		t.Errorf("not_found became %s, want invalid_argument", code)
	}
	if code := ports.ErrorCode(unmapped("bounce", ports.Errorf(ports.CodeInternal, "down"))); code != ports.CodeInternal {
		t.Errorf("internal became %s, want internal", code)
	}
	if code := ports.ErrorCode(unmapped("bounce", context.Canceled)); code != ports.CodeInternal {
		t.Errorf("a plain error became %s, want internal", code)
	}
}
