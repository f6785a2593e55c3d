package domain

import (
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestTXTPublished(t *testing.T) {
	t.Parallel()
	const dkim = "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"
	tests := []struct {
		name string
		txts []string
		want bool
	}{
		{"exact", []string{dkim}, true},
		{"among others", []string{"google-site-verification=abc", dkim}, true},
		{"none", nil, false},
		{"trailing space", []string{dkim + " "}, false},
		{"case differs", []string{"V=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"}, false},
		{"unjoined chunk only", []string{dkim[:20]}, false},
		{"different key", []string{dkim + "X"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := txtPublished(tt.txts, dkim); got != tt.want {
				t.Fatalf("txtPublished(%q) = %v; want %v", tt.txts, got, tt.want)
			}
		})
	}
}

func TestSPFPublished(t *testing.T) {
	t.Parallel()
	const want = "v=spf1 include:spf.postmill.test ~all"
	tests := []struct {
		name string
		txts []string
		ok   bool
	}{
		{"exact", []string{want}, true},
		{"exact among non-SPF TXT", []string{"google-site-verification=x", want}, true},
		{"merged with other mechanisms", []string{"v=spf1 ip4:192.0.2.0/24 include:_spf.google.com include:spf.postmill.test -all"}, true},
		{"merged, include last, no all", []string{"v=spf1 mx include:spf.postmill.test"}, true},
		{"include with + qualifier", []string{"v=spf1 +include:spf.postmill.test ~all"}, true},
		{"include host case and trailing dot", []string{"v=spf1 include:SPF.Postmill.Test. ~all"}, true},
		{"version and mechanism case-insensitive", []string{"V=SPF1 INCLUDE:spf.postmill.test ~all"}, true},
		{"two SPF records (RFC 7208 permerror)", []string{want, "v=spf1 mx -all"}, false},
		{"include with fail qualifier", []string{"v=spf1 -include:spf.postmill.test ~all"}, false},
		{"include with neutral qualifier", []string{"v=spf1 ?include:spf.postmill.test ~all"}, false},
		{"other include only", []string{"v=spf1 include:spf.other.test ~all"}, false},
		{"include host is a suffix", []string{"v=spf1 include:xspf.postmill.test ~all"}, false},
		{"include host has more labels", []string{"v=spf1 include:spf.postmill.test.evil ~all"}, false},
		{"not an SPF record", []string{"include:spf.postmill.test"}, false},
		{"v=spf10 is not SPF", []string{"v=spf10 include:spf.postmill.test ~all"}, false},
		{"redirect instead of include", []string{"v=spf1 redirect=spf.postmill.test"}, false},
		{"nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := spfPublished(tt.txts, want); got != tt.ok {
				t.Fatalf("spfPublished(%q) = %v; want %v", tt.txts, got, tt.ok)
			}
		})
	}
}

func TestSameHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got, want string
		ok        bool
	}{
		{"bounces.postmill.test", "bounces.postmill.test", true},
		{"BOUNCES.Postmill.TEST", "bounces.postmill.test", true},
		{"bounces.postmill.test.", "bounces.postmill.test", true},
		{"Bounces.postmill.test.", "bounces.postmill.test.", true},
		{"bounces.postmill.test..", "bounces.postmill.test", false},
		{"bounces.postmill.test", "track.postmill.test", false},
		{"x.bounces.postmill.test", "bounces.postmill.test", false},
		{"", "bounces.postmill.test", false},
	}
	for _, tt := range tests {
		if got := sameHost(tt.got, tt.want); got != tt.ok {
			t.Errorf("sameHost(%q, %q) = %v; want %v", tt.got, tt.want, got, tt.ok)
		}
	}
}

// TestNextStatus is SPEC §3's domain table, row by row, plus the rows the spec leaves open (see nextStatus).
// Three required records: SPF, DKIM, RETURN_PATH.
func TestNextStatus(t *testing.T) {
	t.Parallel()
	const (
		pending   = ports.DomainPending
		failed    = ports.DomainFailed
		verified  = ports.DomainVerified
		suspended = ports.DomainSuspended
	)
	tests := []struct {
		name       string
		current    ports.DomainStatus
		requiredOK int
		anyPub     bool
		want       ports.DomainStatus
	}{
		// SPEC §3 rows.
		{"pending, all required", pending, 3, true, verified},
		{"pending, some required", pending, 1, true, failed},
		{"pending, all but one required", pending, 2, true, failed},
		{"pending, nothing", pending, 0, false, pending},
		{"failed, all required", failed, 3, true, verified},
		// Rows SPEC §3 leaves open.
		{"pending, only recommended records", pending, 0, true, failed},
		{"failed, some required", failed, 2, true, failed},
		{"failed, nothing", failed, 0, false, failed},
		{"verified, all required", verified, 3, true, verified},
		{"verified, failing run keeps verified", verified, 1, true, verified},
		{"verified, nothing keeps verified", verified, 0, false, verified},
		{"suspended, all required", suspended, 3, true, verified},
		{"suspended, some required", suspended, 2, true, suspended},
		{"suspended, nothing", suspended, 0, false, suspended},
		{"reserved verifying state treated as pending", "verifying", 1, true, failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := nextStatus(tt.current, tt.requiredOK, 3, tt.anyPub); got != tt.want {
				t.Fatalf("nextStatus(%s, %d/3, %v) = %s; want %s", tt.current, tt.requiredOK, tt.anyPub, got, tt.want)
			}
		})
	}
	if got := nextStatus(pending, 0, 0, false); got != pending {
		t.Fatalf("no required records verified the domain: %s", got)
	}
}
