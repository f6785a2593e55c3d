package account

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"

	"github.com/postmill/postmill/ports"
)

// TOTP parameters fixed by ARCHITECTURE.md: RFC 6238 with SHA-1, 6 digits and a 30-second step, the profile
// every authenticator app supports. A skew of one step either side absorbs clock drift and typing time
// (RFC 6238 §5.2).
const (
	totpIssuer = "Postmill"
	totpPeriod = 30
	totpSkew   = 1
	// totpStateVersion tags the plaintext layout of a sealed TOTP state.
	totpStateVersion byte = 1
)

var errMalformedTOTPState = errors.New("malformed TOTP state")

// totpState is what the user row's encrypted TOTP column holds: the base32 seed and, in seeds sealed before
// the user row had a column of its own for it, the last accepted time step. The step that counts now is
// User.TOTPLastStep, claimed with a conditional update (RFC 6238 §5.2: "the verifier MUST NOT accept the
// second attempt of the OTP after the successful validation"); a rewrite of the sealed value could not
// stop two logins racing with one code.
type totpState struct {
	Secret   string
	LastStep uint64
}

func (s totpState) marshal() []byte {
	b := make([]byte, 0, 1+8+len(s.Secret))
	b = append(b, totpStateVersion)
	b = binary.BigEndian.AppendUint64(b, s.LastStep)
	return append(b, s.Secret...)
}

func unmarshalTOTPState(b []byte) (totpState, error) {
	if len(b) < 1+8+1 || b[0] != totpStateVersion {
		return totpState{}, errMalformedTOTPState
	}
	return totpState{LastStep: binary.BigEndian.Uint64(b[1:9]), Secret: string(b[9:])}, nil
}

// totpStep is the RFC 6238 §4.2 time counter T = floor((now - T0) / X) with T0 = 0 and X = 30 s.
func totpStep(now time.Time) uint64 {
	return uint64(now.Unix()) / totpPeriod
}

// matchTOTP checks code against the steps around now and returns the step it matched. Steps at or before
// lastStep are skipped: a code is spent once accepted, and so is every code older than it.
func matchTOTP(secret, code string, now time.Time, lastStep uint64) (uint64, bool) {
	if !validTOTPCode(code) {
		return 0, false
	}
	current := totpStep(now)
	first := current - min(current, totpSkew)
	var matched uint64
	found := false
	for step := first; step <= current+totpSkew; step++ {
		if step <= lastStep {
			continue
		}
		want, err := hotp.GenerateCodeCustom(secret, step, hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 && !found {
			matched, found = step, true
		}
	}
	return matched, found
}

// msgInvalidPassword answers a wrong password where a session is already established (2FA enrolment).
const msgInvalidPassword = "invalid password"

// EnrollTOTP starts (or restarts) two-factor enrolment with a fresh RFC 6238 seed, once the password proves
// that the caller is the user and not only someone holding a copy of their access token (who could
// otherwise bind the account to their own authenticator). The check counts against the same per-account
// window as logins. The seed is sealed with the user id as associated data, so a ciphertext copied to
// another user's row does not open. 2FA stays off until VerifyTOTP proves the user's app produces the same
// codes.
func (s *Service) EnrollTOTP(ctx context.Context, p ports.Principal, password string) (ports.TOTPEnrollment, error) {
	if password == "" {
		return ports.TOTPEnrollment{}, ports.ValidationError(ports.FieldViolation{Path: "password", Message: "is required to start two-factor enrolment"})
	}
	user, err := s.sessionUser(ctx, p)
	if err != nil {
		return ports.TOTPEnrollment{}, err
	}
	if err := s.throttleAccount(ctx, user.Email); err != nil {
		return ports.TOTPEnrollment{}, err
	}
	if err := s.checkPassword(ctx, user, password, msgInvalidPassword); err != nil {
		return ports.TOTPEnrollment{}, err
	}
	if user.TOTPEnabled {
		return ports.TOTPEnrollment{}, ports.Errorf(ports.CodeFailedPrecondition, "two-factor authentication is already enabled")
	}
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer:      totpIssuer,
		AccountName: user.Email,
		Period:      totpPeriod,
		Digits:      otp.DigitsSix,
		Algorithm:   otp.AlgorithmSHA1,
	})
	if err != nil {
		return ports.TOTPEnrollment{}, fmt.Errorf("account: generate TOTP seed: %w", err)
	}
	if err := s.storeTOTP(ctx, user.ID, totpState{Secret: key.Secret()}, false); err != nil {
		return ports.TOTPEnrollment{}, err
	}
	return ports.TOTPEnrollment{Secret: key.Secret(), OTPAuthURL: key.URL()}, nil
}

// VerifyTOTP enables two-factor authentication when code matches the pending seed. The accepted step is
// recorded, so the same code cannot then be replayed at login.
func (s *Service) VerifyTOTP(ctx context.Context, p ports.Principal, code string) error {
	user, err := s.sessionUser(ctx, p)
	if err != nil {
		return err
	}
	if user.TOTPEnabled {
		return ports.Errorf(ports.CodeFailedPrecondition, "two-factor authentication is already enabled")
	}
	if len(user.TOTPSecret) == 0 {
		return ports.Errorf(ports.CodeFailedPrecondition, "two-factor enrolment has not been started")
	}
	step, err := s.matchUserTOTP(user, code)
	if ports.ErrorCode(err) == ports.CodeUnauthenticated {
		return ports.Errorf(ports.CodeInvalidArgument, msgInvalidTOTP)
	}
	if err != nil {
		return err
	}
	if err := s.claimTOTPStep(ctx, user.ID, step, msgInvalidTOTP); err != nil {
		if ports.ErrorCode(err) == ports.CodeUnauthenticated {
			return ports.Errorf(ports.CodeInvalidArgument, msgInvalidTOTP)
		}
		return err
	}
	return s.accounts.SetUserTOTP(ctx, user.ID, user.TOTPSecret, true)
}

// matchUserTOTP checks code against the user's seed and returns the step it matched, skipping every step up
// to the last one accepted. A mismatch is unauthenticated.
func (s *Service) matchUserTOTP(user ports.User, code string) (uint64, error) {
	state, err := s.openTOTP(user)
	if err != nil {
		return 0, err
	}
	last := state.LastStep
	if user.TOTPLastStep > 0 {
		last = max(last, uint64(user.TOTPLastStep))
	}
	step, ok := matchTOTP(state.Secret, code, s.clock.Now(), last)
	if !ok {
		return 0, ports.Unauthenticated(msgInvalidTOTP)
	}
	return step, nil
}

// claimTOTPStep spends step for the user; a step another request claimed first is unauthenticated with
// message, like a wrong code.
func (s *Service) claimTOTPStep(ctx context.Context, userID string, step uint64, message string) error {
	claimed, err := s.accounts.ClaimTOTPStep(ctx, userID, int64(step))
	if err != nil {
		return fmt.Errorf("account: claim TOTP step: %w", err)
	}
	if !claimed {
		return ports.Unauthenticated("%s", message)
	}
	return nil
}

// sessionUser loads the user behind a session principal; 2FA is a property of a person, not of an API key.
func (s *Service) sessionUser(ctx context.Context, p ports.Principal) (ports.User, error) {
	if p.Kind != ports.PrincipalSession || p.UserID == "" {
		return ports.User{}, ports.Unauthenticated("a session is required")
	}
	user, err := s.accounts.UserByID(ctx, p.UserID)
	if err != nil {
		return ports.User{}, fmt.Errorf("account: load user: %w", err)
	}
	return user, nil
}

func (s *Service) openTOTP(user ports.User) (totpState, error) {
	plain, err := s.keyring.Open(user.TOTPSecret, []byte(user.ID))
	if err != nil {
		return totpState{}, fmt.Errorf("account: open TOTP seed of user %s: %w", user.ID, err)
	}
	state, err := unmarshalTOTPState(plain)
	if err != nil {
		return totpState{}, fmt.Errorf("account: TOTP seed of user %s: %w", user.ID, err)
	}
	return state, nil
}

func (s *Service) storeTOTP(ctx context.Context, userID string, state totpState, enabled bool) error {
	sealed, err := s.keyring.Seal(state.marshal(), []byte(userID))
	if err != nil {
		return fmt.Errorf("account: seal TOTP seed: %w", err)
	}
	if err := s.accounts.SetUserTOTP(ctx, userID, sealed, enabled); err != nil {
		return fmt.Errorf("account: store TOTP seed: %w", err)
	}
	return nil
}
