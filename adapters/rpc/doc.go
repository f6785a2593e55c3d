// Package rpc carries the ports driving interfaces between Postmill's tiers over Connect. NewHandler
// serves a ports.Core; NewClient implements the same interfaces by calling that handler, and maps every
// error back to the *ports.Error the core returned, so a tier cannot tell the in-process core from a
// remote one.
//
// The schema lives in proto/ and the generated code in gen/ (run `buf generate` from the repository
// root). Messages mirror the ports types field for field, except that token and password hashes never
// cross the wire.
package rpc
