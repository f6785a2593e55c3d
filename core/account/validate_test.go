package account

import (
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestNormaliseEmail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"alice@example.com", "alice@example.com", true},
		{"  Alice@Example.COM \t", "alice@example.com", true},
		{"first.last+tag@sub.example.co.uk", "first.last+tag@sub.example.co.uk", true},
		{"trailing-newline@example.com\n", "trailing-newline@example.com", true},
		{"", "", false},
		{"   ", "", false},
		{"alice", "", false},
		{"alice@", "", false},
		{"@example.com", "", false},
		{"alice@localhost", "", false},
		{"alice@example.", "", false},
		{"alice@.example.com", "", false},
		{"alice@example..com", "", false},
		{"alice@[192.0.2.1]", "", false},
		{"Alice <alice@example.com>", "", false},
		{"<alice@example.com>", "", false},
		{"alice@example.com, bob@example.com", "", false},
		{"ali\r\nce@example.com", "", false},
		{"alice@exa\nmple.com", "", false},
		{"ali ce@example.com", "", false},
		{"alice@example.com\x00", "", false},
		{"\xff@example.com", "", false},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 251) + ".com", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 251) + ".com", true},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 252) + ".com", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := normaliseEmail(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("normaliseEmail(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSlugify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want string
	}{
		{"Acme", "acme"},
		{"Acme Corp", "acme-corp"},
		{"  Acme   Corp  ", "acme-corp"},
		{"--acme--corp--", "acme-corp"},
		{"john.doe+news", "john-doe-news"},
		{"ACME_2026 (EU)", "acme-2026-eu"},
		{"Café Déjà Vu", "caf-d-j-vu"},
		{"日本語", "org"},
		{"!!!", "org"},
		{"", "org"},
		{strings.Repeat("a", 70), strings.Repeat("a", 63)},
		{strings.Repeat("a", 62) + " b", strings.Repeat("a", 62)},
		{strings.Repeat("ab ", 30), strings.TrimSuffix(strings.Repeat("ab-", 21), "-")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := slugify(tt.name)
			if got != tt.want {
				t.Fatalf("slugify(%q) = %q, want %q", tt.name, got, tt.want)
			}
			if len(got) > maxSlugLen || strings.HasPrefix(got, "-") || strings.HasSuffix(got, "-") || strings.Contains(got, "--") {
				t.Fatalf("slugify(%q) = %q breaks the slug shape", tt.name, got)
			}
		})
	}
}

func TestOrganizationNameAndSlug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		requested string
		email     string
		wantName  string
		wantSlug  string
		wantOK    bool
	}{
		{"derived from the local part", "", "john.doe@example.com", "john.doe", "john-doe", true},
		{"derived, nothing usable", "", "+++@example.com", "+++", "org", true},
		{"given", "Acme Corp", "john@example.com", "Acme Corp", "acme-corp", true},
		{"given, trimmed", "  Acme  ", "john@example.com", "Acme", "acme", true},
		{"given, only spaces", "   ", "john@example.com", "", "", false},
		{"given, 120 characters", strings.Repeat("é", 120), "john@example.com", strings.Repeat("é", 120), "org", true},
		{"given, 121 characters", strings.Repeat("a", 121), "john@example.com", "", "", false},
		{"given, control character", "Acme\nCorp", "john@example.com", "", "", false},
		{"given, invalid UTF-8", "Acme\xff", "john@example.com", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name, slug, ok := organizationNameAndSlug(tt.requested, tt.email)
			if name != tt.wantName || slug != tt.wantSlug || ok != tt.wantOK {
				t.Fatalf("got %q, %q, %v; want %q, %q, %v", name, slug, ok, tt.wantName, tt.wantSlug, tt.wantOK)
			}
		})
	}
}

func TestValidPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		password string
		want     bool
	}{
		{"", false},
		{"1234567", false},
		{"12345678", true},
		{"ééééééé", false}, // 7 characters, 14 bytes
		{"éééééééé", true},
		{strings.Repeat("x", 1024), true},
		{strings.Repeat("x", 1025), false},
	}
	for _, tt := range tests {
		t.Run(tt.password, func(t *testing.T) {
			t.Parallel()
			if got := validPassword(tt.password); got != tt.want {
				t.Fatalf("validPassword(%q) = %v, want %v", tt.password, got, tt.want)
			}
		})
	}
}

func TestNormaliseScopes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        []string
		want      []string
		wantPaths []string
	}{
		{"nil is the default", nil, []string{ports.ScopeEmailsSend}, nil},
		{"empty stays empty", []string{}, []string{}, nil},
		{"valid", []string{"emails:read", "webhooks:write"}, []string{"emails:read", "webhooks:write"}, nil},
		{"star", []string{"*"}, []string{"*"}, nil},
		{"duplicates dropped, order kept", []string{"emails:read", "emails:send", "emails:read", "*", "emails:send"}, []string{"emails:read", "emails:send", "*"}, nil},
		{"unknown", []string{"emails:send", "emails:write"}, nil, []string{"scopes.1"}},
		{"case matters", []string{"Emails:Send"}, nil, []string{"scopes.0"}},
		{"empty string", []string{""}, nil, []string{"scopes.0"}},
		{"several unknown", []string{"admin", "emails:send", "root"}, nil, []string{"scopes.0", "scopes.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, violations := normaliseScopes(tt.in)
			var paths []string
			for _, v := range violations {
				paths = append(paths, v.Path)
			}
			if !slices.Equal(paths, tt.wantPaths) {
				t.Fatalf("violation paths = %v, want %v", paths, tt.wantPaths)
			}
			if tt.wantPaths == nil && !slices.Equal(got, tt.want) {
				t.Fatalf("scopes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNormaliseScopesDoesNotShareDefault(t *testing.T) {
	t.Parallel()
	got, _ := normaliseScopes(nil)
	got[0] = "changed"
	if ports.DefaultScopes[0] != ports.ScopeEmailsSend {
		t.Fatal("normaliseScopes returned ports.DefaultScopes itself")
	}
}
