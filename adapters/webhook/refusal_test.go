package webhook_test

import (
	"net/netip"
	"testing"

	"github.com/postmill/postmill/adapters/webhook"
	"github.com/postmill/postmill/ports"
)

// TestSendBlockedReasonSaysWhatToDo: the reason a blocked delivery carries names the address, the name
// that resolved to it, the rule and its RFC, and the setting that would allow it.
func TestSendBlockedReasonSaysWhatToDo(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Config{})
	b.dns.SetA("internal.example.test", netip.MustParseAddr("10.0.0.5"))
	tests := []struct{ url, want string }{
		{"http://10.0.0.5/hook", "10.0.0.5 is a private address (10.0.0.0/8, RFC 1918); " +
			"an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5"},
		{"https://internal.example.test/hook", "internal.example.test resolves to 10.0.0.5, a private address " +
			"(10.0.0.0/8, RFC 1918); an operator can allow it with POSTMILL_WEBHOOK_ALLOW_NETS=10.0.0.5"},
		{"http://[::ffff:169.254.169.254]/", "::ffff:169.254.169.254 is the IPv4-mapped form of 169.254.169.254, " +
			"a link-local address (169.254.0.0/16, RFC 3927); an operator can allow it with " +
			"POSTMILL_WEBHOOK_ALLOW_NETS=::ffff:169.254.169.254"},
	}
	for _, tt := range tests {
		resp, err := b.sender.Send(b.ctx, ports.WebhookRequest{URL: tt.url})
		if err != nil || !resp.Blocked || resp.Reason != tt.want {
			t.Errorf("Send(%s) = %+v, %v;\nwant blocked with reason %q", tt.url, resp, err, tt.want)
		}
	}
}
