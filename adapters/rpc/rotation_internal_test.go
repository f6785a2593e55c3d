package rpc

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
)

// TestServerAuthOlderTokens: during a key rotation a server admits the token of its primary master and
// those of the older masters on its keyring, and nothing else.
func TestServerAuthOlderTokens(t *testing.T) {
	t.Parallel()
	a := newServerAuth("new-token", "old-token", "")
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer new-token", true},
		{"Bearer old-token", true},
		{"Bearer other-token", false},
		{"Bearer ", false},
		{"Basic old-token", false},
	} {
		h := http.Header{}
		h.Set("Authorization", c.header)
		err := a.check(h)
		if c.ok && err != nil {
			t.Errorf("%q refused: %v", c.header, err)
		}
		if !c.ok && connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%q: err = %v, want unauthenticated", c.header, err)
		}
	}
	// Older tokens never open a server whose own token is unset.
	h := http.Header{}
	h.Set("Authorization", "Bearer old-token")
	if err := newServerAuth("", "old-token").check(h); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("unconfigured server admitted an older token: %v", err)
	}
}
