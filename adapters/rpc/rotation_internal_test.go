package rpc

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
)

// TestServerAuthOlderCredentials: during a key rotation a server admits the credentials derived from its
// primary master and those of the older masters on its keyring, and nothing else.
func TestServerAuthOlderCredentials(t *testing.T) {
	t.Parallel()
	newCred := Credential(TierEdge, []byte("new master's edge key"))
	oldCred := Credential(TierEdge, []byte("old master's edge key"))
	otherCred := Credential(TierEdge, []byte("another master's key"))
	a := newServerAuth(slog.New(slog.DiscardHandler), newCred, oldCred, "")
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + newCred, true},
		{"Bearer " + oldCred, true},
		{"Bearer " + otherCred, false},
		{"Bearer ", false},
		{"Basic " + oldCred, false},
	} {
		h := http.Header{}
		h.Set("Authorization", c.header)
		err := a.check(context.Background(), h, healthv1connect.HealthServiceCheckProcedure)
		if c.ok && err != nil {
			t.Errorf("%q refused: %v", c.header, err)
		}
		if !c.ok && connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%q: err = %v, want unauthenticated", c.header, err)
		}
	}
}
