// Package ports is Postmill's vocabulary: the value types every tier speaks, the driving interfaces the
// tiers call (AccountService, APIKeyService, ...) and the driven interfaces the core needs (AccountStore,
// RateLimitStore, Clock, ...). It imports only the standard library so that core, adapters and tiers can
// all depend on it without depending on each other (STYLE.md §1, §2).
//
// Identifiers are canonical UUID strings. Every method that touches tenant data takes the organization id
// explicitly; implementations must scope every query by it.
package ports
