package ports

// ChangeKind names what a Change is about.
type ChangeKind string

// The kinds of Change.
const (
	// ChangeOrganization: an organization's paused flag or plan changed, or one of its API keys was
	// revoked, re-scoped or deleted.
	ChangeOrganization ChangeKind = "organization"
	// ChangeDomain: a sending domain's status changed (verified, suspended, ...).
	ChangeDomain ChangeKind = "domain"
	// ChangeAll: news may have been lost (the feed was disconnected), so everything remembered about
	// organizations and domains is to be forgotten.
	ChangeAll ChangeKind = "all"
)

// Change says that something a process may remember has changed in the store. It carries no new values:
// whoever remembered the old ones reads again.
type Change struct {
	Kind           ChangeKind
	OrganizationID string // every kind but ChangeAll
	DomainID       string // ChangeDomain only
}

// ChangeFeed carries news of committed changes to organizations (paused flag, plan) and sending domains
// (status) to every process, so that what a process keeps of them — the send path's short caches, the
// deliveries held while an organization is paused or a domain suspended — is refreshed at once rather
// than when it times out. Every process's subscribers hear of every such change, whoever made it (an
// admin route in another process, an operator's SQL), shortly after it commits; a subscriber that may
// have missed news is sent a ChangeAll. Delivery is best effort: holders of copies still bound their
// staleness with a timeout of their own.
type ChangeFeed interface {
	// Publish tells this process's subscribers, before it returns, of a change the caller has just
	// committed, so that the caller's next request already sees it. Other processes hear of the change
	// from the store itself, so Publish does not reach them and cannot fail.
	Publish(c Change)
	// Subscribe calls fn for every change until cancel is called. fn runs on the feed's goroutine (or the
	// publisher's): it must be quick and must not block.
	Subscribe(fn func(Change)) (cancel func())
}
