package domain

import (
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestNormaliseName(t *testing.T) {
	t.Parallel()
	label63 := strings.Repeat("a", 63)
	// 4 labels of 63 + 3 dots = 255; trimming two characters gives exactly 253.
	long := strings.Join([]string{label63, label63, label63, label63}, ".")
	tests := []struct {
		in      string
		want    string
		wantMsg string // "" means valid
	}{
		{in: "example.com", want: "example.com"},
		{in: "  Example.ORG ", want: "example.org"},
		{in: "mail.sub.example.co.uk", want: "mail.sub.example.co.uk"},
		{in: "a-b.c0", want: "a-b.c0"},
		{in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{in: "1.2", want: "1.2"},
		{in: label63 + ".com", want: label63 + ".com"},
		{in: long[:253], want: long[:253]},
		{in: "", wantMsg: "is required"},
		{in: "   ", wantMsg: "is required"},
		{in: "nodot", wantMsg: "must contain at least one dot"},
		{in: long[:254], wantMsg: "must be at most 253 characters"},
		{in: strings.Repeat("a", 64) + ".example", wantMsg: "each label must be 1 to 63 characters"},
		{in: "a..example", wantMsg: "each label must be 1 to 63 characters"},
		{in: ".example.com", wantMsg: "each label must be 1 to 63 characters"},
		{in: "example.com.", wantMsg: "each label must be 1 to 63 characters"},
		{in: "-bad.example", wantMsg: "a label must not start or end with a hyphen"},
		{in: "bad-.example", wantMsg: "a label must not start or end with a hyphen"},
		{in: "good.-", wantMsg: "a label must not start or end with a hyphen"},
		{in: "under_score.example", wantMsg: "labels may contain only a-z, 0-9 and hyphen"},
		{in: "sp ace.example", wantMsg: "labels may contain only a-z, 0-9 and hyphen"},
		{in: "bücher.de", wantMsg: "labels may contain only a-z, 0-9 and hyphen"},
		{in: "user@example.com", wantMsg: "labels may contain only a-z, 0-9 and hyphen"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := normaliseName(tt.in)
			if tt.wantMsg == "" {
				if err != nil || got != tt.want {
					t.Fatalf("normaliseName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
				}
				return
			}
			e, ok := ports.AsError(err)
			if !ok || e.Code != ports.CodeInvalidArgument || e.Message != ports.MessageValidationFailed {
				t.Fatalf("normaliseName(%q) error = %v; want a validation error", tt.in, err)
			}
			if len(e.Details) != 1 || e.Details[0].Path != "domain" || e.Details[0].Message != tt.wantMsg {
				t.Fatalf("normaliseName(%q) details = %+v; want domain: %s", tt.in, e.Details, tt.wantMsg)
			}
		})
	}
}
