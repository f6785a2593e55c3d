package webhook_test

import (
	"net/netip"
	"testing"

	"github.com/postmill/postmill/adapters/webhook"
)

// TestForbidden: the webhook guard is the shared rule (its table lives in ports/netguard), with the allow
// list applied.
func TestForbidden(t *testing.T) {
	t.Parallel()
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "127.0.0.2": true, "169.254.169.254": true, "10.1.2.3": true, "192.0.2.1": false,
	} {
		if reason, got := webhook.Forbidden(netip.MustParseAddr(addr), allow); got != want {
			t.Errorf("Forbidden(%s) = %q, %v; want forbidden=%v", addr, reason, got, want)
		}
	}
}

func TestParseAllowNets(t *testing.T) {
	t.Parallel()
	got, err := webhook.ParseAllowNets(" 10.1.2.3/8, 127.0.0.1 fd00::/8,::1 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "fd00::/8", "::1/128"}
	if len(got) != len(want) {
		t.Fatalf("ParseAllowNets = %v; want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("ParseAllowNets[%d] = %s; want %s", i, got[i], want[i])
		}
	}
	if got, err := webhook.ParseAllowNets(""); err != nil || len(got) != 0 {
		t.Errorf("ParseAllowNets(\"\") = %v, %v; want empty", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8,nope"} {
		if _, err := webhook.ParseAllowNets(bad); err == nil {
			t.Errorf("ParseAllowNets(%q) accepted", bad)
		}
	}
}
