// Package marketing holds the marketing audience use cases: contacts with their consent, CSV and JSON
// import, topics with optional double opt-in, segments (a rule language compiled to a typed plan the store
// turns into SQL), and the token-gated public preference and confirmation pages (SPEC §4.7-§4.9, §4.11).
//
// Public tokens (token.go) are the organization, contact, optional topic and broadcast ids and the time of
// issue, sealed with the keyring's at-rest key (AES-256-GCM, which authenticates as well as hides them)
// under associated data naming their purpose, and written in unpadded base64url.
package marketing
