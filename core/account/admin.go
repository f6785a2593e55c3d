package account

import (
	"context"
	"fmt"

	"github.com/postmill/postmill/ports"
)

// SetAdmin grants (admin true) or withdraws platform admin on the existing account with this email. It is
// the operator's `postmill admin grant|revoke EMAIL`, run against the database directly: POSTMILL_ADMIN_EMAILS
// only bootstraps the first admin at sign-up, so every later change goes through here. Errors:
// invalid_argument for an email that is not an address, not_found when no account has it.
func SetAdmin(ctx context.Context, accounts ports.AccountStore, email string, admin bool) error {
	normalised, ok := normaliseEmail(email)
	if !ok {
		return ports.Errorf(ports.CodeInvalidArgument, "%q is not a valid email address", email)
	}
	if err := accounts.SetUserAdmin(ctx, normalised, admin); err != nil {
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return ports.NotFound("no account has the email %s", normalised)
		}
		return fmt.Errorf("account: set admin: %w", err)
	}
	return nil
}
