package ports

// Scopes of API keys (SPEC §5). ScopeAll is the unrestricted key.
const (
	ScopeAll               = "*"
	ScopeEmailsSend        = "emails:send"
	ScopeEmailsRead        = "emails:read"
	ScopeInboundRead       = "inbound:read"
	ScopeWebhooksRead      = "webhooks:read"
	ScopeWebhooksWrite     = "webhooks:write"
	ScopeSuppressionsRead  = "suppressions:read"
	ScopeSuppressionsWrite = "suppressions:write"
	ScopeTemplatesWrite    = "templates:write"
	ScopeContactsRead      = "contacts:read"
	ScopeContactsWrite     = "contacts:write"
	ScopeSegmentsRead      = "segments:read"
	ScopeSegmentsWrite     = "segments:write"
	ScopeTopicsRead        = "topics:read"
	ScopeTopicsWrite       = "topics:write"
	ScopeBroadcastsRead    = "broadcasts:read"
	ScopeBroadcastsWrite   = "broadcasts:write"
	ScopeBillingRead       = "billing:read"
	ScopeBillingWrite      = "billing:write"
)

// ScopeVocabulary lists every scope a key may carry besides ScopeAll, in the order of SPEC §5's table.
var ScopeVocabulary = []string{
	ScopeEmailsSend, ScopeEmailsRead, ScopeInboundRead, ScopeWebhooksRead, ScopeWebhooksWrite,
	ScopeSuppressionsRead, ScopeSuppressionsWrite, ScopeTemplatesWrite, ScopeContactsRead, ScopeContactsWrite,
	ScopeSegmentsRead, ScopeSegmentsWrite, ScopeTopicsRead, ScopeTopicsWrite, ScopeBroadcastsRead,
	ScopeBroadcastsWrite, ScopeBillingRead, ScopeBillingWrite,
}

// DefaultScopes is what a key gets when its creator names none.
var DefaultScopes = []string{ScopeEmailsSend}

// ValidScope reports whether s may be granted to a key.
func ValidScope(s string) bool {
	if s == ScopeAll {
		return true
	}
	for _, v := range ScopeVocabulary {
		if v == s {
			return true
		}
	}
	return false
}
