package postgres

import (
	"context"
	"time"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.APIKeyStore = (*APIKeys)(nil)

// APIKeys is the PostgreSQL store of API keys, kept as token hashes (ports.APIKeyStore). Safe for concurrent
// use.
type APIKeys struct{ shared }

// InsertAPIKey writes the key with no bound on the organization's keys: InsertAPIKeyWithin with max 0, for
// tools and tests that place rows directly.
func (s *APIKeys) InsertAPIKey(ctx context.Context, k ports.APIKey) error {
	_, err := s.InsertAPIKeyWithin(ctx, k, 0)
	return err
}

// InsertAPIKeyWithin implements ports.APIKeyStore in one transaction (one pipelined batch): a
// per-organization advisory lock, then the insert only while the organization holds fewer than max keys
// that are not revoked, counted after the lock so concurrent creations take turns. A nil scope list is
// stored as an empty one, never NULL.
func (s *APIKeys) InsertAPIKeyWithin(ctx context.Context, k ports.APIKey, max int) (bool, error) {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	var n int64
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error { return q.LockOrganizationAPIKeys(ctx, k.OrganizationID) },
		func(q *db.Queries) (err error) {
			n, err = q.InsertAPIKeyWithin(ctx, db.InsertAPIKeyWithinParams{
				OrganizationID: k.OrganizationID,
				ID:             k.ID,
				Name:           k.Name,
				Prefix:         k.Prefix,
				TokenHash:      k.TokenHash,
				Scopes:         scopes,
				ScopesEnforced: k.ScopesEnforced,
				LastUsedAt:     k.LastUsedAt,
				RevokedAt:      k.RevokedAt,
				CreatedAt:      k.CreatedAt,
				MaxKeys:        clampInt32(max),
			})
			return err
		})
	if err != nil {
		return false, interpretError(err)
	}
	return n > 0, nil
}

// ListAPIKeys implements ports.APIKeyStore: newest first (SPEC §4.1), revoked keys included.
func (s *APIKeys) ListAPIKeys(ctx context.Context, orgID string) ([]ports.APIKey, error) {
	rows, err := s.queries.ListAPIKeys(ctx, orgID)
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.APIKey, 0, len(rows))
	for _, r := range rows {
		out = append(out, apiKeyFromRow(r))
	}
	return out, nil
}

// RevokeAPIKey implements ports.APIKeyStore. Revoking twice keeps the first revokedAt, so the record
// shows when the key actually stopped working. The api_keys trigger (migration 00034) announces the first
// revocation on the change feed as a change of the key's organization, so processes that cache keys by
// prefix forget them.
func (s *APIKeys) RevokeAPIKey(ctx context.Context, orgID, id string, now time.Time) error {
	n, err := s.queries.RevokeAPIKey(ctx, db.RevokeAPIKeyParams{OrganizationID: orgID, ID: id, RevokedAt: &now})
	if err != nil {
		return interpretErrorFor("API key", err)
	}
	if n == 0 {
		return ports.NotFound("API key not found")
	}
	return nil
}

// APIKeyByPrefix implements ports.APIKeyStore. It is not scoped by organization because the prefix is
// how a request's organization is found (SPEC §5 rule 4); revoked keys are returned too and the caller
// rejects them.
func (s *APIKeys) APIKeyByPrefix(ctx context.Context, prefix string) (ports.APIKey, error) {
	row, err := s.queries.APIKeyByPrefix(ctx, prefix)
	if err != nil {
		return ports.APIKey{}, interpretErrorFor("API key", err)
	}
	return apiKeyFromRow(row), nil
}

// TouchAPIKeys implements ports.APIKeyStore in one statement for the whole batch. lastUsedAt only moves
// forward, so an older batch flushed late cannot undo a newer one; unknown ids are ignored.
func (s *APIKeys) TouchAPIKeys(ctx context.Context, lastUsed map[string]time.Time) error {
	if len(lastUsed) == 0 {
		return nil
	}
	p := db.TouchAPIKeysParams{
		Ids:    make([]string, 0, len(lastUsed)),
		UsedAt: make([]time.Time, 0, len(lastUsed)),
	}
	for id, at := range lastUsed {
		p.Ids = append(p.Ids, id)
		p.UsedAt = append(p.UsedAt, at)
	}
	return interpretError(s.queries.TouchAPIKeys(ctx, p))
}

func apiKeyFromRow(r db.ApiKey) ports.APIKey {
	return ports.APIKey{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Name:           r.Name,
		Prefix:         r.Prefix,
		TokenHash:      r.TokenHash,
		Scopes:         r.Scopes,
		ScopesEnforced: r.ScopesEnforced,
		LastUsedAt:     utcPtr(r.LastUsedAt),
		RevokedAt:      utcPtr(r.RevokedAt),
		CreatedAt:      r.CreatedAt.UTC(),
	}
}
