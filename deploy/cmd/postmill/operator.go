package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/core/account"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

// The operator's commands run against the database of POSTMILL_DATABASE_URL directly, like `postmill
// migrate`, and exit. They need no running Postmill and change nothing a running one caches: admin status
// is read from the user row on every request, and sealed values are opened when used.

// operatorTimeout bounds one operator command; re-encryption walks every sealed row, so it gets longer.
const (
	adminTimeout     = time.Minute
	reencryptTimeout = time.Hour
)

// runAdmin is `postmill admin grant|revoke EMAIL`: POSTMILL_ADMIN_EMAILS only bootstraps the first admin at
// sign-up, so every later change of who is a platform admin goes through here.
func runAdmin(cfg app.Config, args []string, out io.Writer) error {
	if len(args) != 2 || (args[0] != "grant" && args[0] != "revoke") {
		return errors.New("usage: postmill admin grant|revoke EMAIL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	return setAdmin(ctx, st.Accounts, args[0] == "grant", args[1], out)
}

func setAdmin(ctx context.Context, accounts ports.AccountStore, grant bool, email string, out io.Writer) error {
	if err := account.SetAdmin(ctx, accounts, email, grant); err != nil {
		return err
	}
	verb := "granted to"
	if !grant {
		verb = "withdrawn from"
	}
	_, err := fmt.Fprintf(out, "platform admin %s %s\n", verb, strings.ToLower(strings.TrimSpace(email)))
	return err
}

// runSecrets is `postmill secrets reencrypt [--batch=N]`: after POSTMILL_SECRET_KEY gained a new primary
// (new,old), it seals every stored secret under the primary, so that the old key can then be removed.
func runSecrets(cfg app.Config, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "reencrypt" {
		return errors.New("usage: postmill secrets reencrypt [--batch=N]")
	}
	fs := flag.NewFlagSet("secrets reencrypt", flag.ContinueOnError)
	batch := fs.Int("batch", secret.DefaultReencryptBatch, "rows read and rewritten per round trip")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *batch < 1 {
		return errors.New("--batch must be at least 1")
	}
	keyring, err := secret.NewKeyring(cfg.SecretKeys...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), reencryptTimeout)
	defer cancel()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	return reencrypt(ctx, keyring, st.Secrets, *batch, out)
}

// reencrypt runs secret.Reencrypt and prints one line per sealed column. Values that open under no key
// on the keyring make it fail after the report, so the operator does not remove a key still needed.
func reencrypt(ctx context.Context, keyring *secret.Keyring, store ports.SealedStore, batch int, out io.Writer) error {
	counts, err := secret.Reencrypt(ctx, keyring, store, batch)
	failed := 0
	for _, c := range counts {
		line := fmt.Sprintf("%-26s resealed=%d current=%d changed=%d failed=%d", c.Column, c.Resealed, c.Current, c.Changed, c.Failed)
		if len(c.FailedIDs) > 0 {
			line += " failed_ids=" + strings.Join(c.FailedIDs, ",")
		}
		if _, werr := fmt.Fprintln(out, line); werr != nil && err == nil {
			err = werr
		}
		failed += c.Failed
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d sealed values open under no key in POSTMILL_SECRET_KEY; keep the old keys until they are resolved", failed)
	}
	return nil
}

// openStore opens POSTMILL_DATABASE_URL without migrating it: operator commands work on the schema the
// running version migrated.
func openStore(ctx context.Context, cfg app.Config) (*postgres.Store, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("POSTMILL_DATABASE_URL is required")
	}
	return postgres.Open(ctx, cfg.DatabaseURL)
}
