package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// boundStore answers InsertEndpointWithin as an organization holding `held` endpoints would, and the list
// with one endpoint carrying a sealed secret; it records what it was asked.
type boundStore struct {
	ports.WebhookStore
	held    int
	gotMax  int
	gotList ports.PageQuery
}

func (s *boundStore) InsertEndpointWithin(_ context.Context, _ ports.WebhookEndpoint, max int) (bool, error) {
	s.gotMax = max
	if max > 0 && s.held >= max {
		return false, nil
	}
	s.held++
	return true, nil
}

func (s *boundStore) ListEndpoints(_ context.Context, _ string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	s.gotList = q
	return ports.Page[ports.WebhookEndpoint]{Data: []ports.WebhookEndpoint{{ID: "e1", Secret: []byte("sealed")}}, NextCursor: "n"}, nil
}

type noSender struct{ ports.WebhookSender }

func newBoundService(tb testing.TB, cfg Config, store *boundStore) *Service {
	tb.Helper()
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := New(cfg, Deps{Store: store, Sender: noSender{}, Keyring: kr})
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// TestCreateEndpointPastTheBound: the store is asked with the configured bound (default 20), and an
// organization at it gets the 403 that names the limit and the setting that raises it.
func TestCreateEndpointPastTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &boundStore{held: 19}
	svc := newBoundService(t, Config{}, store)
	types := []string{ports.EventEmailDelivered}
	if _, err := svc.CreateEndpoint(ctx, "org1", "https://hooks.example.com/a", types); err != nil || store.gotMax != 20 {
		t.Fatalf("20th endpoint: %v (max %d)", err, store.gotMax)
	}
	_, err := svc.CreateEndpoint(ctx, "org1", "https://hooks.example.com/b", types)
	e, ok := ports.AsError(err)
	if !ok || e.Code != ports.CodePermissionDenied || e.Reason != ports.ReasonResourceLimit ||
		e.Fields["limit"] != 20 || e.Fields["resource"] != ports.ResourceWebhooks {
		t.Fatalf("21st endpoint: %#v", err)
	}
	if !strings.Contains(e.Message, "20 webhook endpoints") || !strings.Contains(e.Message, MaxEndpointsSetting) {
		t.Errorf("message %q", e.Message)
	}
	// An invalid endpoint is a 400 whatever the count.
	if _, err := svc.CreateEndpoint(ctx, "org1", "ftp://x", types); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Errorf("invalid URL at the bound: %v", err)
	}

	small := &boundStore{held: 1}
	if _, err := newBoundService(t, Config{MaxEndpoints: 1}, small).CreateEndpoint(ctx, "org1", "https://hooks.example.com/a", types); ports.ErrorCode(err) != ports.CodePermissionDenied || small.gotMax != 1 {
		t.Fatalf("configured bound 1: %v (max %d)", err, small.gotMax)
	}
	if (Config{MaxEndpoints: -1}).Validate() == nil {
		t.Error("a negative bound was accepted")
	}
}

func TestListEndpointsPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &boundStore{}
	svc := newBoundService(t, Config{}, store)
	list, err := svc.ListEndpoints(ctx, "org1")
	if err != nil || len(list) != 1 || list[0].Secret != nil || store.gotList != ports.Unpaged() {
		t.Fatalf("ListEndpoints = %+v (%v), store asked %+v", list, err, store.gotList)
	}
	page, err := svc.ListEndpointsPage(ctx, "org1", ports.PageQuery{Limit: 100, Cursor: "c"})
	if err != nil || page.NextCursor != "n" || page.Data[0].Secret != nil || store.gotList != (ports.PageQuery{Limit: 100, Cursor: "c"}) {
		t.Fatalf("ListEndpointsPage = %+v (%v), store asked %+v", page, err, store.gotList)
	}
	if _, err := svc.ListEndpointsPage(ctx, "org1", ports.PageQuery{Limit: 101}); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("limit 101: %v", err)
	}
}
