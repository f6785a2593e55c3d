package webhook

import (
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestValidateURL(t *testing.T) {
	t.Parallel()
	long := "https://example.com/" + strings.Repeat("a", MaxURLLength-len("https://example.com/"))
	tests := []struct {
		url  string
		want bool
	}{
		{"https://example.com/hooks", true},
		{"http://example.com", true},
		{"HTTPS://Example.com/x?y=1#z", true},
		{"https://example.com:8443/x", true},
		{"http://192.0.2.10/hook", true}, // where it points is the sender guard's business
		{"http://[2001:db8::1]:8080/", true},
		{"https://user:pass@example.com/", true},
		{long, true},
		{long + "a", false},
		{"", false},
		{"example.com/hooks", false},
		{"//example.com/hooks", false},
		{"ftp://example.com/", false},
		{"file:///etc/passwd", false},
		{"javascript:alert(1)", false},
		{"gopher://example.com", false},
		{"http:example.com", false},
		{"https://", false},
		{"https:///path", false},
		{"https://:443/", false},
		{"https://example.com:0/", false},
		{"https://example.com:65536/", false},
		{"https://example.com:http/", false},
		{"https://exa mple.com/", false},
		{"https://example.com/\x7f", false},
		{" https://example.com/", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			v, ok := validateURL(tt.url)
			if ok != tt.want {
				t.Fatalf("validateURL(%q) = %v, want %v", tt.url, ok, tt.want)
			}
			if !ok && (v.Path != "url" || v.Message == "") {
				t.Fatalf("violation = %+v, want path url with a message", v)
			}
		})
	}
}

func TestValidateEventTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        []string
		want      []string
		wantPaths []string
	}{
		{"one", []string{"email.delivered"}, []string{"email.delivered"}, nil},
		{"every type", ports.WebhookEventTypes, ports.WebhookEventTypes, nil},
		{"duplicates kept once in order", []string{"email.bounced", "domain.created", "email.bounced"}, []string{"email.bounced", "domain.created"}, nil},
		{"nil", nil, nil, []string{"eventTypes"}},
		{"empty", []string{}, nil, []string{"eventTypes"}},
		{"unknown", []string{"email.delivered", "email.exploded"}, []string{"email.delivered"}, []string{"eventTypes.1"}},
		{"cancelled is timeline only", []string{"email.cancelled"}, nil, []string{"eventTypes.0"}},
		{"case matters", []string{"Email.Delivered"}, nil, []string{"eventTypes.0"}},
		{"empty string", []string{"", "email.sent", "x"}, []string{"email.sent"}, []string{"eventTypes.0", "eventTypes.2"}},
		{"prefix only", []string{"email.*"}, nil, []string{"eventTypes.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, vs := validateEventTypes(tt.in)
			var paths []string
			for _, v := range vs {
				paths = append(paths, v.Path)
				if v.Message == "" {
					t.Errorf("violation %s has no message", v.Path)
				}
			}
			if len(vs) == 0 && !slices.Equal(got, tt.want) {
				t.Fatalf("types = %v, want %v", got, tt.want)
			}
			if !slices.Equal(paths, tt.wantPaths) {
				t.Fatalf("violation paths = %v, want %v", paths, tt.wantPaths)
			}
		})
	}
}

// TestWebhookEventTypesExcludeCancelled guards the rule that email.cancelled gets no delivery: fan-out
// relies on no endpoint being able to subscribe to it.
func TestWebhookEventTypesExcludeCancelled(t *testing.T) {
	t.Parallel()
	if slices.Contains(ports.WebhookEventTypes, ports.EventEmailCancelled) || len(ports.WebhookEventTypes) != 14 {
		t.Fatalf("WebhookEventTypes = %v", ports.WebhookEventTypes)
	}
}
