package app

import (
	"fmt"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// The hop between tiers. A process running the core serves it: it derives every tier's credential from
// each master of POSTMILL_SECRET_KEY and admits each to its tier's procedures only (the allow-list in
// adapters/rpc). A process without the core calls it with one client per tier it runs, each presenting
// that tier's credential: given in POSTMILL_RPC_CREDENTIAL, or derived from POSTMILL_SECRET_KEY when the
// deployment shares the secret.

// credentialPurpose is the keyring purpose a tier's credential is derived under; each tier has its own,
// so one tier's credential says nothing about another's.
func credentialPurpose(tier rpc.Tier) string { return "rpc-credential/" + string(tier) }

// TierCredential is the credential of tier ("edge", "mta" or "inbound") derived from the primary of
// secretKeys: what `postmill rpc-credential --tier=…` prints where the secret lives, for a process of that
// tier to be given as POSTMILL_RPC_CREDENTIAL instead of the secret.
func TierCredential(secretKeys [][]byte, tier string) (string, error) {
	t, err := rpc.ParseTier(tier)
	if err != nil {
		return "", err
	}
	keyring, err := secret.NewKeyring(secretKeys...)
	if err != nil {
		return "", fmt.Errorf("secret key: %w", err)
	}
	return rpc.Credential(t, keyring.Derive(credentialPurpose(t))), nil
}

// serverCredentials are the credentials the core admits: every tier's, derived from every master on the
// keyring, so that while a key rotation is rolled out process by process a caller whose credential comes
// from the old master (or already the new one) keeps reaching the core.
func (a *App) serverCredentials() []string {
	var out []string
	for _, tier := range rpc.Tiers() {
		for _, key := range a.keyring.DeriveAll(credentialPurpose(tier)) {
			out = append(out, rpc.Credential(tier, key))
		}
	}
	return out
}

// callerTiers are the tiers of targets that call a core elsewhere: none when the process runs the core,
// which its tiers then call in-process.
func callerTiers(targets Targets) []rpc.Tier {
	if targets.Has(TargetCore) {
		return nil
	}
	var out []rpc.Tier
	for _, t := range []string{TargetEdge, TargetMTA, TargetInbound} {
		if targets.Has(t) {
			out = append(out, rpc.Tier(t))
		}
	}
	return out
}

// callerCredentials picks the credential of every tier of targets that calls a core elsewhere: the one
// POSTMILL_RPC_CREDENTIAL gives for it, otherwise one derived from POSTMILL_SECRET_KEY (Validate made sure
// one of them exists).
func callerCredentials(cfg Config, targets Targets) (map[rpc.Tier]string, error) {
	out := map[rpc.Tier]string{}
	for _, cred := range cfg.RPCCredentials {
		if tier, err := rpc.CredentialTier(cred); err == nil {
			if _, dup := out[tier]; !dup {
				out[tier] = cred
			}
		}
	}
	for _, tier := range callerTiers(targets) {
		if _, ok := out[tier]; ok {
			continue
		}
		cred, err := TierCredential(cfg.SecretKeys, string(tier))
		if err != nil {
			return nil, err
		}
		out[tier] = cred
	}
	return out, nil
}

// remoteCore is the Connect client to the core that tier uses in a process that does not run the core.
func (a *App) remoteCore(tier rpc.Tier) *rpc.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.remote[tier] == nil {
		a.remote[tier] = rpc.NewClient(a.cfg.CoreURL, a.credentials[tier], rpc.NewHTTPClient(a.clientTLS))
	}
	return a.remote[tier]
}

// remoteHealth is a client of the core's health check for /readyz in a process that does not run the
// core (every tier may ask for it), or nil when no tier of the process has called the core yet.
func (a *App) remoteHealth() ports.Pinger {
	for _, tier := range rpc.Tiers() {
		if c := a.remote[tier]; c != nil {
			return c
		}
	}
	return nil
}
