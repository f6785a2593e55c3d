package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.AccountStore = (*Accounts)(nil)

// Accounts is the PostgreSQL store of users, memberships and refresh tokens (ports.AccountStore). Safe for
// concurrent use.
type Accounts struct{ shared }

// CreateSignup implements ports.AccountStore: the user, the organization and the owner membership are
// written in one transaction, so a conflict on users_email_key or organizations_slug_key leaves nothing
// behind.
func (s *Accounts) CreateSignup(ctx context.Context, u ports.User, org ports.Organization, m ports.Membership) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		if err := q.InsertUser(ctx, db.InsertUserParams{
			ID:           u.ID,
			Email:        u.Email,
			PasswordHash: u.PasswordHash,
			IsAdmin:      u.IsAdmin,
			TotpSecret:   u.TOTPSecret,
			TotpEnabled:  u.TOTPEnabled,
			CreatedAt:    u.CreatedAt,
		}); err != nil {
			return err
		}
		if err := q.InsertOrganization(ctx, db.InsertOrganizationParams{
			ID:           org.ID,
			Name:         org.Name,
			Slug:         org.Slug,
			Paused:       org.Paused,
			MonthlyLimit: org.Plan.MonthlyLimit,
			WarmupCap:    org.Plan.WarmupCap,
			CreatedAt:    org.CreatedAt,
		}); err != nil {
			return err
		}
		return q.InsertMembership(ctx, db.InsertMembershipParams{
			OrganizationID: m.OrganizationID,
			UserID:         m.UserID,
			Role:           m.Role,
			CreatedAt:      m.CreatedAt,
		})
	})
	return interpretError(err)
}

// UserByEmail implements ports.AccountStore. The caller normalises the email; the match is exact.
func (s *Accounts) UserByEmail(ctx context.Context, email string) (ports.User, error) {
	row, err := s.queries.UserByEmail(ctx, email)
	if err != nil {
		return ports.User{}, interpretErrorFor("user", err)
	}
	return userFromRow(row), nil
}

// UserByID implements ports.AccountStore.
func (s *Accounts) UserByID(ctx context.Context, id string) (ports.User, error) {
	row, err := s.queries.UserByID(ctx, id)
	if err != nil {
		return ports.User{}, interpretErrorFor("user", err)
	}
	return userFromRow(row), nil
}

// Memberships implements ports.AccountStore: oldest first, because login defaults to the oldest
// membership when no orgId is given.
func (s *Accounts) Memberships(ctx context.Context, userID string) ([]ports.Membership, error) {
	rows, err := s.queries.MembershipsByUser(ctx, userID)
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.Membership, 0, len(rows))
	for _, r := range rows {
		out = append(out, membershipFromRow(r))
	}
	return out, nil
}

// SetUserTOTP implements ports.AccountStore; not_found when no user has this id.
func (s *Accounts) SetUserTOTP(ctx context.Context, userID string, secret []byte, enabled bool) error {
	n, err := s.queries.SetUserTOTP(ctx, db.SetUserTOTPParams{ID: userID, TotpSecret: secret, TotpEnabled: enabled})
	if err != nil {
		return interpretErrorFor("user", err)
	}
	if n == 0 {
		return ports.NotFound("user not found")
	}
	return nil
}

// InsertRefreshToken implements ports.AccountStore.
func (s *Accounts) InsertRefreshToken(ctx context.Context, t ports.RefreshToken) error {
	err := s.queries.InsertRefreshToken(ctx, db.InsertRefreshTokenParams{
		OrganizationID: t.OrganizationID,
		ID:             t.ID,
		UserID:         t.UserID,
		FamilyID:       t.FamilyID,
		TokenHash:      t.TokenHash,
		ExpiresAt:      t.ExpiresAt,
		UsedAt:         t.UsedAt,
		RevokedAt:      t.RevokedAt,
		CreatedAt:      t.CreatedAt,
	})
	return interpretError(err)
}

// ConsumeRefreshToken implements ports.AccountStore. The conditional UPDATE is the whole decision: of
// any number of concurrent requests presenting the same token, exactly one sees a row come back and is
// fresh; the others find the token already used and the caller revokes the family.
func (s *Accounts) ConsumeRefreshToken(ctx context.Context, hash []byte, now time.Time) (ports.RefreshToken, bool, error) {
	row, err := s.queries.ConsumeRefreshToken(ctx, db.ConsumeRefreshTokenParams{TokenHash: hash, UsedAt: &now})
	if err == nil {
		return refreshTokenFromRow(row), true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return ports.RefreshToken{}, false, interpretErrorFor("refresh token", err)
	}
	row, err = s.queries.RefreshTokenByHash(ctx, hash)
	if err != nil {
		return ports.RefreshToken{}, false, interpretErrorFor("refresh token", err)
	}
	return refreshTokenFromRow(row), false, nil
}

// RevokeRefreshFamily implements ports.AccountStore. Tokens revoked earlier keep their time.
func (s *Accounts) RevokeRefreshFamily(ctx context.Context, familyID string, now time.Time) error {
	err := s.queries.RevokeRefreshFamily(ctx, db.RevokeRefreshFamilyParams{FamilyID: familyID, RevokedAt: &now})
	// A malformed family id names no tokens: like an unknown one, there is nothing to revoke.
	return listError(err)
}

func userFromRow(r db.User) ports.User {
	return ports.User{
		ID:           r.ID,
		Email:        r.Email,
		PasswordHash: r.PasswordHash,
		IsAdmin:      r.IsAdmin,
		TOTPSecret:   r.TotpSecret,
		TOTPEnabled:  r.TotpEnabled,
		CreatedAt:    r.CreatedAt.UTC(),
	}
}

func membershipFromRow(r db.Membership) ports.Membership {
	return ports.Membership{
		UserID:         r.UserID,
		OrganizationID: r.OrganizationID,
		Role:           r.Role,
		CreatedAt:      r.CreatedAt.UTC(),
	}
}

func refreshTokenFromRow(r db.RefreshToken) ports.RefreshToken {
	return ports.RefreshToken{
		ID:             r.ID,
		UserID:         r.UserID,
		OrganizationID: r.OrganizationID,
		FamilyID:       r.FamilyID,
		TokenHash:      r.TokenHash,
		ExpiresAt:      r.ExpiresAt.UTC(),
		UsedAt:         utcPtr(r.UsedAt),
		RevokedAt:      utcPtr(r.RevokedAt),
		CreatedAt:      r.CreatedAt.UTC(),
	}
}
