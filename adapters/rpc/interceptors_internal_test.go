package rpc

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
)

// TestServerAuthEmptyCredential checks the rule HTTP cannot reach: net/http trims "Bearer " to "Bearer"
// before a handler sees it, so only a direct check shows that an empty configured credential admits even
// an empty one presented.
func TestServerAuthEmptyCredential(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	h := http.Header{}
	h.Set("Authorization", "Bearer ")
	if err := newServerAuth(log, "").check(context.Background(), h, healthv1connect.HealthServiceCheckProcedure); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("empty credential configured and presented: err = %v, want unauthenticated", err)
	}
	cred := Credential(TierEdge, []byte("0123456789abcdef"))
	h.Set("Authorization", "Bearer "+cred)
	if err := newServerAuth(log, cred).check(context.Background(), h, healthv1connect.HealthServiceCheckProcedure); err != nil {
		t.Errorf("matching credential: %v", err)
	}
}
