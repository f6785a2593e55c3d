package postgres

import (
	"context"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.SMTPCredentialStore = (*SMTPCredentials)(nil)

// SMTPCredentials is the PostgreSQL store of SMTP submission credentials (ports.SMTPCredentialStore). Safe
// for concurrent use.
type SMTPCredentials struct{ shared }

// InsertSMTPCredential implements ports.SMTPCredentialStore. Usernames are unique across organizations
// (smtp_credentials_username_key) because SMTP AUTH presents nothing else.
func (s *SMTPCredentials) InsertSMTPCredential(ctx context.Context, c ports.SMTPCredential) error {
	err := s.queries.InsertSMTPCredential(ctx, db.InsertSMTPCredentialParams{
		OrganizationID: c.OrganizationID,
		ID:             c.ID,
		Username:       c.Username,
		PasswordHash:   c.PasswordHash,
		Host:           c.Host,
		Port:           int32(c.Port),
		CreatedAt:      c.CreatedAt,
	})
	return interpretError(err)
}

// ListSMTPCredentials implements ports.SMTPCredentialStore: newest first.
func (s *SMTPCredentials) ListSMTPCredentials(ctx context.Context, orgID string) ([]ports.SMTPCredential, error) {
	rows, err := s.queries.ListSMTPCredentials(ctx, orgID)
	if err := listError(err); err != nil {
		return nil, err
	}
	out := make([]ports.SMTPCredential, 0, len(rows))
	for _, r := range rows {
		out = append(out, smtpCredentialFromRow(r))
	}
	return out, nil
}

// DeleteSMTPCredential implements ports.SMTPCredentialStore; another organization's credential is
// not_found, exactly like a missing one, so ids of other tenants cannot be probed.
func (s *SMTPCredentials) DeleteSMTPCredential(ctx context.Context, orgID, id string) error {
	n, err := s.queries.DeleteSMTPCredential(ctx, db.DeleteSMTPCredentialParams{OrganizationID: orgID, ID: id})
	if err != nil {
		return interpretErrorFor("SMTP credential", err)
	}
	if n == 0 {
		return ports.NotFound("SMTP credential not found")
	}
	return nil
}

// SMTPCredentialByUsername implements ports.SMTPCredentialStore. It is not scoped by organization: the
// credential found is what tells the submission server the organization.
func (s *SMTPCredentials) SMTPCredentialByUsername(ctx context.Context, username string) (ports.SMTPCredential, error) {
	row, err := s.queries.SMTPCredentialByUsername(ctx, username)
	if err != nil {
		return ports.SMTPCredential{}, interpretErrorFor("SMTP credential", err)
	}
	return smtpCredentialFromRow(row), nil
}

func smtpCredentialFromRow(r db.SmtpCredential) ports.SMTPCredential {
	return ports.SMTPCredential{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Username:       r.Username,
		PasswordHash:   r.PasswordHash,
		Host:           r.Host,
		Port:           int(r.Port),
		CreatedAt:      r.CreatedAt.UTC(),
	}
}
