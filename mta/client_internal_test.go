package mta

import (
	"net/netip"
	"testing"
)

func TestCredentialsNeverCrossANetworkInPlaintext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tls  bool
		addr string
		want bool
	}{
		{false, "127.0.0.1", true},
		{false, "::1", true},
		{false, "::ffff:127.0.0.1", true},
		{false, "192.0.2.10", false},
		{false, "2001:db8::1", false},
		{true, "192.0.2.10", true},
	}
	for _, tc := range cases {
		if got := credentialsAllowed(tc.tls, netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("credentialsAllowed(tls=%v, %s) = %v, want %v", tc.tls, tc.addr, got, tc.want)
		}
	}
}
