package deliverability

import (
	"strings"
	"testing"
)

func TestCheckSuppressionAddress(t *testing.T) {
	t.Parallel()
	long63 := strings.Repeat("a", 63)
	tests := []struct {
		name string
		in   string // already normalised
		want string // "" for valid
	}{
		{"address", "jane@example.com", ""},
		{"address with atext specials", "o'brien+news_1@mail.example.co.uk", ""},
		{"dotted local part", "jane.doe@example.com", ""},
		{"utf-8 local part", "jörg@example.de", ""},
		{"bare domain", "example.com", ""},
		{"bare subdomain with digits and hyphen", "mx-1.mail2.example.com", ""},
		{"empty", "", msgAddressRequired},
		{"single label domain", "localhost", msgAddressForm},
		{"address at single label", "jane@localhost", msgAddressForm},
		{"two @", "a@b@example.com", msgAddressForm},
		{"empty local part", "@example.com", msgAddressForm},
		{"empty domain", "jane@", msgAddressForm},
		{"leading dot", ".jane@example.com", msgAddressForm},
		{"trailing dot", "jane.@example.com", msgAddressForm},
		{"double dot", "ja..ne@example.com", msgAddressForm},
		{"space in local part", "ja ne@example.com", msgAddressForm},
		{"quoted local part", `"jane"@example.com`, msgAddressForm},
		{"angle brackets", "<jane@example.com>", msgAddressForm},
		{"local part of 64", strings.Repeat("x", 64) + "@example.com", ""},
		{"local part of 65", strings.Repeat("x", 65) + "@example.com", msgLocalPartTooLong},
		{"label of 63", long63 + ".com", ""},
		{"label of 64", long63 + "a.com", msgAddressForm},
		{"leading hyphen label", "-example.com", msgAddressForm},
		{"trailing hyphen label", "example-.com", msgAddressForm},
		{"empty label", "example..com", msgAddressForm},
		{"trailing root dot", "example.com.", msgAddressForm},
		{"underscore in domain", "ex_ample.com", msgAddressForm},
		{"address literal", "jane@[192.0.2.1]", msgAddressForm},
		{"domain too long", strings.Repeat(long63+".", 4) + "com", msgAddressForm},
		{"invalid utf-8", "j\xffane@example.com", msgAddressForm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := checkSuppressionAddress(tt.in); got != tt.want {
				t.Errorf("checkSuppressionAddress(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormaliseAddress(t *testing.T) {
	t.Parallel()
	if got := normaliseAddress("  Jane.Doe@Example.COM \t"); got != "jane.doe@example.com" {
		t.Errorf("normaliseAddress = %q", got)
	}
}

func TestBareAddress(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Jane@Example.com", "jane@example.com"},
		{" <Jane@Example.com> ", "jane@example.com"},
		{"rfc822; Jane@Example.com", "jane@example.com"},
		{"RFC822;<jane@example.com>", "jane@example.com"},
		{"x400; jane", "x400; jane"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := bareAddress(tt.in); got != tt.want {
			t.Errorf("bareAddress(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
