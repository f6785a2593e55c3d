package account

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"

	"github.com/postmill/postmill/ports"
)

func TestSignupAdminBootstrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, func(c *Config) { c.AdminEmails = []string{"root@admin.example", "ops@admin.example"} })
	plain := b.MustSignup(t, "user@example.com")
	root := b.MustSignup(t, "Root@Admin.example")
	// A second listed email signs up after an admin exists: nothing proves they own it, so no admin.
	ops := b.MustSignup(t, "ops@admin.example")
	for _, c := range []struct {
		id   string
		want bool
	}{{plain.UserID, false}, {root.UserID, true}, {ops.UserID, false}} {
		u, err := b.store.UserByID(ctx, c.id)
		if err != nil || u.IsAdmin != c.want {
			t.Errorf("user %s admin = %v (%v), want %v", u.Email, u.IsAdmin, err, c.want)
		}
	}

	// The operator command manages admins afterwards.
	if err := SetAdmin(ctx, b.store, " OPS@admin.example ", true); err != nil {
		t.Fatal(err)
	}
	if u, _ := b.store.UserByID(ctx, ops.UserID); !u.IsAdmin {
		t.Error("SetAdmin grant did not make ops an admin")
	}
	if err := SetAdmin(ctx, b.store, "root@admin.example", false); err != nil {
		t.Fatal(err)
	}
	if u, _ := b.store.UserByID(ctx, root.UserID); u.IsAdmin {
		t.Error("SetAdmin revoke left root an admin")
	}
	wantCode(t, SetAdmin(ctx, b.store, "nobody@example.com", true), ports.CodeNotFound)
	wantCode(t, SetAdmin(ctx, b.store, "not an email", true), ports.CodeInvalidArgument)
}

func TestAuthenticateSessionReportsTwoFactor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	res := b.MustSignup(t, "root@admin.example")
	p, err := b.svc.AuthenticateSession(ctx, res.Tokens.AccessToken)
	if err != nil || !p.IsAdmin || p.TwoFactor {
		t.Fatalf("before enrolment: %+v, %v", p, err)
	}
	enableTOTP(t, b, p)
	if p, err = b.svc.AuthenticateSession(ctx, res.Tokens.AccessToken); err != nil || !p.TwoFactor {
		t.Fatalf("after enrolment: %+v, %v", p, err)
	}
}

// recordVerifies wraps the service's password check to list the hashes it verified against.
func recordVerifies(s *Service) func() []string {
	var (
		mu   sync.Mutex
		seen []string
	)
	inner := s.verifyFn
	s.verifyFn = func(password, encoded string) (bool, error) {
		mu.Lock()
		seen = append(seen, encoded)
		mu.Unlock()
		return inner(password, encoded)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestLoginUnknownEmailCostsOneHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	b.MustSignup(t, "known@example.com")
	seen := recordVerifies(b.svc)

	_, err := b.svc.Login(ctx, ports.LoginInput{Email: "unknown@example.com", Password: testPassword})
	wantCode(t, err, ports.CodeUnauthenticated)
	_, err2 := b.svc.Login(ctx, ports.LoginInput{Email: "known@example.com", Password: "wrong password"})
	wantCode(t, err2, ports.CodeUnauthenticated)
	if ports.ErrorMessage(err) != ports.ErrorMessage(err2) {
		t.Errorf("unknown email says %q, wrong password %q", ports.ErrorMessage(err), ports.ErrorMessage(err2))
	}
	got := seen()
	if len(got) != 2 || got[0] != b.svc.dummyHash {
		t.Fatalf("verified against %v, want the decoy then the user's hash", got)
	}
	// The decoy costs what a real hash costs.
	decoy, _, _, err := parsePasswordHash(got[0])
	real, _, _, err2 := parsePasswordHash(got[1])
	if err != nil || err2 != nil || decoy != real {
		t.Errorf("decoy parameters %+v, user's %+v", decoy, real)
	}
}

func TestLoginThrottledPerAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, func(c *Config) { c.LoginAccountLimit = 3; c.LoginAccountWindow = time.Minute })
	b.MustSignup(t, "alice@example.com")
	seen := recordVerifies(b.svc)
	for _, email := range []string{"alice@example.com", "ALICE@example.com ", "alice@EXAMPLE.com"} {
		_, err := b.svc.Login(ctx, ports.LoginInput{Email: email, Password: "wrong password"})
		wantCode(t, err, ports.CodeUnauthenticated)
	}
	// The right password does not get past the window either, and costs no hash.
	_, err := b.svc.Login(ctx, ports.LoginInput{Email: "alice@example.com", Password: testPassword})
	wantCode(t, err, ports.CodeResourceExhausted)
	if e, _ := ports.AsError(err); e == nil || ports.ErrorMessage(err) != "Rate limit exceeded. Try again later." {
		t.Errorf("throttled login: %v", err)
	}
	if n := len(seen()); n != 3 {
		t.Errorf("%d hashes verified, want 3", n)
	}
	// Unknown emails are throttled the same way, and other accounts not at all.
	for range 3 {
		_, _ = b.svc.Login(ctx, ports.LoginInput{Email: "ghost@example.com", Password: testPassword})
	}
	_, err = b.svc.Login(ctx, ports.LoginInput{Email: "ghost@example.com", Password: testPassword})
	wantCode(t, err, ports.CodeResourceExhausted)
	b.MustSignup(t, "bob@example.com")
	if _, err := b.svc.Login(ctx, ports.LoginInput{Email: "bob@example.com", Password: testPassword}); err != nil {
		t.Fatalf("bob: %v", err)
	}
	if n := b.limiter.count("login-account:alice@example.com"); n != 4 {
		t.Errorf("alice's window counted %d attempts, want 4", n)
	}
}

func TestHashPoolTurnsAwayBeyondItsQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newHashPool(1, 1)
	release := make(chan struct{})
	running := make(chan struct{})
	done := make(chan error, 2)
	go func() { done <- p.do(ctx, func() { close(running); <-release }) }()
	<-running
	waiterIn := make(chan struct{})
	go func() { done <- p.do(ctx, func() { close(waiterIn) }) }()
	// The waiter holds the only queue place once it is admitted; wait for that.
	for len(p.admitted) < 2 {
		time.Sleep(time.Millisecond)
	}
	err := p.do(ctx, func() { t.Error("ran beyond the queue") })
	wantCode(t, err, ports.CodeResourceExhausted)
	if e, _ := ports.AsError(err); e == nil {
		t.Fatal("not a ports error")
	}
	select {
	case <-waiterIn:
		t.Fatal("the waiter ran while the worker was busy")
	default:
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	<-waiterIn
	// A waiter that gives up leaves the queue.
	busy := make(chan struct{})
	go func() { _ = p.do(ctx, func() { <-busy }) }()
	for len(p.running) < 1 {
		time.Sleep(time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := p.do(cctx, func() {}); err != context.DeadlineExceeded {
		t.Fatalf("waiter that gave up: %v", err)
	}
	close(busy)
}

func TestLoginWhenThePoolIsFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	b.MustSignup(t, "alice@example.com")
	b.svc.pool = newHashPool(1, 0) // one worker, nobody may wait
	release := make(chan struct{})
	held := make(chan struct{})
	go func() { _ = b.svc.pool.do(ctx, func() { close(held); <-release }) }()
	<-held
	defer close(release)
	for _, email := range []string{"alice@example.com", "unknown@example.com"} {
		_, err := b.svc.Login(ctx, ports.LoginInput{Email: email, Password: testPassword})
		wantCode(t, err, ports.CodeResourceExhausted)
	}
}

// codeAt is the user's TOTP code for step.
func codeAt(tb testing.TB, seed string, step uint64) string {
	tb.Helper()
	c, err := hotp.GenerateCodeCustom(seed, step, hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// enableTOTP enrols and verifies 2FA for p at the bundle's current time and returns the seed.
func enableTOTP(tb testing.TB, b *bundle, p ports.Principal) string {
	tb.Helper()
	e, err := b.svc.EnrollTOTP(context.Background(), p, testPassword)
	if err != nil {
		tb.Fatalf("EnrollTOTP: %v", err)
	}
	if err := b.svc.VerifyTOTP(context.Background(), p, codeAt(tb, e.Secret, totpStep(b.clock.Now()))); err != nil {
		tb.Fatalf("VerifyTOTP: %v", err)
	}
	return e.Secret
}

func TestEnrollTOTPRequiresThePassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, func(c *Config) { c.LoginAccountLimit = 3 })
	res := b.MustSignup(t, "alice@example.com")
	p, err := b.svc.AuthenticateSession(ctx, res.Tokens.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.EnrollTOTP(ctx, p, "")
	wantCode(t, err, ports.CodeInvalidArgument)
	_, err = b.svc.EnrollTOTP(ctx, p, "wrong password")
	wantCode(t, err, ports.CodeUnauthenticated)
	if u, _ := b.store.UserByID(ctx, res.UserID); len(u.TOTPSecret) != 0 {
		t.Fatal("a wrong password started enrolment")
	}
	if _, err := b.svc.EnrollTOTP(ctx, p, testPassword); err != nil {
		t.Fatalf("EnrollTOTP: %v", err)
	}
	// Password checks at enrolment share the account's login window.
	_, _ = b.svc.EnrollTOTP(ctx, p, "wrong password")
	_, err = b.svc.EnrollTOTP(ctx, p, testPassword)
	wantCode(t, err, ports.CodeResourceExhausted)
	_, err = b.svc.EnrollTOTP(ctx, ports.Principal{Kind: ports.PrincipalAPIKey, OrganizationID: res.OrganizationID}, testPassword)
	wantCode(t, err, ports.CodeUnauthenticated)
}

func TestTOTPCodeAcceptedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	res := b.MustSignup(t, "alice@example.com")
	p, _ := b.svc.AuthenticateSession(ctx, res.Tokens.AccessToken)
	seed := enableTOTP(t, b, p)
	step := totpStep(b.clock.Now())
	login := func(code string) error {
		_, err := b.svc.Login(ctx, ports.LoginInput{Email: "alice@example.com", Password: testPassword, TOTP: code})
		return err
	}
	// The code verification accepted is spent: a login in the same step with it fails.
	wantCode(t, login(codeAt(t, seed, step)), ports.CodeUnauthenticated)
	b.clock.advance(30 * time.Second)
	if err := login(codeAt(t, seed, step+1)); err != nil {
		t.Fatalf("next step: %v", err)
	}
	wantCode(t, login(codeAt(t, seed, step+1)), ports.CodeUnauthenticated) // replay, same step
	wantCode(t, login(codeAt(t, seed, step)), ports.CodeUnauthenticated)   // earlier step, still within skew
	if u, _ := b.store.UserByID(ctx, res.UserID); u.TOTPLastStep != int64(step+1) {
		t.Errorf("last step %d, want %d", u.TOTPLastStep, step+1)
	}

	// Concurrent logins with one fresh code: exactly one gets through.
	b.clock.advance(30 * time.Second)
	code := codeAt(t, seed, step+2)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok int
	)
	for range 8 {
		wg.Go(func() {
			if login(code) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 1 {
		t.Fatalf("%d logins succeeded with one code, want 1", ok)
	}
}

func TestVerifyTOTPRefusesAClaimedStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	res := b.MustSignup(t, "alice@example.com")
	p, _ := b.svc.AuthenticateSession(ctx, res.Tokens.AccessToken)
	e, err := b.svc.EnrollTOTP(ctx, p, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	step := totpStep(b.clock.Now())
	if ok, _ := b.store.ClaimTOTPStep(ctx, res.UserID, int64(step)); !ok {
		t.Fatal("claim")
	}
	wantCode(t, b.svc.VerifyTOTP(ctx, p, codeAt(t, e.Secret, step)), ports.CodeInvalidArgument)
	if u, _ := b.store.UserByID(ctx, res.UserID); u.TOTPEnabled {
		t.Fatal("2FA enabled by a spent code")
	}
	if err := b.svc.VerifyTOTP(ctx, p, codeAt(t, e.Secret, step+1)); err != nil {
		t.Fatalf("next step: %v", err)
	}
}

func TestRefreshReuseRevokesTheFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	res := b.MustSignup(t, "alice@example.com")
	first := res.Tokens.RefreshToken
	second, err := b.svc.Refresh(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Refresh(ctx, first)
	wantCode(t, err, ports.CodeUnauthenticated)
	// The reuse revoked the successor too.
	_, err = b.svc.Refresh(ctx, second.RefreshToken)
	wantCode(t, err, ports.CodeUnauthenticated)

	// An expired token is refused without revoking anything.
	other, err := b.svc.Login(ctx, ports.LoginInput{Email: "alice@example.com", Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.advance(DefaultRefreshTTL)
	_, err = b.svc.Refresh(ctx, other.RefreshToken)
	wantCode(t, err, ports.CodeUnauthenticated)
	for _, tok := range b.store.refresh {
		if tok.RevokedAt != nil && tok.FamilyID != b.store.refresh[0].FamilyID {
			t.Errorf("expiry revoked a token of family %s", tok.FamilyID)
		}
	}
}

func TestLogoutRevokesTheFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	res := b.MustSignup(t, "alice@example.com")
	next, err := b.svc.Refresh(ctx, res.Tokens.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.svc.Login(ctx, ports.LoginInput{Email: "alice@example.com", Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	// Logging out with an earlier token of the family revokes the current one.
	if err := b.svc.Logout(ctx, res.Tokens.RefreshToken); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Refresh(ctx, next.RefreshToken)
	wantCode(t, err, ports.CodeUnauthenticated)
	if err := b.svc.Logout(ctx, next.RefreshToken); err != nil {
		t.Fatalf("second logout: %v", err)
	}
	// Another login is another family.
	if _, err := b.svc.Refresh(ctx, other.RefreshToken); err != nil {
		t.Fatalf("other session: %v", err)
	}
	wantCode(t, b.svc.Logout(ctx, "rt_"+strings.Repeat("A", 43)), ports.CodeUnauthenticated)
	wantCode(t, b.svc.Logout(ctx, "nonsense"), ports.CodeUnauthenticated)
}

func TestSessionSurvivesKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := MustBundle(t, nil)
	res := b.MustSignup(t, "alice@example.com")
	rotated := b.mustService(t, nil, mustKeyring(t, testMasterNew, testMasterOld))
	onlyNew := b.mustService(t, nil, mustKeyring(t, testMasterNew))

	// A session signed under the old primary still works on a process whose primary is the new master.
	if p, err := rotated.AuthenticateSession(ctx, res.Tokens.AccessToken); err != nil || p.UserID != res.UserID {
		t.Fatalf("old session after rotation: %+v, %v", p, err)
	}
	// Refresh tokens are opaque and survive; the new pair is signed under the new primary.
	pair, err := rotated.Refresh(ctx, res.Tokens.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onlyNew.AuthenticateSession(ctx, pair.AccessToken); err != nil {
		t.Fatalf("new session without the old master: %v", err)
	}
	// A process not yet rotated (old master only) refuses the new key's token, and the old token stops
	// working once the old master is removed.
	_, err = b.svc.AuthenticateSession(ctx, pair.AccessToken)
	wantCode(t, err, ports.CodeUnauthenticated)
	_, err = onlyNew.AuthenticateSession(ctx, res.Tokens.AccessToken)
	wantCode(t, err, ports.CodeUnauthenticated)
	// A process that has the new master as a secondary accepts it already (step one of a rotation).
	staged := b.mustService(t, nil, mustKeyring(t, testMasterOld, testMasterNew))
	if _, err := staged.AuthenticateSession(ctx, pair.AccessToken); err != nil {
		t.Fatalf("staged process: %v", err)
	}
}
