package account

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"

	"github.com/postmill/postmill/ports"
)

const msgInvalidSMTP = "invalid SMTP credentials"

// CreateSMTPCredential generates a pm_ username and a password of 24 random bytes, returned once. The password
// is stored as the hex SHA-256 of itself, not argon2id: it is 192 bits of server-generated randomness, so no
// dictionary or brute-force attack applies and a slow hash would only add cost to every SMTP AUTH (one per
// submission connection) without adding protection.
func (s *Service) CreateSMTPCredential(ctx context.Context, orgID string) (ports.CreatedSMTPCredential, error) {
	username, password := newSMTPCredential()
	cred := ports.SMTPCredential{
		ID:             newID(),
		OrganizationID: orgID,
		Username:       username,
		PasswordHash:   smtpPasswordHash(password),
		Host:           s.cfg.SubmissionHost,
		Port:           s.cfg.SubmissionPort,
		CreatedAt:      s.now(),
	}
	if err := s.smtp.InsertSMTPCredential(ctx, cred); err != nil {
		return ports.CreatedSMTPCredential{}, fmt.Errorf("account: insert SMTP credential: %w", err)
	}
	cred.PasswordHash = ""
	return ports.CreatedSMTPCredential{SMTPCredential: cred, Password: password}, nil
}

// ListSMTPCredentials returns the organization's credentials, newest first, with today's submission host and
// port (they are configuration, not data) and without password hashes.
func (s *Service) ListSMTPCredentials(ctx context.Context, orgID string) ([]ports.SMTPCredential, error) {
	creds, err := s.smtp.ListSMTPCredentials(ctx, orgID)
	if err != nil {
		return nil, fmt.Errorf("account: list SMTP credentials: %w", err)
	}
	for i := range creds {
		creds[i].PasswordHash = ""
		creds[i].Host = s.cfg.SubmissionHost
		creds[i].Port = s.cfg.SubmissionPort
	}
	return creds, nil
}

// DeleteSMTPCredential removes a credential; the next AUTH with it fails.
func (s *Service) DeleteSMTPCredential(ctx context.Context, orgID, id string) error {
	if err := s.smtp.DeleteSMTPCredential(ctx, orgID, id); err != nil {
		return fmt.Errorf("account: delete SMTP credential: %w", err)
	}
	return nil
}

// AuthenticateSMTP checks an SMTP AUTH (RFC 4954) username and password for the submission server and returns
// a principal of kind ports.PrincipalSMTP for the credential's organization. The hashes are compared in constant
// time. Errors: unauthenticated.
func (s *Service) AuthenticateSMTP(ctx context.Context, username, password string) (ports.Principal, error) {
	if !validSMTPUsername(username) {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidSMTP)
	}
	cred, err := s.smtp.SMTPCredentialByUsername(ctx, username)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidSMTP)
	}
	if err != nil {
		return ports.Principal{}, fmt.Errorf("account: look up SMTP credential: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(smtpPasswordHash(password)), []byte(cred.PasswordHash)) != 1 {
		return ports.Principal{}, ports.Unauthenticated(msgInvalidSMTP)
	}
	return ports.Principal{
		Kind:           ports.PrincipalSMTP,
		OrganizationID: cred.OrganizationID,
		Scopes:         []string{ports.ScopeEmailsSend},
		ScopesEnforced: true,
	}, nil
}

func smtpPasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}
