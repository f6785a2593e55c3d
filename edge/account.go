package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// OpenAPI tags.
const (
	tagAuth         = "Auth"
	tagAPIKeys      = "API keys"
	tagSMTP         = "SMTP credentials"
	tagOrganization = "Organization"
	tagAdmin        = "Admin"
	tagBilling      = "Billing"
)

// Request bodies accept unknown fields and ignore them: an organization id in a body must be ignored, not
// rejected (SPEC §5 rule 1), and older or newer clients keep working.

type signupRequest struct {
	_                struct{} `json:"-" additionalProperties:"true"`
	Email            string   `json:"email" format:"email" doc:"Login email; trimmed and lower-cased"`
	Password         string   `json:"password" minLength:"8" maxLength:"1024" doc:"At least 8 characters"`
	OrganizationName string   `json:"organizationName,omitempty" minLength:"1" maxLength:"120" doc:"Derived from the email's local part when omitted"`
}

type signupResponse struct {
	UserID         string `json:"userId" format:"uuid" doc:"The new user"`
	OrganizationID string `json:"organizationId" format:"uuid" doc:"The new organization, named from organizationName or the email's local part"`
	AccessToken    string `json:"accessToken" doc:"Session access token (JWT) for the dashboard routes"`
	RefreshToken   string `json:"refreshToken" doc:"Single-use token for POST /v1/auth/refresh"`
}

type loginRequest struct {
	_        struct{} `json:"-" additionalProperties:"true"`
	Email    string   `json:"email" format:"email" doc:"The account's email"`
	Password string   `json:"password" minLength:"8" doc:"The account's password (at least 8 characters)"`
	TOTP     string   `json:"totp,omitempty" pattern:"^[0-9]{6}$" patternDescription:"six digits" doc:"Current RFC 6238 code, when two-factor is enabled"`
	OrgID    string   `json:"orgId,omitempty" format:"uuid" doc:"Organization the token is scoped to, for members of several"`
}

type tokenPair struct {
	AccessToken  string `json:"accessToken" doc:"Session access token (JWT): send it as Authorization: Bearer on the dashboard routes"`
	RefreshToken string `json:"refreshToken" doc:"Single-use: exchange it at POST /v1/auth/refresh for a fresh pair"`
}

type refreshRequest struct {
	_            struct{} `json:"-" additionalProperties:"true"`
	RefreshToken string   `json:"refreshToken" minLength:"1" doc:"The refreshToken of the latest pair; each one works once"`
}

type enrollTOTPRequest struct {
	_        struct{} `json:"-" additionalProperties:"true"`
	Password string   `json:"password" minLength:"1" maxLength:"1024" doc:"The account's password, asked again so that an access token alone cannot bind the account to another authenticator"`
}

type logoutResponse struct {
	Revoked bool `json:"revoked" doc:"Always true: the refresh token's family is revoked"`
}

type enrollmentResponse struct {
	Secret     string `json:"secret" doc:"Base32 RFC 6238 seed (SHA-1, 6 digits, 30 s)"`
	OTPAuthURL string `json:"otpauthUrl" doc:"otpauth:// URL for authenticator apps"`
}

type verifyTOTPRequest struct {
	_    struct{} `json:"-" additionalProperties:"true"`
	Code string   `json:"code" pattern:"^[0-9]{6}$" patternDescription:"six digits" doc:"The current six-digit code from the authenticator app"`
}

type enabledResponse struct {
	Enabled bool `json:"enabled" doc:"true once two-factor authentication is on"`
}

// body wraps a request or response body the way huma expects.
type body[T any] struct {
	Body T
}

func (s *Server) registerAccountRoutes() {
	register(s, huma.Operation{
		OperationID: "signup", Method: http.MethodPost, Path: "/v1/auth/signup", DefaultStatus: http.StatusCreated,
		Tags: []string{tagAuth}, Summary: "Sign up",
		Description: "Creates a user, an organization and the membership between them, and signs the user in. " +
			"Limited to 5 per hour per client IP.",
		Metadata: map[string]any{metaRateLimit: rateLimit{key: "signup", limit: 5, window: time.Hour}},
	}, access{kind: authPublic}, s.signup, http.StatusBadRequest, http.StatusConflict)

	register(s, huma.Operation{
		OperationID: "login", Method: http.MethodPost, Path: "/v1/auth/login",
		Tags: []string{tagAuth}, Summary: "Log in",
		Description: "Exchanges email and password (and the TOTP code once 2FA is enabled) for a token pair. " +
			"Limited to 10 per minute per client IP (IPv6 clients counted by /64) and 20 per 15 minutes per " +
			"account email; a 429 with retryAfterSeconds 1 also answers when too many password checks are queued.",
		Metadata: map[string]any{metaRateLimit: rateLimit{key: "login", limit: 10, window: time.Minute}},
	}, access{kind: authPublic}, s.login, http.StatusBadRequest, http.StatusUnauthorized)

	register(s, huma.Operation{
		OperationID: "refresh-token", Method: http.MethodPost, Path: "/v1/auth/refresh",
		Tags: []string{tagAuth}, Summary: "Refresh tokens",
		Description: "Spends a refresh token for a fresh pair. Reusing a spent refresh token revokes its family.",
	}, access{kind: authPublic}, s.refresh, http.StatusBadRequest, http.StatusUnauthorized)

	// Not in SPEC §4.1: ends a login. Public like refresh, since the refresh token is the credential, and
	// a client whose access token has expired must still be able to log out.
	register(s, huma.Operation{
		OperationID: "logout", Method: http.MethodPost, Path: "/v1/auth/logout",
		Tags: []string{tagAuth}, Summary: "Log out",
		Description: "Revokes the refresh token's family: it and every token refreshed from the same login stop " +
			"working. Access tokens already issued stay valid until they expire.",
	}, access{kind: authPublic}, s.logout, http.StatusBadRequest, http.StatusUnauthorized)

	register(s, huma.Operation{
		OperationID: "enroll-2fa", Method: http.MethodPost, Path: "/v1/auth/2fa/enroll", DefaultStatus: http.StatusCreated,
		Tags: []string{tagAuth}, Summary: "Start two-factor enrolment",
		Description: "Checks the account's password again, then issues a fresh TOTP seed; two-factor is enabled " +
			"once /v1/auth/2fa/verify accepts a code. Password checks count against the account's login limit.",
	}, access{kind: authSession}, s.enrollTOTP, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusTooManyRequests)

	register(s, huma.Operation{
		OperationID: "verify-2fa", Method: http.MethodPost, Path: "/v1/auth/2fa/verify",
		Tags: []string{tagAuth}, Summary: "Enable two-factor",
		Description: "Enables two-factor when the code matches the pending seed.",
	}, access{kind: authSession}, s.verifyTOTP, http.StatusBadRequest, http.StatusConflict)
}

func (s *Server) signup(ctx context.Context, in *body[signupRequest]) (*body[signupResponse], error) {
	res, err := s.core.Accounts.Signup(ctx, ports.SignupInput{
		Email:            in.Body.Email,
		Password:         in.Body.Password,
		OrganizationName: in.Body.OrganizationName,
	})
	if err != nil {
		return nil, err
	}
	return &body[signupResponse]{signupResponse{
		UserID:         res.UserID,
		OrganizationID: res.OrganizationID,
		AccessToken:    res.Tokens.AccessToken,
		RefreshToken:   res.Tokens.RefreshToken,
	}}, nil
}

func (s *Server) login(ctx context.Context, in *body[loginRequest]) (*body[tokenPair], error) {
	pair, err := s.core.Accounts.Login(ctx, ports.LoginInput{
		Email:    in.Body.Email,
		Password: in.Body.Password,
		TOTP:     in.Body.TOTP,
		OrgID:    canonicalUUID(in.Body.OrgID),
	})
	if err != nil {
		return nil, err
	}
	return &body[tokenPair]{tokenPair{pair.AccessToken, pair.RefreshToken}}, nil
}

func (s *Server) refresh(ctx context.Context, in *body[refreshRequest]) (*body[tokenPair], error) {
	pair, err := s.core.Accounts.Refresh(ctx, in.Body.RefreshToken)
	if err != nil {
		return nil, err
	}
	return &body[tokenPair]{tokenPair{pair.AccessToken, pair.RefreshToken}}, nil
}

func (s *Server) logout(ctx context.Context, in *body[refreshRequest]) (*body[logoutResponse], error) {
	if err := s.core.Accounts.Logout(ctx, in.Body.RefreshToken); err != nil {
		return nil, err
	}
	return &body[logoutResponse]{logoutResponse{Revoked: true}}, nil
}

func (s *Server) enrollTOTP(ctx context.Context, in *body[enrollTOTPRequest]) (*body[enrollmentResponse], error) {
	e, err := s.core.Accounts.EnrollTOTP(ctx, principalFrom(ctx), in.Body.Password)
	if err != nil {
		return nil, err
	}
	return &body[enrollmentResponse]{enrollmentResponse{Secret: e.Secret, OTPAuthURL: e.OTPAuthURL}}, nil
}

func (s *Server) verifyTOTP(ctx context.Context, in *body[verifyTOTPRequest]) (*body[enabledResponse], error) {
	if err := s.core.Accounts.VerifyTOTP(ctx, principalFrom(ctx), in.Body.Code); err != nil {
		return nil, err
	}
	return &body[enabledResponse]{enabledResponse{Enabled: true}}, nil
}

// canonicalUUID rewrites the spellings huma's uuid format accepts (braces, urn:uuid:, no hyphens) to the
// canonical form the core and store expect; empty stays empty.
func canonicalUUID(s string) string {
	if s == "" {
		return ""
	}
	if u, err := uuid.Parse(s); err == nil {
		return u.String()
	}
	return s
}

// utc renders timestamps with an explicit offset (Z) whatever zone the core's clock or driver used.
//
// Times are cut to microseconds, PostgreSQL's precision, so a value rendered straight after a change reads
// the same as when it is read back later.
func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// utcPtr keeps nil as nil so unset timestamps render as null.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := utc(*t)
	return &u
}
