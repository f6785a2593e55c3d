// Package ports is Postmill's vocabulary: the value types every tier speaks, the driving interfaces the
// tiers call (AccountService, APIKeyService, ...) and the driven interfaces the core needs (AccountStore,
// RateLimitStore, Clock, ...). It imports only the standard library so that core, adapters and tiers can
// all depend on it without depending on each other (STYLE.md §1, §2).
//
// Identifiers are canonical UUID strings. Every method that touches tenant data takes the organization id
// explicitly; implementations must scope every query by it.
//
// Where each area lives (its value types, the service a tier calls, and the stores the core needs):
//
//	core.go           Core: every driving interface a tier calls, one field per area
//	infra.go          Clock, Pinger, Queue and Delivery, BlobStore, Scanner, Resolver, EventStream
//	errors.go         Error, its codes and constraint names (SPEC §7)
//	page.go           the list bounds every paged route shares
//	limits.go         the send-body and per-organization bounds SPEC §8 leaves open
//	address.go        the addr-spec and domain rules every tier applies to a recipient alike
//	netguard/         the forbidden-address rule for webhooks and outbound SMTP
//	porttest/         the contract suites every adapter of a driven port runs (STYLE.md §8)
//	scope.go          API key scopes (SPEC §5)
//	status.go         message status transitions (SPEC §3)
//	event.go          Event: the rows webhooks and analytics fan out (SPEC §6)
//	account.go        users, organizations, sessions, API keys, SMTP credentials, rate limits (§4.1, §4.13)
//	domain.go         sending domains and their DNS records (§4.3)
//	sending.go        emails, the outbox, delivery jobs and reports (§4.2)
//	delivery_batch.go DeliveryBatcher: loading and reporting many delivery jobs in one call
//	template.go       templates and rendering (§4.4)
//	deliverability.go suppressions, bounces, complaints and the feedback the inbound tier reports (§4.5)
//	webhook.go        webhook endpoints, deliveries and the sender (§4.6)
//	tracking.go       open and click tracking
//	inbound.go        inbound domains, routes, received mail, the spam checker (§4.12)
//	inbound_parts.go  MessageParts: an attachment's bytes derived from the raw message it came in
//	contact.go        marketing contacts, import, preferences, the audience broadcasts page through (§4.7)
//	topic.go          topics and subscriptions with double opt-in (§4.8)
//	segment.go        segments and the compiled rule plan (§4.9)
//	broadcast.go      broadcasts, their recipients and stats, the public unsubscribe page (§4.10, §4.11)
//	secret.go         the columns sealed with the master secret, for re-encryption after a key rotation
//	change.go         ChangeFeed: news of paused organizations, new plans and domain statuses between processes
//	hold.go           delivery jobs held while their organization is paused or their domain suspended
//	billing.go        the plan catalogue, subscriptions and the payment provider (§4.13)
//	reputation.go     sending reputation, automatic protection and adaptive warm-up (§4.13)
//	dmarc.go          DMARC aggregate reports mailed to the report address and their summary
//	analytics.go      the request log, analytics events and their counts (§4.2)
//	local.go          local mode: the records its DNS server publishes, the mail catcher the edge shows
//
// A new area adds one file here with its types, its service interface and its store interface, one field
// to Core and one line to this index (TestDocListsEveryFile fails until it has it).
package ports
