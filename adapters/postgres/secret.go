package postgres

import (
	"context"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.SealedStore = (*Secrets)(nil)

// Secrets is the PostgreSQL store of the columns sealed with the master secret (ports.SealedStore), for the
// operator's re-encryption after a key rotation. It reads across every organization, which no request path
// does. Safe for concurrent use.
type Secrets struct{ shared }

// nilUUID sorts before every id, so paging from "" starts at the first row.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// SealedValues implements ports.SealedStore.
func (s *Secrets) SealedValues(ctx context.Context, column ports.SealedColumn, afterID string, limit int) ([]ports.SealedValue, error) {
	if afterID == "" {
		afterID = nilUUID
	}
	if limit <= 0 {
		return nil, nil
	}
	lim := int32(min(limit, 1<<20))
	var out []ports.SealedValue
	switch column {
	case ports.SealedTOTPSeeds:
		rows, err := s.queries.SealedTOTPSeeds(ctx, db.SealedTOTPSeedsParams{AfterID: afterID, MaxRows: lim})
		if err != nil {
			return nil, interpretError(err)
		}
		for _, r := range rows {
			out = append(out, ports.SealedValue{ID: r.ID, Sealed: r.Sealed})
		}
	case ports.SealedDKIMKeys:
		rows, err := s.queries.SealedDKIMKeys(ctx, db.SealedDKIMKeysParams{AfterID: afterID, MaxRows: lim})
		if err != nil {
			return nil, interpretError(err)
		}
		for _, r := range rows {
			out = append(out, ports.SealedValue{ID: r.ID, Sealed: r.Sealed})
		}
	case ports.SealedWebhookSecrets:
		rows, err := s.queries.SealedWebhookSecrets(ctx, db.SealedWebhookSecretsParams{AfterID: afterID, MaxRows: lim})
		if err != nil {
			return nil, interpretError(err)
		}
		for _, r := range rows {
			out = append(out, ports.SealedValue{ID: r.ID, Sealed: r.Sealed})
		}
	default:
		return nil, ports.Errorf(ports.CodeInvalidArgument, "unknown sealed column %q", column)
	}
	return out, nil
}

// ReplaceSealed implements ports.SealedStore with a conditional UPDATE (the value still equals current).
func (s *Secrets) ReplaceSealed(ctx context.Context, column ports.SealedColumn, id string, current, replacement []byte) (bool, error) {
	var (
		n   int64
		err error
	)
	switch column {
	case ports.SealedTOTPSeeds:
		n, err = s.queries.ReplaceTOTPSeed(ctx, db.ReplaceTOTPSeedParams{ID: id, Current: current, Replacement: replacement})
	case ports.SealedDKIMKeys:
		n, err = s.queries.ReplaceDKIMKey(ctx, db.ReplaceDKIMKeyParams{ID: id, Current: current, Replacement: replacement})
	case ports.SealedWebhookSecrets:
		n, err = s.queries.ReplaceWebhookSecret(ctx, db.ReplaceWebhookSecretParams{ID: id, Current: current, Replacement: replacement})
	default:
		return false, ports.Errorf(ports.CodeInvalidArgument, "unknown sealed column %q", column)
	}
	if err := listError(err); err != nil {
		return false, err
	}
	return n == 1, nil
}
