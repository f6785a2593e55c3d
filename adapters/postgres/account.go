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
// behind. A sign-up asking for the admin bootstrap (u.IsAdmin) takes a transaction-scoped advisory lock
// first and becomes admin only if no user is one yet: concurrent bootstrap sign-ups wait for each other,
// so at most one of them gets it.
func (s *Accounts) CreateSignup(ctx context.Context, u ports.User, org ports.Organization, m ports.Membership) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		if u.IsAdmin {
			if err := q.LockAdminBootstrap(ctx); err != nil {
				return err
			}
			exists, err := q.AnyAdmin(ctx)
			if err != nil {
				return err
			}
			u.IsAdmin = !exists
		}
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

// SetUserAdmin implements ports.AccountStore; not_found when no user has this email.
func (s *Accounts) SetUserAdmin(ctx context.Context, email string, admin bool) error {
	n, err := s.queries.SetUserAdmin(ctx, db.SetUserAdminParams{Email: email, IsAdmin: admin})
	if err != nil {
		return interpretErrorFor("user", err)
	}
	if n == 0 {
		return ports.NotFound("user not found")
	}
	return nil
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

// ClaimTOTPStep implements ports.AccountStore with one conditional UPDATE (totp_last_step < step): of
// concurrent claims of one step exactly one changes the row. not_found when no user has this id.
func (s *Accounts) ClaimTOTPStep(ctx context.Context, userID string, step int64) (bool, error) {
	n, err := s.queries.ClaimTOTPStep(ctx, db.ClaimTOTPStepParams{ID: userID, Step: step})
	if err != nil {
		return false, interpretErrorFor("user", err)
	}
	if n == 1 {
		return true, nil
	}
	if _, err := s.queries.UserByID(ctx, userID); err != nil {
		return false, interpretErrorFor("user", err)
	}
	return false, nil
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

// RotateRefreshToken implements ports.AccountStore. Rotations and revocations of one family are serialised
// by a transaction-scoped advisory lock on the family, and the conditional UPDATE that spends the token
// commits together with the successor's INSERT. So of concurrent requests presenting one token exactly one
// is fresh, and a revocation of the family, which waits for the same lock, always sees (and revokes) the
// successor of every rotation before it.
func (s *Accounts) RotateRefreshToken(ctx context.Context, hash []byte, now time.Time, next ports.RefreshToken) (ports.RefreshToken, bool, error) {
	family, err := s.queries.RefreshFamilyByHash(ctx, hash)
	if err != nil {
		return ports.RefreshToken{}, false, interpretErrorFor("refresh token", err)
	}
	var (
		spent db.RefreshToken
		fresh bool
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		if err := q.LockRefreshFamily(ctx, family); err != nil {
			return err
		}
		row, err := q.SpendRefreshToken(ctx, db.SpendRefreshTokenParams{Now: now, TokenHash: hash})
		if errors.Is(err, pgx.ErrNoRows) {
			spent, err = q.RefreshTokenByHash(ctx, hash)
			return err
		}
		if err != nil {
			return err
		}
		spent, fresh = row, true
		return q.InsertRefreshToken(ctx, db.InsertRefreshTokenParams{
			OrganizationID: row.OrganizationID,
			ID:             next.ID,
			UserID:         row.UserID,
			FamilyID:       row.FamilyID,
			TokenHash:      next.TokenHash,
			ExpiresAt:      next.ExpiresAt,
			CreatedAt:      next.CreatedAt,
		})
	})
	if err != nil {
		return ports.RefreshToken{}, false, interpretErrorFor("refresh token", err)
	}
	return refreshTokenFromRow(spent), fresh, nil
}

// RevokeRefreshFamily implements ports.AccountStore. Tokens revoked earlier keep their time. It waits for
// any rotation of the family in progress (the family lock of RotateRefreshToken), so the successor that
// rotation stores is revoked too.
func (s *Accounts) RevokeRefreshFamily(ctx context.Context, familyID string, now time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		if err := q.LockRefreshFamily(ctx, familyID); err != nil {
			return err
		}
		return q.RevokeRefreshFamily(ctx, db.RevokeRefreshFamilyParams{FamilyID: familyID, RevokedAt: &now})
	})
	// A malformed family id names no tokens: like an unknown one, there is nothing to revoke.
	return listError(err)
}

// RevokeRefreshTokenFamily implements ports.AccountStore: logout. not_found when no token has this hash.
func (s *Accounts) RevokeRefreshTokenFamily(ctx context.Context, hash []byte, now time.Time) error {
	family, err := s.queries.RefreshFamilyByHash(ctx, hash)
	if err != nil {
		return interpretErrorFor("refresh token", err)
	}
	return s.RevokeRefreshFamily(ctx, family, now)
}

func userFromRow(r db.User) ports.User {
	return ports.User{
		ID:           r.ID,
		Email:        r.Email,
		PasswordHash: r.PasswordHash,
		IsAdmin:      r.IsAdmin,
		TOTPSecret:   r.TotpSecret,
		TOTPEnabled:  r.TotpEnabled,
		TOTPLastStep: r.TotpLastStep,
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
