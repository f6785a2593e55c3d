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

// totpState is what the user row's encrypted TOTP column holds: the base32 seed and the last time step whose
// code was accepted. Keeping the step next to the seed lets the core refuse a replayed code (RFC 6238 §5.2:
// "the verifier MUST NOT accept the second attempt of the OTP after the successful validation") without a
// column of its own.
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

// EnrollTOTP starts (or restarts) two-factor enrolment with a fresh RFC 6238 seed. The seed is sealed with the
// user id as associated data, so a ciphertext copied to another user's row does not open. 2FA stays off until
// VerifyTOTP proves the user's app produces the same codes.
func (s *Service) EnrollTOTP(ctx context.Context, p ports.Principal) (ports.TOTPEnrollment, error) {
	user, err := s.sessionUser(ctx, p)
	if err != nil {
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
	state, err := s.openTOTP(user)
	if err != nil {
		return err
	}
	step, ok := matchTOTP(state.Secret, code, s.clock.Now(), state.LastStep)
	if !ok {
		return ports.Errorf(ports.CodeInvalidArgument, "invalid two-factor code")
	}
	state.LastStep = step
	return s.storeTOTP(ctx, user.ID, state, true)
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
