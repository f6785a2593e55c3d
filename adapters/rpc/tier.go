package rpc

import (
	"encoding/hex"
	"errors"
	"slices"
	"strings"
)

// Tier names a kind of process that calls the core over this hop. Each tier presents a credential of its
// own, and the core lets it call only the procedures that the rows of service.go's table allow its tier,
// so a process that is broken into can do no more through the core than its tier needs: the edge cannot
// load a message with its DKIM private key, the MTA cannot log anyone in.
type Tier string

// The tiers that call the core. A process that runs the core calls it in-process and presents nothing.
const (
	TierEdge    Tier = "edge"
	TierMTA     Tier = "mta"
	TierInbound Tier = "inbound"
)

// tiers are the tiers a credential may name.
var tiers = []Tier{TierEdge, TierMTA, TierInbound}

// Tiers returns every tier that calls the core, for a core deriving the credential of each.
func Tiers() []Tier { return slices.Clone(tiers) }

// ParseTier reads a tier's name as an operator writes it (`postmill rpc-credential --tier=edge`).
func ParseTier(s string) (Tier, error) {
	t := Tier(strings.ToLower(strings.TrimSpace(s)))
	if !slices.Contains(tiers, t) {
		return "", errors.New("rpc: unknown tier (want edge, mta or inbound)")
	}
	return t, nil
}

// credentialPrefix starts every tier credential, so that a secret scanner, or an operator reading a
// configuration, recognises one.
const credentialPrefix = "pmrpc_"

// minCredentialSecret is the shortest secret part of a credential, in bytes: a credential is a bearer
// secret, and one short enough to guess would open its tier's procedures to anyone who reaches the port.
const minCredentialSecret = 16

// Credential formats the credential of tier: "pmrpc_<tier>_<secret in hex>". The tier is named in the
// clear so that a configuration shows which tier a credential is for; it grants nothing by itself, because
// the core admits only the exact credentials it was configured with, each for the tier it was derived for.
// secret must be at least 16 bytes (Postmill derives 32 from POSTMILL_SECRET_KEY, one key per tier).
func Credential(tier Tier, secret []byte) string {
	return credentialPrefix + string(tier) + "_" + hex.EncodeToString(secret)
}

// CredentialTier reads which tier a credential names and checks its shape. It cannot tell a genuine
// credential from a forged one of the right shape; only the core, which holds every genuine one, can.
// The error never repeats the credential, which is a secret.
func CredentialTier(credential string) (Tier, error) {
	rest, ok := strings.CutPrefix(credential, credentialPrefix)
	if !ok {
		return "", errors.New("rpc: a tier credential starts with " + credentialPrefix)
	}
	name, secret, ok := strings.Cut(rest, "_")
	if !ok || !slices.Contains(tiers, Tier(name)) {
		return "", errors.New("rpc: the credential names no known tier")
	}
	if b, err := hex.DecodeString(secret); err != nil || len(b) < minCredentialSecret {
		return "", errors.New("rpc: the credential's secret is not at least 16 bytes of hex")
	}
	return Tier(name), nil
}

// mayCall reports whether tier may call procedure ("/package.Service/Method"): its own entry of the
// allow-list when it has one, otherwise its service's. A procedure of a service without an entry is
// called by no tier.
func mayCall(tier Tier, procedure string) bool {
	allowed := allowList()
	if tiers, ok := allowed[procedure]; ok {
		return slices.Contains(tiers, tier)
	}
	service, _, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	return slices.Contains(allowed[service], tier)
}
