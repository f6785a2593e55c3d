// Package rpc carries the ports driving interfaces between Postmill's tiers over Connect. NewHandler
// serves a ports.Core; NewClient implements the same interfaces by calling that handler, and maps every
// error back to the *ports.Error the core returned, so a tier cannot tell the in-process core from a
// remote one. Client.Core is the bundle a tier uses; the Client itself is also a ports.Pinger, for a
// process that does not run the core and asks it for readiness.
//
// # Layout
//
// The code is split by area, one file per proto package, named after it: proto/postmill/<area>/v1 is
// served and called from <area>.go. Those are account.go, analytics.go, billing.go, broadcast.go,
// contact.go, credential.go, deliverability.go, delivery.go, dmarc.go, domain.go, email.go, health.go,
// inbound.go, organization.go, ratelimit.go, reputation.go, segment.go, template.go, topic.go,
// tracking.go and webhook.go; an area with long conversions may keep them beside it in
// <area>_convert.go (inbound_convert.go). Each holds, for every service of its package, a server type
// that wraps the ports interfaces the service carries in the generated handler interface, a client type
// that implements those ports interfaces over the generated client, the area's conversions between ports
// values and wire messages, and the init function that registers the service. The shared pieces sit in
// files of their own: service.go (the table of services and the allow-list gathered from it), server.go
// (NewHandler and the respond helper every handler method ends with), client.go (NewClient and the call,
// exec and pick helpers every client method is made of), convert.go (time, JSON and list conversions),
// errors.go (the error mapping, carried by postmill.rpc.v1's ErrorDetail, the one proto package that is
// no service), interceptors.go (authentication, recovery, tracing), tier.go (the calling tiers, their
// credentials and mayCall) and tls.go (the hop's TLS files). Package rpctest makes a throwaway
// certificate authority for tests of the hop over TLS. TestLayout keeps this paragraph and the files in
// step.
//
// NewHandler and NewClient know no service by name. Both walk one table, filled by each area file's
// init function through register: a row says how to mount the service's handler from a ports.Core (or
// that the core lacks it, which leaves it unmounted) and how to fill the fields of a ports.Core with
// its client. portService builds the row of a service that carries one field of ports.Core; two files
// write their row by hand because their service carries two: template.go (Templates and Renderer, and
// RenderTemplate is served exactly when Renderer is set) and delivery.go (Delivery and DeliveryBatch,
// the batch procedures falling back to one Delivery call per item when DeliveryBatch is nil).
//
// # Adding a service
//
// Write its proto under proto/ and run `make generate`; add the field to ports.Core; then add one file
// here with the server type, the client type, the conversions and an init function that registers
// the service with the tiers whose credentials may call it, usually
//
//	func init() {
//		register(portService(func(c *ports.Core) *ports.ThingService { return &c.Things },
//			thingv1connect.NewThingServiceHandler, newThingServer,
//			thingv1connect.NewThingServiceClient, newThingClient).
//			calledBy(thingv1connect.ThingServiceName, TierEdge))
//	}
//
// A procedure that other tiers call than the rest of its service gets procedureCalledBy in the same
// row (dmarc.go, template.go). The server's allow-list is gathered from these rows: a service whose row
// does not call calledBy is closed to every tier, and TestEveryServiceHasCallers fails;
// TestAllowListSnapshot shows the new procedures in testdata/allowlist.txt, and
// TestRoundTripsCoverEveryMethod asks for a round trip of every new method.
//
// # Wire
//
// The schema lives in proto/ and the generated code in gen/ (`make generate` from the repository root
// runs buf). Messages mirror the ports types field for field, except what must stay in the core: token and
// password hashes never cross the wire, and neither do a sending domain's DKIM private key nor an
// attachment's storage key on their way to the edge (postmill.domain.v1, postmill.email.v1). The one
// exception is postmill.delivery.v1: the MTA tier signs and attaches, so LoadOutbound carries both, and
// only the MTA tier's credential may call it.
//
// Messages up to MaxMessageBytes cross in either direction, because a send carries up to 25 MiB of
// attachments (SPEC §8).
//
// Strings cross as proto3 strings, which must be valid UTF-8: a call carrying one that is not fails on
// the caller's side as an internal error naming the field, and never reaches the core. The two values a
// stranger picks and the core alone judges, a tracking token from a URL (postmill.tracking.v1) and the
// address of an RCPT command (postmill.deliverability.v1 AcceptsRecipient), travel as bytes instead, so
// that the core refuses them as it would in process.
package rpc
