package webhook

import (
	"net/netip"

	"github.com/postmill/postmill/ports/netguard"
)

// Forbidden reports whether a webhook may not connect to addr, and if so why: the SSRF guard of SPEC §6.
// The rule itself is netguard.Forbidden, shared with the MTA's outbound SMTP so that webhooks and mail
// refuse the same addresses; allow is POSTMILL_WEBHOOK_ALLOW_NETS.
func Forbidden(addr netip.Addr, allow []netip.Prefix) (reason string, forbidden bool) {
	return netguard.Forbidden(addr, allow)
}
