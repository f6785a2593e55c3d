// Package rpc carries the ports driving interfaces between Postmill's tiers over Connect. NewHandler
// serves a ports.Core; NewClient implements the same interfaces by calling that handler, and maps every
// error back to the *ports.Error the core returned, so a tier cannot tell the in-process core from a
// remote one.
//
// The schema lives in proto/ and the generated code in gen/ (run `buf generate` from the repository
// root). Messages mirror the ports types field for field, except what must stay in the core: token and
// password hashes never cross the wire, and neither do a sending domain's DKIM private key nor an
// attachment's storage key on their way to the edge (postmill.domain.v1, postmill.email.v1). The one
// exception is postmill.delivery.v1: the MTA tier signs and attaches, so LoadOutbound carries both, on
// the hop that the inter-tier token guards like every other.
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
