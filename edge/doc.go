// Package edge is Postmill's REST tier: the /v1 JSON API described by SPEC.md, its OpenAPI 3.1 document and
// rendered docs, and the operational endpoints /healthz and /readyz. Its metrics are registered with the
// composition root's registry, which serves /metrics on a listener of its own, never the public one.
//
// The edge owns only HTTP concerns: decoding and schema validation, bearer authentication, the per-IP
// request-rate limits of SPEC §8, the SPEC §7 error body, request ids, access logs, metrics and traces.
// Every business decision is delegated to the driving interfaces bundled in ports.Core, so the same
// handlers serve an in-process core or a remote one over Connect. The package imports ports and libraries,
// never core or adapters (STYLE.md §1).
//
// SMTP submission for SMTP credentials (RFC 6409) is the sibling package edge/submission: the same core
// interfaces, another protocol.
//
// Importing the package replaces huma.NewError and huma.NewErrorWithContext so that errors huma produces
// itself (schema validation, malformed JSON, oversized bodies) come out in the SPEC §7 shape too.
package edge
