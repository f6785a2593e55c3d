package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/postmill/postmill/deploy/app"
)

// TestRPCCredentialCommand: the command prints, for the tier asked, the credential derived from the
// primary secret, which is the one the core admits; it refuses to run without the secret or a known tier.
func TestRPCCredentialCommand(t *testing.T) {
	t.Parallel()
	cfg := app.Config{SecretKeys: [][]byte{newMaster, oldMaster}}
	printed := map[string]string{}
	for _, tier := range []string{"edge", "mta", "inbound"} {
		var out bytes.Buffer
		if err := runRPCCredential(cfg, []string{"--tier=" + tier}, &out); err != nil {
			t.Fatalf("%s: %v", tier, err)
		}
		want, err := app.TierCredential([][]byte{newMaster}, tier)
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != want+"\n" {
			t.Errorf("%s: printed %q, want the primary's credential", tier, out.String())
		}
		printed[out.String()] = tier
	}
	if len(printed) != 3 {
		t.Error("two tiers got the same credential")
	}
	for _, c := range []struct {
		cfg  app.Config
		args []string
		want string
	}{
		{cfg, nil, "usage"},
		{cfg, []string{"--tier=core"}, "unknown tier"},
		{cfg, []string{"--tier=edge", "extra"}, "usage"},
		{cfg, []string{"--bogus"}, "usage"},
		{app.Config{}, []string{"--tier=edge"}, "POSTMILL_SECRET_KEY"},
	} {
		var out bytes.Buffer
		err := runRPCCredential(c.cfg, c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) || out.Len() != 0 {
			t.Errorf("%v: err %v, printed %q; want an error saying %q and nothing printed", c.args, err, out.String(), c.want)
		}
	}
}
