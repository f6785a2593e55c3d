package rpc_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/postmill/postmill/adapters/rpc"
	healthv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
	"github.com/postmill/postmill/ports"
)

// testToken is the credential of the tests' own tier, which may call every procedure (export_test.go), so
// that one client reaches every method; tier_test.go checks the real tiers' allow-lists.
var testToken = rpc.Credential(rpc.TierAny, []byte("inter-tier-token-secret"))

func TestMain(m *testing.M) {
	// Deployments install a W3C propagator at start; without one the hop would carry no trace context.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	os.Exit(m.Run())
}

type testBundle struct {
	fake   *fakeCore
	client *rpc.Client
	server *httptest.Server
}

// setup serves fake's core (a fresh fake when nil) over loopback HTTP and returns a client of it.
func setup(tb testing.TB, fake *fakeCore) *testBundle {
	tb.Helper()
	if fake == nil {
		fake = &fakeCore{}
	}
	srv := mustServe(tb, fake.core(), testToken)
	return &testBundle{fake: fake, client: rpc.NewClient(srv.URL, testToken, nil), server: srv}
}

func mustServe(tb testing.TB, core ports.Core, token string) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(rpc.NewHandler(core, rpc.ServerConfig{
		Credentials: []string{token},
		Logger:      slog.New(slog.DiscardHandler),
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// wireCode calls HealthService/Check directly, presenting authorization as given, and returns the
// Connect code the server answered with (0 on success).
func wireCode(tb testing.TB, srv *httptest.Server, authorization string) connect.Code {
	tb.Helper()
	hc := healthv1connect.NewHealthServiceClient(srv.Client(), srv.URL)
	req := connect.NewRequest(&healthv1.CheckRequest{})
	if authorization != "" {
		req.Header().Set("Authorization", authorization)
	}
	_, err := hc.Check(context.Background(), req)
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}

var (
	t0 = time.Date(2026, 11, 21, 9, 36, 12, 123456789, time.UTC)
	t1 = time.Date(2026, 11, 22, 10, 0, 0, 1, time.UTC)
	t2 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
)

func ptr[T any](v T) *T { return &v }

// The stored side of a key or credential, as the core holds it: the hashes must not reach the client.
var (
	storedKey = ports.APIKey{
		ID: "k1", OrganizationID: "org1", Name: "prod", Prefix: "0123456789abcdef",
		TokenHash: []byte("sha256-of-token"), Scopes: []string{"emails:send", "emails:read"}, ScopesEnforced: true,
		LastUsedAt: nil, RevokedAt: ptr(t1), CreatedAt: t0,
	}
	storedCred = ports.SMTPCredential{
		ID: "c1", OrganizationID: "org1", Username: "pm_abc", PasswordHash: "$argon2id$v=19$...",
		Host: "smtp.postmill.local", Port: 1587, CreatedAt: t0,
	}
)

func withoutHashes(k ports.APIKey) ports.APIKey {
	k.TokenHash = nil
	return k
}

func withoutPasswordHash(c ports.SMTPCredential) ports.SMTPCredential {
	c.PasswordHash = ""
	return c
}

type roundTrip struct {
	name   string
	answer func(f *fakeCore)
	call   func(ctx context.Context, c ports.Core) (any, error)
	want   any    // what the client returns
	method string // what the implementation is called with
	args   []any
}

func roundTrips() []roundTrip {
	sessionPrincipal := ports.Principal{Kind: ports.PrincipalSession, OrganizationID: "org1", UserID: "u1", IsAdmin: true, TwoFactor: true}
	keyPrincipal := ports.Principal{
		Kind: ports.PrincipalAPIKey, OrganizationID: "org1", APIKeyID: "k1",
		Scopes: []string{"emails:send", "*"}, ScopesEnforced: true,
	}
	emptyScopesPrincipal := ports.Principal{Kind: ports.PrincipalAPIKey, OrganizationID: "org2", APIKeyID: "k2", Scopes: []string{}}
	usedKey := ports.APIKey{
		ID: "k2", OrganizationID: "org1", Name: "", Prefix: "fedcba9876543210",
		Scopes: []string{}, LastUsedAt: ptr(t1), RevokedAt: nil, CreatedAt: t1,
	}
	bareKey := ports.APIKey{ID: "k3"} // nil scopes, every time unset
	org := ports.Organization{
		ID: "org1", Name: "Analytical Engines", Slug: "analytical-engines", CreatedAt: t0,
		Paused: true, Plan: ports.Plan{MonthlyLimit: 3000, WarmupCap: 150},
	}
	otherOrg := ports.Organization{ID: "org2", Name: "b", Slug: "b", CreatedAt: t1}

	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }

	add(roundTrip{
		name: "Signup",
		answer: func(f *fakeCore) {
			f.signup = ports.SignupResult{UserID: "u1", OrganizationID: "org1", Tokens: ports.TokenPair{AccessToken: "at", RefreshToken: "rt"}}
		},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Accounts.Signup(ctx, ports.SignupInput{Email: "ada@example.com", Password: "correct horse", OrganizationName: "Analytical"})
		},
		want:   ports.SignupResult{UserID: "u1", OrganizationID: "org1", Tokens: ports.TokenPair{AccessToken: "at", RefreshToken: "rt"}},
		method: "Signup",
		args:   []any{ports.SignupInput{Email: "ada@example.com", Password: "correct horse", OrganizationName: "Analytical"}},
	})
	add(roundTrip{
		name:   "Signup/zero values",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Accounts.Signup(ctx, ports.SignupInput{})
		},
		want:   ports.SignupResult{},
		method: "Signup",
		args:   []any{ports.SignupInput{}},
	})
	add(roundTrip{
		name:   "Login",
		answer: func(f *fakeCore) { f.tokens = ports.TokenPair{AccessToken: "at2", RefreshToken: "rt2"} },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Accounts.Login(ctx, ports.LoginInput{Email: "ada@example.com", Password: "pw", TOTP: "123456", OrgID: "org9"})
		},
		want:   ports.TokenPair{AccessToken: "at2", RefreshToken: "rt2"},
		method: "Login",
		args:   []any{ports.LoginInput{Email: "ada@example.com", Password: "pw", TOTP: "123456", OrgID: "org9"}},
	})
	add(roundTrip{
		name:   "Refresh",
		answer: func(f *fakeCore) { f.tokens = ports.TokenPair{AccessToken: "at3", RefreshToken: "rt3"} },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Accounts.Refresh(ctx, "rt2")
		},
		want:   ports.TokenPair{AccessToken: "at3", RefreshToken: "rt3"},
		method: "Refresh",
		args:   []any{"rt2"},
	})
	add(roundTrip{
		name: "EnrollTOTP",
		answer: func(f *fakeCore) {
			f.enrollment = ports.TOTPEnrollment{Secret: "JBSWY3DPEHPK3PXP", OTPAuthURL: "otpauth://totp/x"}
		},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Accounts.EnrollTOTP(ctx, sessionPrincipal, "correct horse")
		},
		want:   ports.TOTPEnrollment{Secret: "JBSWY3DPEHPK3PXP", OTPAuthURL: "otpauth://totp/x"},
		method: "EnrollTOTP",
		args:   []any{sessionPrincipal, "correct horse"},
	})
	add(roundTrip{
		name:   "Logout",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Accounts.Logout(ctx, "rt3")
		},
		want:   nil,
		method: "Logout",
		args:   []any{"rt3"},
	})
	add(roundTrip{
		name:   "VerifyTOTP",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Accounts.VerifyTOTP(ctx, keyPrincipal, "654321")
		},
		want:   nil,
		method: "VerifyTOTP",
		args:   []any{keyPrincipal, "654321"},
	})
	add(roundTrip{
		name:   "VerifyTOTP/empty scopes",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Accounts.VerifyTOTP(ctx, emptyScopesPrincipal, "")
		},
		want:   nil,
		method: "VerifyTOTP",
		args:   []any{emptyScopesPrincipal, ""},
	})
	for _, p := range []ports.Principal{keyPrincipal, emptyScopesPrincipal, {}} {
		add(roundTrip{
			name:   fmt.Sprintf("AuthenticateAPIKey/%+v", p),
			answer: func(f *fakeCore) { f.principal = p },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Auth.AuthenticateAPIKey(ctx, "svc_live_abc")
			},
			want:   p,
			method: "AuthenticateAPIKey",
			args:   []any{"svc_live_abc"},
		})
	}
	add(roundTrip{
		name:   "AuthenticateSession",
		answer: func(f *fakeCore) { f.principal = sessionPrincipal },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Auth.AuthenticateSession(ctx, "eyJhbGciOi")
		},
		want:   sessionPrincipal,
		method: "AuthenticateSession",
		args:   []any{"eyJhbGciOi"},
	})
	for name, keys := range map[string][]ports.APIKey{
		"set":   {storedKey, usedKey, bareKey},
		"empty": {},
		"nil":   nil,
	} {
		want := []ports.APIKey(nil)
		if keys != nil {
			want = []ports.APIKey{}
			for _, k := range keys {
				want = append(want, withoutHashes(k))
			}
		}
		add(roundTrip{
			name:   "ListAPIKeys/" + name,
			answer: func(f *fakeCore) { f.apiKeys = keys },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.APIKeys.ListAPIKeys(ctx, "org1")
			},
			want:   want,
			method: "ListAPIKeys",
			args:   []any{"org1"},
		})
	}
	for name, scopes := range map[string][]string{
		"default scopes": nil,
		"no scopes":      {},
		"scopes":         {"emails:send", "billing:read"},
	} {
		add(roundTrip{
			name: "CreateAPIKey/" + name,
			answer: func(f *fakeCore) {
				f.createdKey = ports.CreatedAPIKey{APIKey: storedKey, Token: "svc_live_0123456789abcdef_secret"}
			},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.APIKeys.CreateAPIKey(ctx, "org1", "prod", scopes)
			},
			want:   ports.CreatedAPIKey{APIKey: withoutHashes(storedKey), Token: "svc_live_0123456789abcdef_secret"},
			method: "CreateAPIKey",
			args:   []any{"org1", "prod", scopes},
		})
	}
	add(roundTrip{
		name:   "RevokeAPIKey",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.APIKeys.RevokeAPIKey(ctx, "org1", "k1")
		},
		want:   nil,
		method: "RevokeAPIKey",
		args:   []any{"org1", "k1"},
	})
	add(roundTrip{
		name: "CreateSMTPCredential",
		answer: func(f *fakeCore) {
			f.createdCred = ports.CreatedSMTPCredential{SMTPCredential: storedCred, Password: "plain-once"}
		},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.SMTPCredentials.CreateSMTPCredential(ctx, "org1")
		},
		want:   ports.CreatedSMTPCredential{SMTPCredential: withoutPasswordHash(storedCred), Password: "plain-once"},
		method: "CreateSMTPCredential",
		args:   []any{"org1"},
	})
	for name, creds := range map[string][]ports.SMTPCredential{
		"set":   {storedCred, {ID: "c2"}},
		"empty": {},
		"nil":   nil,
	} {
		want := []ports.SMTPCredential(nil)
		if creds != nil {
			want = []ports.SMTPCredential{}
			for _, c := range creds {
				want = append(want, withoutPasswordHash(c))
			}
		}
		add(roundTrip{
			name:   "ListSMTPCredentials/" + name,
			answer: func(f *fakeCore) { f.creds = creds },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.SMTPCredentials.ListSMTPCredentials(ctx, "org1")
			},
			want:   want,
			method: "ListSMTPCredentials",
			args:   []any{"org1"},
		})
	}
	add(roundTrip{
		name:   "DeleteSMTPCredential",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.SMTPCredentials.DeleteSMTPCredential(ctx, "org1", "c1")
		},
		want:   nil,
		method: "DeleteSMTPCredential",
		args:   []any{"org1", "c1"},
	})
	add(roundTrip{
		name:   "GetOrganization",
		answer: func(f *fakeCore) { f.org = org },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Organizations.GetOrganization(ctx, "org1")
		},
		want:   org,
		method: "GetOrganization",
		args:   []any{"org1"},
	})
	for name, orgs := range map[string][]ports.Organization{
		"set":   {org, otherOrg, {}},
		"empty": {},
		"nil":   nil,
	} {
		add(roundTrip{
			name:   "ListOrganizations/" + name,
			answer: func(f *fakeCore) { f.orgs = orgs },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Organizations.ListOrganizations(ctx)
			},
			want:   orgs,
			method: "ListOrganizations",
			args:   nil,
		})
	}
	for _, paused := range []bool{true, false} {
		add(roundTrip{
			name:   fmt.Sprintf("SetPaused/%v", paused),
			answer: func(f *fakeCore) { f.org = otherOrg },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Organizations.SetPaused(ctx, "org2", paused)
			},
			want:   otherOrg,
			method: "SetPaused",
			args:   []any{"org2", paused},
		})
	}
	add(roundTrip{
		name:   "SetPlan",
		answer: func(f *fakeCore) { f.org = org },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Organizations.SetPlan(ctx, "org1", ports.Plan{MonthlyLimit: 1 << 40, WarmupCap: 7})
		},
		want:   org,
		method: "SetPlan",
		args:   []any{"org1", ports.Plan{MonthlyLimit: 1 << 40, WarmupCap: 7}},
	})
	sub := ports.Subscription{OrganizationID: "org1", Plan: ports.Plan{MonthlyLimit: 3000}, PeriodStart: t0, PeriodEnd: t2, EmailsSent: 2999}
	add(roundTrip{
		name:   "Subscription",
		answer: func(f *fakeCore) { f.sub = sub },
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Organizations.Subscription(ctx, "org1")
		},
		want:   sub,
		method: "Subscription",
		args:   []any{"org1"},
	})
	for name, d := range map[string]ports.RateDecision{
		"allowed": {Allowed: true, Count: 1, Limit: 10},
		"denied":  {Allowed: false, Count: 11, Limit: 10, RetryAfter: 1500*time.Millisecond + 7},
	} {
		add(roundTrip{
			name:   "Allow/" + name,
			answer: func(f *fakeCore) { f.decision = d },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.RateLimiter.Allow(ctx, "ip:127.0.0.1", 10, time.Second)
			},
			want:   d,
			method: "Allow",
			args:   []any{"ip:127.0.0.1", 10, time.Second},
		})
	}
	add(roundTrip{
		name:   "Ping",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Health.Ping(ctx)
		},
		want:   nil,
		method: "Ping",
		args:   nil,
	})
	trips = append(trips, sendingRoundTrips()...)
	trips = append(trips, webhookRoundTrips()...)
	trips = append(trips, templateRoundTrips()...)
	trips = append(trips, deliverabilityRoundTrips()...)
	trips = append(trips, inboundRoundTrips()...)
	trips = append(trips, marketingRoundTrips()...)
	trips = append(trips, broadcastRoundTrips()...)
	trips = append(trips, billingRoundTrips()...)
	trips = append(trips, reputationRoundTrips()...)
	trips = append(trips, dmarcRoundTrips()...)
	trips = append(trips, analyticsRoundTrips()...)
	return append(trips, trackingRoundTrips()...)
}

// TestRoundTrip calls every method over loopback HTTP and checks that the implementation receives
// exactly what the caller passed and the caller receives exactly what the implementation returned,
// nil and empty slices and unset times included, minus the hashes that must stay in the core.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range roundTrips() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			tc.answer(b.fake)
			got, err := tc.call(context.Background(), b.client.Core())
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result:\n got %#v\nwant %#v", got, tc.want)
			}
			calls := b.fake.recorded()
			if len(calls) != 1 || calls[0].method != tc.method {
				t.Fatalf("implementation calls = %+v, want one %s", calls, tc.method)
			}
			if !reflect.DeepEqual(calls[0].args, tc.args) {
				t.Errorf("implementation args:\n got %#v\nwant %#v", calls[0].args, tc.args)
			}
		})
	}
}

// TestRoundTripsCoverEveryMethod fails when a method of an interface of ports.Core, or of
// ports.TemplateRenderer which the client serves beside them, has no round trip (and so no error round
// trip either): a method added to a port cannot cross the wire untested. Method names are unique across
// the services, which the round trips rely on to name the method the fake receives.
func TestRoundTripsCoverEveryMethod(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, tc := range roundTrips() {
		covered[tc.method] = true
	}
	core := reflect.TypeFor[ports.Core]()
	methods := 0
	check := func(name string, iface reflect.Type) {
		for j := range iface.NumMethod() {
			methods++
			if m := iface.Method(j).Name; !covered[m] {
				t.Errorf("%s: method %s has no round trip", name, m)
			}
		}
	}
	for i := range core.NumField() {
		f := core.Field(i)
		if f.Type.Kind() != reflect.Interface {
			t.Fatalf("ports.Core.%s is a %s, not an interface", f.Name, f.Type.Kind())
		}
		check("ports.Core."+f.Name, f.Type)
	}
	check("ports.TemplateRenderer", reflect.TypeFor[ports.TemplateRenderer]())
	if methods < 50 {
		t.Fatalf("found %d methods in ports.Core; the reflection is broken", methods)
	}
}

// TestErrorOnEveryMethod checks that each method's error path carries the *ports.Error back intact and
// returns the zero value, so no handler or client method forgets to translate.
func TestErrorOnEveryMethod(t *testing.T) {
	t.Parallel()
	want := &ports.Error{
		Code: ports.CodeNotFound, Message: "organization not found", Reason: "gone",
		Details: []ports.FieldViolation{{Path: "id", Message: "unknown"}}, Constraint: "organizations_pkey",
		RetryAfterSeconds: 3,
	}
	for _, tc := range roundTrips() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			tc.answer(b.fake)
			b.fake.err = fmt.Errorf("store: %w", want)
			got, err := tc.call(context.Background(), b.client.Core())
			perr, ok := ports.AsError(err)
			if !ok {
				t.Fatalf("err = %v, want a *ports.Error", err)
			}
			if !reflect.DeepEqual(perr, want) {
				t.Errorf("err:\n got %#v\nwant %#v", perr, want)
			}
			if got != nil && !reflect.ValueOf(got).IsZero() {
				t.Errorf("result with an error = %#v, want the zero value", got)
			}
		})
	}
}
