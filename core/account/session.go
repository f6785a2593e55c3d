package account

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/ports"
)

// Membership role of the user who creates an organization.
const roleOwner = "owner"

// Messages of the login failures. One message covers both an unknown email and a wrong password, so the
// answer does not reveal which accounts exist.
const (
	msgInvalidLogin    = "invalid email or password"
	msgTOTPRequired    = "two-factor code required"
	msgInvalidTOTP     = "invalid two-factor code"
	msgInvalidSession  = "invalid or expired access token"
	msgInvalidRefresh  = "invalid or expired refresh token"
	msgNotAMember      = "not a member of the requested organization"
	msgNoOrganizations = "the user belongs to no organization"
)

// Signup creates a user, an organization and the owner membership in one store transaction and signs the user
// in. Conflicts are left to the store's unique constraints (users_email_key, organizations_slug_key) rather
// than checked first, which would race.
func (s *Service) Signup(ctx context.Context, in ports.SignupInput) (ports.SignupResult, error) {
	var violations []ports.FieldViolation
	email, ok := normaliseEmail(in.Email)
	if !ok {
		violations = append(violations, ports.FieldViolation{Path: "email", Message: violationEmail})
	}
	if !validPassword(in.Password) {
		violations = append(violations, ports.FieldViolation{Path: "password", Message: violationPassword})
	}
	var name, slug string
	if ok || in.OrganizationName != "" { // the derived name needs a valid email
		var nameOK bool
		if name, slug, nameOK = organizationNameAndSlug(in.OrganizationName, email); !nameOK {
			violations = append(violations, ports.FieldViolation{Path: "organizationName", Message: "must be 1 to 120 characters"})
		}
	}
	if len(violations) > 0 {
		return ports.SignupResult{}, ports.ValidationError(violations...)
	}

	hash, err := s.hash(ctx, in.Password)
	if err != nil {
		return ports.SignupResult{}, err
	}
	now := s.now()
	user := ports.User{
		ID:           newID(),
		Email:        email,
		PasswordHash: hash,
		// A listed email asks for the admin bootstrap; the store grants it only while no admin exists.
		IsAdmin:   s.admins[email],
		CreatedAt: now,
	}
	org := ports.Organization{ID: newID(), Name: name, Slug: slug, CreatedAt: now, Plan: s.cfg.DefaultPlan}
	membership := ports.Membership{UserID: user.ID, OrganizationID: org.ID, Role: roleOwner, CreatedAt: now}
	if err := s.accounts.CreateSignup(ctx, user, org, membership); err != nil {
		return ports.SignupResult{}, fmt.Errorf("account: signup: %w", err)
	}
	tokens, err := s.issueTokens(ctx, user.ID, org.ID, newID(), now)
	if err != nil {
		return ports.SignupResult{}, err
	}
	return ports.SignupResult{UserID: user.ID, OrganizationID: org.ID, Tokens: tokens}, nil
}

// Login checks the password and, when 2FA is enabled, the TOTP code, then issues a token pair for the chosen
// organization (the oldest membership unless OrgID names another). Every login starts a new refresh family.
// Each attempt counts against the email's per-account window before any work, and costs one argon2id hash
// in the bounded pool whether or not the account exists.
func (s *Service) Login(ctx context.Context, in ports.LoginInput) (ports.TokenPair, error) {
	var violations []ports.FieldViolation
	email, ok := normaliseEmail(in.Email)
	if !ok {
		violations = append(violations, ports.FieldViolation{Path: "email", Message: violationEmail})
	}
	if !validPassword(in.Password) {
		violations = append(violations, ports.FieldViolation{Path: "password", Message: violationPassword})
	}
	if in.TOTP != "" && !validTOTPCode(in.TOTP) {
		violations = append(violations, ports.FieldViolation{Path: "totp", Message: "must be exactly 6 digits"})
	}
	var orgID string
	if in.OrgID != "" {
		id, err := uuid.Parse(in.OrgID)
		if err != nil {
			violations = append(violations, ports.FieldViolation{Path: "orgId", Message: "must be a UUID"})
		}
		orgID = id.String()
	}
	if len(violations) > 0 {
		return ports.TokenPair{}, ports.ValidationError(violations...)
	}

	if err := s.throttleAccount(ctx, email); err != nil {
		return ports.TokenPair{}, err
	}
	user, err := s.accounts.UserByEmail(ctx, email)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		// Spend the same work as for a real account (no timing oracle on who has signed up).
		if _, err := s.verify(ctx, in.Password, s.dummyHash); ports.ErrorCode(err) == ports.CodeResourceExhausted {
			return ports.TokenPair{}, err
		}
		return ports.TokenPair{}, ports.Unauthenticated(msgInvalidLogin)
	}
	if err != nil {
		return ports.TokenPair{}, fmt.Errorf("account: load user: %w", err)
	}
	if err := s.checkPassword(ctx, user, in.Password, msgInvalidLogin); err != nil {
		return ports.TokenPair{}, err
	}

	var totpStep uint64
	if user.TOTPEnabled {
		if in.TOTP == "" {
			return ports.TokenPair{}, ports.Unauthenticated(msgTOTPRequired)
		}
		if totpStep, err = s.matchUserTOTP(user, in.TOTP); err != nil {
			return ports.TokenPair{}, err
		}
	}

	orgID, err = s.loginOrganization(ctx, user.ID, orgID)
	if err != nil {
		return ports.TokenPair{}, err
	}
	if user.TOTPEnabled {
		// Spend the code only once the login is certain to succeed. The claim is a conditional update, so
		// of two logins racing with one code exactly one gets through.
		if err := s.claimTOTPStep(ctx, user.ID, totpStep, msgInvalidTOTP); err != nil {
			return ports.TokenPair{}, err
		}
	}
	return s.issueTokens(ctx, user.ID, orgID, newID(), s.now())
}

// throttleAccount counts one password attempt against the email's per-account window (beside the edge's
// per-IP one), before the store or the hash is touched. The key is the normalised email whether or not an
// account has it, so being throttled reveals nothing about who has signed up.
func (s *Service) throttleAccount(ctx context.Context, email string) error {
	d, err := s.limiter.Allow(ctx, "login-account:"+email, s.cfg.LoginAccountLimit, s.cfg.LoginAccountWindow)
	if err != nil {
		return fmt.Errorf("account: login throttle: %w", err)
	}
	if !d.Allowed {
		return ports.RateLimited(int((d.RetryAfter + time.Second - 1) / time.Second))
	}
	return nil
}

// checkPassword verifies password against the user's hash in the pool; a mismatch is unauthenticated with
// message.
func (s *Service) checkPassword(ctx context.Context, user ports.User, password, message string) error {
	match, err := s.verify(ctx, password, user.PasswordHash)
	if ports.ErrorCode(err) == ports.CodeResourceExhausted {
		return err
	}
	if err != nil {
		return fmt.Errorf("account: password hash of user %s: %w", user.ID, err)
	}
	if !match {
		return ports.Unauthenticated("%s", message)
	}
	return nil
}

// loginOrganization returns requested when the user is a member of it, or the oldest membership when nothing
// was requested. Asking for an organization the user is not in is an authentication failure, not a 404, so it
// reveals nothing about other tenants.
func (s *Service) loginOrganization(ctx context.Context, userID, requested string) (string, error) {
	memberships, err := s.accounts.Memberships(ctx, userID)
	if err != nil {
		return "", fmt.Errorf("account: memberships: %w", err)
	}
	if requested != "" {
		for _, m := range memberships {
			if m.OrganizationID == requested {
				return requested, nil
			}
		}
		return "", ports.Unauthenticated(msgNotAMember)
	}
	if len(memberships) == 0 {
		return "", ports.Unauthenticated(msgNoOrganizations)
	}
	oldest := memberships[0]
	for _, m := range memberships[1:] {
		if m.CreatedAt.Before(oldest.CreatedAt) {
			oldest = m
		}
	}
	return oldest.OrganizationID, nil
}

// Refresh spends a refresh token for a fresh pair in the same family. Refresh tokens rotate on every use; a
// second use of a spent token means it was copied, so the whole family is revoked and the legitimate holder
// must log in again (the reuse detection of RFC 9700 §4.14.2). The store spends the token and stores its
// successor in one transaction under the token's row lock, so of two refreshes racing with one token exactly
// one gets a pair, and the other's revocation of the family also catches the successor the first one got.
func (s *Service) Refresh(ctx context.Context, refreshToken string) (ports.TokenPair, error) {
	if !validRefreshToken(refreshToken) {
		return ports.TokenPair{}, ports.Unauthenticated(msgInvalidRefresh)
	}
	now := s.now()
	refresh := newRefreshToken()
	next := ports.RefreshToken{
		ID:        newID(),
		TokenHash: tokenHash(refresh),
		ExpiresAt: now.Add(s.cfg.RefreshTTL),
		CreatedAt: now,
	}
	stored, fresh, err := s.accounts.RotateRefreshToken(ctx, tokenHash(refreshToken), now, next)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.TokenPair{}, ports.Unauthenticated(msgInvalidRefresh)
	}
	if err != nil {
		return ports.TokenPair{}, fmt.Errorf("account: rotate refresh token: %w", err)
	}
	if !fresh {
		if stored.UsedAt == nil && stored.RevokedAt == nil {
			return ports.TokenPair{}, ports.Unauthenticated(msgInvalidRefresh) // expired, never used
		}
		if stored.UsedAt != nil {
			s.logger.WarnContext(ctx, "refresh token reused; revoking its family",
				"user_id", stored.UserID, "family_id", stored.FamilyID)
		}
		if err := s.accounts.RevokeRefreshFamily(ctx, stored.FamilyID, now); err != nil {
			return ports.TokenPair{}, fmt.Errorf("account: revoke refresh family: %w", err)
		}
		return ports.TokenPair{}, ports.Unauthenticated(msgInvalidRefresh)
	}
	access, err := signAccessToken(s.accessKeys[0], stored.UserID, stored.OrganizationID, now, s.cfg.AccessTTL)
	if err != nil {
		return ports.TokenPair{}, fmt.Errorf("account: sign access token: %w", err)
	}
	return ports.TokenPair{AccessToken: access, RefreshToken: refresh}, nil
}

// Logout revokes the family of a refresh token: the token, every token refreshed from it and the one the
// current session would refresh with next. The access token in hand stays valid until it expires (at most
// Config.AccessTTL): access tokens are not revocable, which is why they are short-lived.
func (s *Service) Logout(ctx context.Context, refreshToken string) error {
	if !validRefreshToken(refreshToken) {
		return ports.Unauthenticated(msgInvalidRefresh)
	}
	err := s.accounts.RevokeRefreshTokenFamily(ctx, tokenHash(refreshToken), s.now())
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.Unauthenticated(msgInvalidRefresh)
	}
	if err != nil {
		return fmt.Errorf("account: revoke refresh family: %w", err)
	}
	return nil
}

// issueTokens signs an access token and stores the hash of a new refresh token in family.
func (s *Service) issueTokens(ctx context.Context, userID, orgID, family string, now time.Time) (ports.TokenPair, error) {
	access, err := signAccessToken(s.accessKeys[0], userID, orgID, now, s.cfg.AccessTTL)
	if err != nil {
		return ports.TokenPair{}, fmt.Errorf("account: sign access token: %w", err)
	}
	refresh := newRefreshToken()
	err = s.accounts.InsertRefreshToken(ctx, ports.RefreshToken{
		ID:             newID(),
		UserID:         userID,
		OrganizationID: orgID,
		FamilyID:       family,
		TokenHash:      tokenHash(refresh),
		ExpiresAt:      now.Add(s.cfg.RefreshTTL),
		CreatedAt:      now,
	})
	if err != nil {
		return ports.TokenPair{}, fmt.Errorf("account: store refresh token: %w", err)
	}
	return ports.TokenPair{AccessToken: access, RefreshToken: refresh}, nil
}

// AuthenticateSession verifies an access JWT and loads its user. IsAdmin comes from the user row, never from
// the token, so granting or withdrawing admin needs no token change and a token cannot claim it.
func (s *Service) AuthenticateSession(ctx context.Context, token string) (ports.Principal, error) {
	userID, orgID, err := parseAccessToken(s.accessKeys, token, s.clock.Now())
	if err != nil {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidSession)
	}
	user, err := s.accounts.UserByID(ctx, userID)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidSession)
	}
	if err != nil {
		return ports.Principal{}, fmt.Errorf("account: load session user: %w", err)
	}
	return ports.Principal{
		Kind:           ports.PrincipalSession,
		OrganizationID: orgID,
		UserID:         user.ID,
		IsAdmin:        user.IsAdmin,
		TwoFactor:      user.TOTPEnabled,
	}, nil
}

// newID is id.New under the name this package's files use.
var newID = id.New
