package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/postmill/postmill/deploy/app"
)

// runRPCCredential is `postmill rpc-credential --tier=edge|mta|inbound`: it prints the credential a
// process of that tier presents to the core, derived from the primary POSTMILL_SECRET_KEY. Run it where
// the secret lives and hand the line to the tier's process as POSTMILL_RPC_CREDENTIAL, so that the tier
// runs without the secret, which decrypts every stored DKIM key, webhook secret and TOTP seed. The
// credential is a secret too: it is printed on standard output only, never logged.
func runRPCCredential(cfg app.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rpc-credential", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tier := fs.String("tier", "", "the tier the credential is for: edge, mta or inbound")
	if err := fs.Parse(args); err != nil || *tier == "" || fs.NArg() > 0 {
		return errors.New("usage: postmill rpc-credential --tier=edge|mta|inbound")
	}
	if len(cfg.SecretKeys) == 0 {
		return errors.New("rpc-credential derives from POSTMILL_SECRET_KEY: run it where the core's secret is set")
	}
	cred, err := app.TierCredential(cfg.SecretKeys, *tier)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, cred)
	return err
}
