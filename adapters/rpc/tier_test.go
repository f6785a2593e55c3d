package rpc_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/ports"
)

// tierCredentials are one credential per real tier, as a core derives them.
var tierCredentials = map[rpc.Tier]string{
	rpc.TierEdge:    rpc.Credential(rpc.TierEdge, []byte("edge tier secret key")),
	rpc.TierMTA:     rpc.Credential(rpc.TierMTA, []byte("mta tier secret key!")),
	rpc.TierInbound: rpc.Credential(rpc.TierInbound, []byte("inbound tier secret!")),
}

// tierCall is one call a tier might make, and whether that tier may make it.
type tierCall struct {
	name   string
	method string // what the implementation records when reached
	call   func(ctx context.Context, c ports.Core) error
}

var (
	callLoadOutbound = tierCall{"Delivery.LoadOutbound", "LoadOutbound", func(ctx context.Context, c ports.Core) error {
		_, err := c.Delivery.LoadOutbound(ctx, ports.DeliveryJob{MessageID: "m1"})
		return err
	}}
	callReportDelivery = tierCall{"Delivery.ReportDelivery", "ReportDelivery", func(ctx context.Context, c ports.Core) error {
		return c.Delivery.ReportDelivery(ctx, ports.DeliveryReport{Job: ports.DeliveryJob{MessageID: "m1"}})
	}}
	callLogin = tierCall{"Accounts.Login", "Login", func(ctx context.Context, c ports.Core) error {
		_, err := c.Accounts.Login(ctx, ports.LoginInput{Email: "a@example.com", Password: "pw"})
		return err
	}}
	callListOrganizations = tierCall{"Organizations.ListOrganizations", "ListOrganizations", func(ctx context.Context, c ports.Core) error {
		_, err := c.Organizations.ListOrganizations(ctx)
		return err
	}}
	callAccepts = tierCall{"Feedback.AcceptsRecipient", "AcceptsRecipient", func(ctx context.Context, c ports.Core) error {
		_, err := c.Feedback.AcceptsRecipient(ctx, "fbl@example.com")
		return err
	}}
	callRender = tierCall{"Renderer.RenderTemplate", "RenderTemplate", func(ctx context.Context, c ports.Core) error {
		_, err := c.Renderer.RenderTemplate(ctx, "org1", "t1", nil)
		return err
	}}
	callSend = tierCall{"Emails.Send", "Send", func(ctx context.Context, c ports.Core) error {
		_, err := c.Emails.Send(ctx, "org1", ports.SendRequest{})
		return err
	}}
	callPing = tierCall{"Health.Ping", "Ping", func(ctx context.Context, c ports.Core) error {
		return c.Health.Ping(ctx)
	}}
)

// TestTierAllowList: each tier's credential reaches what its tier needs and is refused, as
// PermissionDenied and before the implementation runs, everything else: the edge cannot load a message
// with its DKIM key or report deliveries, the MTA cannot log in or list organizations, the inbound tier
// can only ask about recipients and record feedback, and no tier renders templates remotely.
func TestTierAllowList(t *testing.T) {
	t.Parallel()
	allowed := map[rpc.Tier][]tierCall{
		rpc.TierEdge:    {callLogin, callListOrganizations, callSend, callPing},
		rpc.TierMTA:     {callLoadOutbound, callReportDelivery, callPing},
		rpc.TierInbound: {callAccepts, callPing},
	}
	refused := map[rpc.Tier][]tierCall{
		rpc.TierEdge:    {callLoadOutbound, callReportDelivery, callAccepts, callRender},
		rpc.TierMTA:     {callLogin, callListOrganizations, callSend, callAccepts, callRender},
		rpc.TierInbound: {callLogin, callListOrganizations, callSend, callLoadOutbound, callReportDelivery, callRender},
	}
	for _, tier := range rpc.Tiers() {
		if tier == rpc.TierAny {
			continue
		}
		t.Run(string(tier), func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			fake := &fakeCore{}
			creds := make([]string, 0, len(tierCredentials))
			for _, c := range tierCredentials {
				creds = append(creds, c)
			}
			srv := httptest.NewServer(rpc.NewHandler(fake.core(), rpc.ServerConfig{
				Credentials: creds,
				Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
			}))
			t.Cleanup(srv.Close)
			c := rpc.NewClient(srv.URL, tierCredentials[tier], nil).Core()
			for _, tc := range allowed[tier] {
				if err := tc.call(context.Background(), c); err != nil {
					t.Errorf("%s: %v, want allowed", tc.name, err)
				}
			}
			for _, tc := range refused[tier] {
				err := tc.call(context.Background(), c)
				if connect.CodeOf(err) != connect.CodePermissionDenied {
					t.Errorf("%s: %v, want permission denied", tc.name, err)
				}
				// A refused hop is the deployment's fault, never the end user's: internal, as any failure
				// of the hop.
				if ports.ErrorCode(err) != ports.CodeInternal {
					t.Errorf("%s: ports code %s, want internal", tc.name, ports.ErrorCode(err))
				}
			}
			reached := map[string]bool{}
			for _, call := range fake.recorded() {
				reached[call.method] = true
			}
			for _, tc := range refused[tier] {
				if reached[tc.method] {
					t.Errorf("%s reached the implementation", tc.name)
				}
			}
			for _, tc := range allowed[tier] {
				if !reached[tc.method] {
					t.Errorf("%s never reached the implementation", tc.name)
				}
			}
			// Each refusal is logged with the tier and the procedure, never with the credential.
			if !strings.Contains(logs.String(), "tier="+string(tier)) || !strings.Contains(logs.String(), "procedure=") {
				t.Errorf("refusals not logged:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), tierCredentials[tier]) {
				t.Error("a refusal logged the credential")
			}
		})
	}
}

// TestCredentialShape: a credential names its tier and carries at least 16 bytes of secret; anything
// else is refused, and the error never repeats the credential.
func TestCredentialShape(t *testing.T) {
	t.Parallel()
	cred := rpc.Credential(rpc.TierMTA, []byte("0123456789abcdef"))
	if !strings.HasPrefix(cred, "pmrpc_mta_") {
		t.Errorf("credential %q does not name its tier", cred)
	}
	if tier, err := rpc.CredentialTier(cred); err != nil || tier != rpc.TierMTA {
		t.Errorf("CredentialTier = %q, %v", tier, err)
	}
	const secret = "00112233445566778899aabbccddeeff"
	for _, bad := range []string{
		"",
		secret,
		"pmrpc_" + secret,
		"pmrpc_core_" + secret,
		"pmrpc_EDGE_" + secret,
		"pmrpc_edge_" + secret[:30],
		"pmrpc_edge_" + secret[:31] + "g",
		"Pmrpc_edge_" + secret,
	} {
		_, err := rpc.CredentialTier(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), secret[:30]) {
			t.Errorf("error %q repeats the credential", err)
		}
	}
	for in, want := range map[string]rpc.Tier{"edge": rpc.TierEdge, " MTA ": rpc.TierMTA, "inbound": rpc.TierInbound} {
		if got, err := rpc.ParseTier(in); err != nil || got != want {
			t.Errorf("ParseTier(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "core", "all", "analytics"} {
		if _, err := rpc.ParseTier(in); err == nil {
			t.Errorf("ParseTier(%q) accepted", in)
		}
	}
}

// TestForgedTierName: renaming the tier inside a genuine credential makes a credential the server does
// not know, so the tier in the clear grants nothing.
func TestForgedTierName(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{}
	srv := mustServe(t, fake.core(), tierCredentials[rpc.TierEdge])
	forged := strings.Replace(tierCredentials[rpc.TierEdge], "_edge_", "_mta_", 1)
	err := callLoadOutbound.call(context.Background(), rpc.NewClient(srv.URL, forged, nil).Core())
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("forged tier: %v, want unauthenticated", err)
	}
	if calls := fake.recorded(); len(calls) != 0 {
		t.Errorf("implementation reached: %+v", calls)
	}
}
