package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
	"github.com/postmill/postmill/ports"
)

// fullError sets every field of ports.Error, so a field the wire forgets shows up as a difference.
func fullError(code ports.Code) *ports.Error {
	return &ports.Error{
		Code:              code,
		Message:           "message for " + string(code) + " — ünïcödé",
		Reason:            "reason_" + string(code),
		Details:           []ports.FieldViolation{{Path: "attachments.0.content", Message: "is required"}, {Path: "to", Message: "too many"}},
		Constraint:        "constraint_" + string(code),
		RetryAfterSeconds: 42,
		Fields:            map[string]any{"requiredScopes": []string{"emails:send"}, "limit": int64(1<<60 + 1), "metric": "emails_sent", "nested": map[string]any{"ok": true}},
	}
}

func jsonOf(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// assertSameError compares every field; Fields are compared as the JSON they render to, which is all
// ports promises of them (their values are only promised to be JSON-encodable).
func assertSameError(tb testing.TB, got error, want *ports.Error) {
	tb.Helper()
	perr, ok := ports.AsError(got)
	if !ok {
		tb.Fatalf("err = %v (%T), want a *ports.Error", got, got)
	}
	if jsonOf(tb, perr.Fields) != jsonOf(tb, want.Fields) {
		tb.Errorf("Fields = %s, want %s", jsonOf(tb, perr.Fields), jsonOf(tb, want.Fields))
	}
	if (perr.Fields == nil) != (want.Fields == nil) {
		tb.Errorf("Fields nil = %v, want %v", perr.Fields == nil, want.Fields == nil)
	}
	g, w := *perr, *want
	g.Fields, w.Fields = nil, nil
	if !reflect.DeepEqual(g, w) {
		tb.Errorf("error:\n got %#v\nwant %#v", g, w)
	}
}

// TestErrorRoundTrip checks that every ports code crosses the wire with the Connect code of the table
// and comes back with every field intact.
func TestErrorRoundTrip(t *testing.T) {
	t.Parallel()
	wire := map[ports.Code]connect.Code{
		ports.CodeInvalidArgument:    connect.CodeInvalidArgument,
		ports.CodeNotFound:           connect.CodeNotFound,
		ports.CodeAlreadyExists:      connect.CodeAlreadyExists,
		ports.CodeFailedPrecondition: connect.CodeFailedPrecondition,
		ports.CodePermissionDenied:   connect.CodePermissionDenied,
		ports.CodeUnauthenticated:    connect.CodeUnauthenticated,
		ports.CodeResourceExhausted:  connect.CodeResourceExhausted,
		ports.CodePaymentRequired:    connect.CodeFailedPrecondition,
		ports.CodeInternal:           connect.CodeInternal,
	}
	for code, wireCodeWant := range wire {
		t.Run(string(code), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			want := fullError(code)
			mustSetEveryField(t, *want)
			b.fake.err = want
			assertSameError(t, b.client.Ping(context.Background()), want)
			if got := wireCode(t, b.server, "Bearer "+testToken); got != wireCodeWant {
				t.Errorf("wire code = %v, want %v", got, wireCodeWant)
			}
		})
	}
}

// TestErrorShapes covers the ways an error can be partly empty, each of which the edge renders
// differently (an empty details array is not an absent one), and the errors that must not leak.
func TestErrorShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want *ports.Error
	}{
		{"bare", &ports.Error{Code: ports.CodeNotFound}, &ports.Error{Code: ports.CodeNotFound}},
		{"validation without details", ports.ValidationError(), ports.ValidationError()},
		{"empty details", ports.ValidationError([]ports.FieldViolation{}...), ports.ValidationError([]ports.FieldViolation{}...)},
		{"empty fields", &ports.Error{Code: ports.CodePermissionDenied, Fields: map[string]any{}}, &ports.Error{Code: ports.CodePermissionDenied, Fields: map[string]any{}}},
		{"insufficient scope", ports.InsufficientScope([]string{"emails:send", "*"}), ports.InsufficientScope([]string{"emails:send", "*"})},
		{"already exists", ports.AlreadyExists("users_email_key"), ports.AlreadyExists("users_email_key")},
		{"rate limited", ports.RateLimited(17), ports.RateLimited(17)},
		{"wrapped", fmt.Errorf("store: %w", ports.NotFound("no org %s", "x")), ports.NotFound("no org %s", "x")},
		{"plain error", errors.New("pq: password authentication failed for user \"secret\""), &ports.Error{Code: ports.CodeInternal, Message: "internal error"}},
		{"unknown code", &ports.Error{Code: "teapot", Message: "secret teapot", Reason: "secret"}, &ports.Error{Code: ports.CodeInternal, Message: "internal error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.err = tc.err
			err := b.client.Ping(context.Background())
			assertSameError(t, err, tc.want)
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("err = %q leaks the implementation's words", err)
			}
		})
	}
}

// TestAuthRefused checks that a call without the inter-tier token, or with a wrong one, is refused as
// unauthenticated before it reaches the implementation.
func TestAuthRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		serverToken string
		header      string
	}{
		{"no header", testToken, ""},
		{"wrong token", testToken, "Bearer wrong"},
		{"token prefix", testToken, "Bearer " + testToken[:5]},
		{"token with suffix", testToken, "Bearer " + testToken + "x"},
		{"no scheme", testToken, testToken},
		{"other scheme", testToken, "Basic " + testToken},
		{"scheme only", testToken, "Bearer"},
		{"two spaces", testToken, "Bearer  " + testToken},
		{"empty server token, empty bearer", "", "Bearer "},
		{"empty server token, some bearer", "", "Bearer anything"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeCore{}
			srv := mustServe(t, fake.core(), tc.serverToken)
			if got := wireCode(t, srv, tc.header); got != connect.CodeUnauthenticated {
				t.Errorf("wire code = %v, want unauthenticated", got)
			}
			if calls := fake.recorded(); len(calls) != 0 {
				t.Errorf("implementation reached: %+v", calls)
			}
		})
	}

	t.Run("message and HTTP status", func(t *testing.T) {
		t.Parallel()
		fake := &fakeCore{}
		srv := mustServe(t, fake.core(), testToken)
		res, err := srv.Client().Post(srv.URL+healthv1connect.HealthServiceCheckProcedure, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "rpc: invalid credentials") {
			t.Errorf("status %d body %s, want 401 with rpc: invalid credentials", res.StatusCode, body)
		}
		if calls := fake.recorded(); len(calls) != 0 {
			t.Errorf("implementation reached: %+v", calls)
		}
	})

	t.Run("unconfigured server and client", func(t *testing.T) {
		t.Parallel()
		fake := &fakeCore{}
		srv := mustServe(t, fake.core(), "")
		c := rpc.NewClient(srv.URL, "", nil)
		if err := c.Ping(context.Background()); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("err = %v, want refused as unauthenticated", err)
		}
		if calls := fake.recorded(); len(calls) != 0 {
			t.Errorf("implementation reached: %+v", calls)
		}
	})

	t.Run("client with wrong token", func(t *testing.T) {
		t.Parallel()
		fake := &fakeCore{}
		srv := mustServe(t, fake.core(), testToken)
		c := rpc.NewClient(srv.URL, "wrong", nil).Core()
		_, err := c.Organizations.GetOrganization(context.Background(), "org1")
		// The tier's caller did nothing wrong: a refused hop is this deployment's fault, so it is internal
		// (a 500), never the unauthenticated (401) of the end user's own credentials.
		if ports.ErrorCode(err) != ports.CodeInternal || ports.ErrorMessage(err) != "internal error" {
			t.Errorf("err = %v (code %s), want internal", err, ports.ErrorCode(err))
		}
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("cause code = %v, want unauthenticated", connect.CodeOf(err))
		}
		if calls := fake.recorded(); len(calls) != 0 {
			t.Errorf("implementation reached: %+v", calls)
		}
	})
}

// TestAuthAccepted checks the token is accepted with the scheme in any case (RFC 7235 §2.1).
func TestAuthAccepted(t *testing.T) {
	t.Parallel()
	for _, header := range []string{"Bearer " + testToken, "bearer " + testToken, "BEARER " + testToken} {
		t.Run(header, func(t *testing.T) {
			t.Parallel()
			fake := &fakeCore{}
			srv := mustServe(t, fake.core(), testToken)
			if got := wireCode(t, srv, header); got != 0 {
				t.Errorf("wire code = %v, want success", got)
			}
			if calls := fake.recorded(); len(calls) != 1 {
				t.Errorf("implementation calls = %+v, want one", calls)
			}
		})
	}
}

// TestPanicBecomesInternal checks that a panicking implementation answers Internal without detail and
// that the server keeps serving.
func TestPanicBecomesInternal(t *testing.T) {
	t.Parallel()
	b := setup(t, &fakeCore{panicWith: "secret boom"})
	_, err := b.client.Core().Organizations.GetOrganization(context.Background(), "org1")
	if ports.ErrorCode(err) != ports.CodeInternal || ports.ErrorMessage(err) != "internal error" {
		t.Errorf("err = %v (code %s), want internal error", err, ports.ErrorCode(err))
	}
	if connect.CodeOf(err) != connect.CodeInternal {
		t.Errorf("wire code = %v, want internal (a dropped connection would be unavailable)", connect.CodeOf(err))
	}
	if strings.Contains(err.Error(), "boom") {
		t.Errorf("err = %q leaks the panic value", err)
	}
	b.fake.mu.Lock()
	b.fake.panicWith = nil
	b.fake.mu.Unlock()
	if err := b.client.Ping(context.Background()); err != nil {
		t.Errorf("after a panic: %v", err)
	}
}

// TestTransportFailure checks that a core that cannot be reached is an internal error that keeps its
// cause.
func TestTransportFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.server.Close()
	err := b.client.Ping(context.Background())
	if ports.ErrorCode(err) != ports.CodeInternal || ports.ErrorMessage(err) != "internal error" {
		t.Errorf("err = %v (code %s), want internal error", err, ports.ErrorCode(err))
	}
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != connect.CodeUnavailable {
		t.Errorf("cause = %v, want a Connect unavailable error", err)
	}
	if !strings.Contains(err.Error(), healthv1connect.HealthServiceCheckProcedure) {
		t.Errorf("err = %q, want the procedure named for the logs", err)
	}
}

// TestDeadline checks that the caller's deadline reaches the implementation, and that a call whose
// deadline passed reports it through errors.Is as it would in process.
func TestDeadline(t *testing.T) {
	t.Parallel()
	var hadDeadline bool
	b := setup(t, &fakeCore{seen: func(ctx context.Context) { _, hadDeadline = ctx.Deadline() }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if !hadDeadline {
		t.Error("implementation's context has no deadline")
	}

	expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	err := b.client.Ping(expired)
	if ports.ErrorCode(err) != ports.CodeInternal || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want internal wrapping context.DeadlineExceeded", err)
	}
}

// TestTraceCrossesHop checks that the caller's trace context is the parent of the implementation's, so
// a request shows as one trace across tiers.
func TestTraceCrossesHop(t *testing.T) {
	t.Parallel()
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	var got trace.SpanContext
	b := setup(t, &fakeCore{seen: func(ctx context.Context) { got = trace.SpanContextFromContext(ctx) }})
	if err := b.client.Ping(trace.ContextWithSpanContext(context.Background(), parent)); err != nil {
		t.Fatal(err)
	}
	if got.TraceID() != parent.TraceID() {
		t.Errorf("implementation trace id = %v, want %v", got.TraceID(), parent.TraceID())
	}
}

// TestUnmountedService checks that a nil field of ports.Core leaves its service out: calls to it fail as
// internal errors while the others serve.
func TestUnmountedService(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{}
	srv := mustServe(t, ports.Core{Health: fake}, testToken)
	c := rpc.NewClient(srv.URL, testToken, nil).Core()
	_, err := c.Organizations.GetOrganization(context.Background(), "org1")
	if ports.ErrorCode(err) != ports.CodeInternal || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("err = %v, want internal caused by unimplemented", err)
	}
	if err := c.Health.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// TestConcurrentCalls checks that one client serves many goroutines at once.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, &fakeCore{decision: ports.RateDecision{Allowed: true, Count: 1, Limit: 100}})
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			d, err := b.client.Core().RateLimiter.Allow(context.Background(), fmt.Sprintf("key%d", i), 100, time.Minute)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("decision %+v", d)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(b.fake.recorded()); got != n {
		t.Errorf("implementation calls = %d, want %d", got, n)
	}
}

// TestTimesKeepTheirInstant checks that a time in another zone arrives as the same instant (in UTC:
// Timestamp carries no zone).
func TestTimesKeepTheirInstant(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 36, 12, 5, time.FixedZone("CET", 3600))
	b := setup(t, &fakeCore{org: ports.Organization{ID: "org1", CreatedAt: at}})
	got, err := b.client.Core().Organizations.GetOrganization(context.Background(), "org1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(at) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, at)
	}
}

// TestCore checks that the bundle routes every interface to a client of this package. It reads the
// fields of ports.Core by reflection, so a service added to the bundle fails here until the client
// serves it.
func TestCore(t *testing.T) {
	t.Parallel()
	c := rpc.NewClient("http://127.0.0.1:1", testToken, nil)
	core := reflect.ValueOf(c.Core())
	for i := range core.NumField() {
		v := core.Field(i).Interface()
		if v == nil || reflect.TypeOf(v).Kind() != reflect.Pointer || reflect.TypeOf(v).Elem().PkgPath() != reflect.TypeFor[rpc.Client]().PkgPath() {
			t.Errorf("Core().%s = %T, want a client of package rpc", core.Type().Field(i).Name, v)
		}
	}
}

// TestNoHashOnTheWire checks the schema itself: no message may grow a field for a token or password
// hash, which must stay inside the core.
func TestNoHashOnTheWire(t *testing.T) {
	t.Parallel()
	var messages int
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			m := ms.Get(i)
			messages++
			for j := range m.Fields().Len() {
				if f := m.Fields().Get(j); strings.Contains(string(f.Name()), "hash") {
					t.Errorf("%s has field %s", m.FullName(), f.Name())
				}
			}
			walk(m.Messages())
		}
	}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(fd.Path(), "postmill/") {
			walk(fd.Messages())
		}
		return true
	})
	if messages < 10 {
		t.Fatalf("walked %d messages; the generated packages are not registered", messages)
	}
}

// TestServerConfigValidate checks that a server without credentials, or with one that would admit
// nothing, is reported before it starts, without the credential in the error.
func TestServerConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (rpc.ServerConfig{}).Validate(); err == nil {
		t.Error("no credential: want an error")
	}
	if err := (rpc.ServerConfig{Credentials: []string{testToken}}).Validate(); err != nil {
		t.Errorf("credential set: %v", err)
	}
	bad := "pmrpc_edge_not-hex-secret-value"
	err := (rpc.ServerConfig{Credentials: []string{testToken, bad}}).Validate()
	if err == nil || strings.Contains(err.Error(), "not-hex") {
		t.Errorf("malformed credential: err = %v, want an error that does not repeat it", err)
	}
}

// mustSetEveryField fails when a field of v holds its zero value, so that a field added to a ports type
// fails here until the wire carries it too. It walks into embedded and nested structs, through pointers
// and interfaces (a nil one is zero), and into every element of a slice of structs; a slice or map must
// have at least one element.
func mustSetEveryField(tb testing.TB, v any) {
	tb.Helper()
	var walk func(rv reflect.Value, path string)
	walk = func(rv reflect.Value, path string) {
		switch {
		case rv.Kind() == reflect.Struct && rv.Type() != reflect.TypeOf(time.Time{}):
			for i := range rv.NumField() {
				walk(rv.Field(i), path+"."+rv.Type().Field(i).Name)
			}
		case rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface:
			if rv.IsNil() {
				tb.Errorf("fixture field %s is nil: set it so the test covers it", path)
				return
			}
			walk(rv.Elem(), path)
		case rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map:
			if rv.Len() == 0 {
				tb.Errorf("fixture field %s is empty: set it so the test covers it", path)
				return
			}
			if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() != reflect.Uint8 {
				for i := range rv.Len() {
					walk(rv.Index(i), fmt.Sprintf("%s[%d]", path, i))
				}
			}
		case rv.IsZero():
			tb.Errorf("fixture field %s is zero: set it so the test covers it", path)
		}
	}
	walk(reflect.ValueOf(v), reflect.TypeOf(v).Name())
}

// TestEveryFieldCrosses sends values with every field set through the methods that carry them.
func TestEveryFieldCrosses(t *testing.T) {
	t.Parallel()
	principal := ports.Principal{
		Kind: ports.PrincipalAPIKey, OrganizationID: "org1", UserID: "u1", IsAdmin: true, TwoFactor: true,
		APIKeyID: "k1", Scopes: []string{"*"}, ScopesEnforced: true,
	}
	key := ports.CreatedAPIKey{Token: "svc_live_x", APIKey: ports.APIKey{
		ID: "k1", OrganizationID: "org1", Name: "n", Prefix: "p", TokenHash: []byte{1}, Scopes: []string{"a"},
		ScopesEnforced: true, LastUsedAt: ptr(t1), RevokedAt: ptr(t2), CreatedAt: t0,
	}}
	cred := ports.CreatedSMTPCredential{Password: "pw", SMTPCredential: ports.SMTPCredential{
		ID: "c1", OrganizationID: "org1", Username: "u", PasswordHash: "h", Host: "h", Port: 587, CreatedAt: t0,
	}}
	org := ports.Organization{ID: "o", Name: "n", Slug: "s", CreatedAt: t0, Paused: true, Plan: ports.Plan{MonthlyLimit: 1, WarmupCap: 2}}
	sub := ports.Subscription{OrganizationID: "o", Plan: ports.Plan{MonthlyLimit: 1, WarmupCap: 2}, PeriodStart: t0, PeriodEnd: t2, EmailsSent: 3}
	decision := ports.RateDecision{Allowed: true, Count: 1, Limit: 2, RetryAfter: time.Second}
	signupIn := ports.SignupInput{Email: "e", Password: "p", OrganizationName: "o"}
	signup := ports.SignupResult{UserID: "u", OrganizationID: "o", Tokens: ports.TokenPair{AccessToken: "a", RefreshToken: "r"}}
	loginIn := ports.LoginInput{Email: "e", Password: "p", TOTP: "t", OrgID: "o"}
	enrollment := ports.TOTPEnrollment{Secret: "s", OTPAuthURL: "u"}
	for _, v := range []any{principal, key, cred, org, sub, decision, signupIn, signup, loginIn, enrollment} {
		mustSetEveryField(t, v)
	}

	b := setup(t, &fakeCore{
		principal: principal, createdKey: key, createdCred: cred, org: org, sub: sub,
		decision: decision, signup: signup, tokens: signup.Tokens, enrollment: enrollment,
	})
	ctx := context.Background()
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", name, got, want)
		}
	}
	gotPrincipal, err := b.client.Core().Auth.AuthenticateAPIKey(ctx, "t")
	check("principal", gotPrincipal, principal, err)
	gotKey, err := b.client.Core().APIKeys.CreateAPIKey(ctx, "org1", "n", nil)
	wantKey := key
	wantKey.TokenHash = nil
	check("api key", gotKey, wantKey, err)
	gotCred, err := b.client.Core().SMTPCredentials.CreateSMTPCredential(ctx, "org1")
	wantCred := cred
	wantCred.PasswordHash = ""
	check("smtp credential", gotCred, wantCred, err)
	gotOrg, err := b.client.Core().Organizations.GetOrganization(ctx, "o")
	check("organization", gotOrg, org, err)
	gotSub, err := b.client.Core().Organizations.Subscription(ctx, "o")
	check("subscription", gotSub, sub, err)
	gotDecision, err := b.client.Core().RateLimiter.Allow(ctx, "k", 2, time.Minute)
	check("decision", gotDecision, decision, err)
	gotSignup, err := b.client.Core().Accounts.Signup(ctx, signupIn)
	check("signup", gotSignup, signup, err)
	gotTokens, err := b.client.Core().Accounts.Login(ctx, loginIn)
	check("login", gotTokens, signup.Tokens, err)
	gotEnrollment, err := b.client.Core().Accounts.EnrollTOTP(ctx, principal, "pw")
	check("enrollment", gotEnrollment, enrollment, err)

	calls := b.fake.recorded()
	wantArgs := map[string][]any{
		"Signup":     {signupIn},
		"Login":      {loginIn},
		"EnrollTOTP": {principal, "pw"},
	}
	for _, c := range calls {
		if want, ok := wantArgs[c.method]; ok && !reflect.DeepEqual(c.args, want) {
			t.Errorf("%s args:\n got %#v\nwant %#v", c.method, c.args, want)
		}
	}
}
