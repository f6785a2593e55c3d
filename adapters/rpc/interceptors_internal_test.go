package rpc

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
)

// TestServerAuthEmptyToken checks the rule HTTP cannot reach: net/http trims "Bearer " to "Bearer"
// before a handler sees it, so only a direct check shows that an empty configured token admits even an
// empty credential.
func TestServerAuthEmptyToken(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Authorization", "Bearer ")
	if err := newServerAuth("").check(h); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("empty token, empty credential: err = %v, want unauthenticated", err)
	}
	h.Set("Authorization", "Bearer t")
	if err := newServerAuth("t").check(h); err != nil {
		t.Errorf("matching token: %v", err)
	}
}
