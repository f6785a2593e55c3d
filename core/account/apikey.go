package account

import (
	"context"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// TouchFlushInterval is how often Run writes API keys' lastUsedAt. SPEC §5 rule 5 asks for the time of the
// last use, not a write per request: batching keeps the send path free of an UPDATE per call.
const TouchFlushInterval = time.Second

// touchFlushTimeout bounds the last flush after Run's context ends.
const touchFlushTimeout = 5 * time.Second

const msgInvalidAPIKey = "invalid API key"

// DefaultMaxAPIKeys is how many keys that are not revoked an organization may hold
// (POSTMILL_MAX_API_KEYS_PER_ORG). Revoking a key makes room for another.
const DefaultMaxAPIKeys = 100

// MaxAPIKeysSetting names the configuration that raises Config.MaxAPIKeys, for the refusal's message.
const MaxAPIKeysSetting = "POSTMILL_MAX_API_KEYS_PER_ORG"

// CreateAPIKey issues a key with the given scopes (nil means ports.DefaultScopes) and returns its token, the
// only time the plaintext exists. Only the prefix and the SHA-256 of the whole token are stored (SPEC §5
// rule 3). New keys always enforce their scopes. The store inserts the key only while the organization
// holds fewer than Config.MaxAPIKeys keys that are not revoked, decided atomically with the insert; past
// it the answer is permission_denied (ports.ReasonResourceLimit).
func (s *Service) CreateAPIKey(ctx context.Context, orgID, name string, scopes []string) (ports.CreatedAPIKey, error) {
	var violations []ports.FieldViolation
	name = strings.TrimSpace(name)
	if !validText(name, 1, maxAPIKeyNameLen) {
		violations = append(violations, ports.FieldViolation{Path: "name", Message: "must be 1 to 100 characters"})
	}
	scopes, scopeViolations := normaliseScopes(scopes)
	violations = append(violations, scopeViolations...)
	if len(violations) > 0 {
		return ports.CreatedAPIKey{}, ports.ValidationError(violations...)
	}

	token, prefix := newAPIKeyToken()
	key := ports.APIKey{
		ID:             newID(),
		OrganizationID: orgID,
		Name:           name,
		Prefix:         prefix,
		TokenHash:      tokenHash(token),
		Scopes:         scopes,
		ScopesEnforced: true,
		CreatedAt:      s.now(),
	}
	inserted, err := s.apiKeys.InsertAPIKeyWithin(ctx, key, s.cfg.MaxAPIKeys)
	if err != nil {
		return ports.CreatedAPIKey{}, fmt.Errorf("account: insert API key: %w", err)
	}
	if !inserted {
		return ports.CreatedAPIKey{}, ports.ResourceLimitReached(ports.ResourceAPIKeys, "active API keys",
			s.cfg.MaxAPIKeys, MaxAPIKeysSetting)
	}
	key.TokenHash = nil
	return ports.CreatedAPIKey{APIKey: key, Token: token}, nil
}

// ListAPIKeys returns the organization's keys, newest first, without their hashes.
func (s *Service) ListAPIKeys(ctx context.Context, orgID string) ([]ports.APIKey, error) {
	keys, err := s.apiKeys.ListAPIKeys(ctx, orgID)
	if err != nil {
		return nil, fmt.Errorf("account: list API keys: %w", err)
	}
	for i := range keys {
		keys[i].TokenHash = nil
	}
	return keys, nil
}

// RevokeAPIKey revokes a key at once (SPEC §5 rule 4): the organization's cached keys are forgotten before
// it returns, so this process's next request with the key fails, and the store announces the revocation
// to the other processes, whose caches forget it moments later (at worst after Config.APIKeyCacheTTL).
// The cache is forgotten on failure too, since an error may follow a commit.
func (s *Service) RevokeAPIKey(ctx context.Context, orgID, id string) error {
	err := s.apiKeys.RevokeAPIKey(ctx, orgID, id, s.now())
	s.forgetAPIKeysOf(orgID)
	if err != nil {
		return fmt.Errorf("account: revoke API key: %w", err)
	}
	return nil
}

// AuthenticateAPIKey resolves a svc_live_ token to its organization and scopes. The token's shape is checked
// before any lookup, the key is found by its prefix (in the short-lived cache, else in the store), and the
// SHA-256 of the whole token is compared in constant time, on every call, so the stored hash leaks nothing
// through timing and a cached record admits only the right secret. Revoked keys fail. Unknown prefixes are
// not cached: each costs a query, as it did before the cache, and cannot crowd out real keys. The use is
// recorded in memory and written by Run.
func (s *Service) AuthenticateAPIKey(ctx context.Context, token string) (ports.Principal, error) {
	prefix, ok := apiKeyPrefix(token)
	if !ok {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidAPIKey)
	}
	key, ok := s.keyCache.Get(prefix)
	if !ok {
		var err error
		key, err = s.apiKeys.APIKeyByPrefix(ctx, prefix)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return ports.Principal{}, ports.Unauthenticated(msgInvalidAPIKey)
		}
		if err != nil {
			return ports.Principal{}, fmt.Errorf("account: look up API key: %w", err)
		}
		if key.Prefix == prefix {
			s.keyCache.Put(prefix, key)
		}
	}
	if subtle.ConstantTimeCompare(tokenHash(token), key.TokenHash) != 1 {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidAPIKey)
	}
	if key.RevokedAt != nil {
		return ports.Principal{}, ports.Unauthenticated("API key revoked")
	}
	s.recordUse(key.ID, s.now())
	return ports.Principal{
		Kind:           ports.PrincipalAPIKey,
		OrganizationID: key.OrganizationID,
		APIKeyID:       key.ID,
		Scopes:         slices.Clone(key.Scopes),
		ScopesEnforced: key.ScopesEnforced,
	}, nil
}

func (s *Service) recordUse(keyID string, at time.Time) {
	s.touchMu.Lock()
	defer s.touchMu.Unlock()
	if prev, ok := s.touched[keyID]; !ok || at.After(prev) {
		s.touched[keyID] = at
	}
}

// Run writes API keys' lastUsedAt every TouchFlushInterval, and once more when ctx ends so a clean shutdown
// loses no use. It returns nil after that last flush. The composition root runs it as a service.
func (s *Service) Run(ctx context.Context) error {
	ticker := time.NewTicker(TouchFlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), touchFlushTimeout)
			err := s.flushUses(flushCtx)
			cancel()
			if err != nil {
				s.logger.WarnContext(flushCtx, "final API key lastUsedAt flush failed", "error", err)
			}
			return nil
		case <-ticker.C:
			if err := s.flushUses(ctx); err != nil && ctx.Err() == nil {
				s.logger.WarnContext(ctx, "API key lastUsedAt flush failed; will retry", "error", err)
			}
		}
	}
}

// flushUses hands the pending uses to the store. On failure they go back into the batch (keeping any later
// use recorded meanwhile) for the next attempt.
func (s *Service) flushUses(ctx context.Context) error {
	s.touchMu.Lock()
	batch := s.touched
	if len(batch) == 0 {
		s.touchMu.Unlock()
		return nil
	}
	s.touched = make(map[string]time.Time, len(batch))
	s.touchMu.Unlock()

	if err := s.apiKeys.TouchAPIKeys(ctx, batch); err != nil {
		for id, at := range batch {
			s.recordUse(id, at)
		}
		return err
	}
	return nil
}
