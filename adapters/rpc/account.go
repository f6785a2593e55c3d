package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	accountv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1/accountv1connect"
)

func init() {
	register(
		portService(func(c *ports.Core) *ports.AccountService { return &c.Accounts },
			accountv1connect.NewAccountServiceHandler, newAccountServer,
			accountv1connect.NewAccountServiceClient, newAccountClient).
			calledBy(accountv1connect.AccountServiceName, TierEdge),
		portService(func(c *ports.Core) *ports.AuthService { return &c.Auth },
			accountv1connect.NewAuthServiceHandler, newAuthServer,
			accountv1connect.NewAuthServiceClient, newAuthClient).
			calledBy(accountv1connect.AuthServiceName, TierEdge),
	)
}

// accountServer serves postmill.account.v1.AccountService from a ports.AccountService.
type accountServer struct {
	svc ports.AccountService
	log *slog.Logger
}

func newAccountServer(svc ports.AccountService, log *slog.Logger) accountv1connect.AccountServiceHandler {
	return &accountServer{svc: svc, log: log}
}

func (s *accountServer) Signup(ctx context.Context, req *connect.Request[accountv1.SignupRequest]) (*connect.Response[accountv1.SignupResponse], error) {
	m := req.Msg
	res, err := s.svc.Signup(ctx, ports.SignupInput{
		Email:            m.GetEmail(),
		Password:         m.GetPassword(),
		OrganizationName: m.GetOrganizationName(),
	})
	return respond(ctx, s.log, req, err, func() *accountv1.SignupResponse {
		return &accountv1.SignupResponse{
			UserId:         res.UserID,
			OrganizationId: res.OrganizationID,
			Tokens:         tokenPairToProto(res.Tokens),
		}
	})
}

func (s *accountServer) Login(ctx context.Context, req *connect.Request[accountv1.LoginRequest]) (*connect.Response[accountv1.LoginResponse], error) {
	m := req.Msg
	tokens, err := s.svc.Login(ctx, ports.LoginInput{
		Email:    m.GetEmail(),
		Password: m.GetPassword(),
		TOTP:     m.GetTotp(),
		OrgID:    m.GetOrgId(),
	})
	return respond(ctx, s.log, req, err, func() *accountv1.LoginResponse {
		return &accountv1.LoginResponse{Tokens: tokenPairToProto(tokens)}
	})
}

func (s *accountServer) Refresh(ctx context.Context, req *connect.Request[accountv1.RefreshRequest]) (*connect.Response[accountv1.RefreshResponse], error) {
	tokens, err := s.svc.Refresh(ctx, req.Msg.GetRefreshToken())
	return respond(ctx, s.log, req, err, func() *accountv1.RefreshResponse {
		return &accountv1.RefreshResponse{Tokens: tokenPairToProto(tokens)}
	})
}

func (s *accountServer) Logout(ctx context.Context, req *connect.Request[accountv1.LogoutRequest]) (*connect.Response[accountv1.LogoutResponse], error) {
	err := s.svc.Logout(ctx, req.Msg.GetRefreshToken())
	return respond(ctx, s.log, req, err, empty[accountv1.LogoutResponse])
}

func (s *accountServer) EnrollTOTP(ctx context.Context, req *connect.Request[accountv1.EnrollTOTPRequest]) (*connect.Response[accountv1.EnrollTOTPResponse], error) {
	e, err := s.svc.EnrollTOTP(ctx, principalFromProto(req.Msg.GetPrincipal()), req.Msg.GetPassword())
	return respond(ctx, s.log, req, err, func() *accountv1.EnrollTOTPResponse {
		return &accountv1.EnrollTOTPResponse{Secret: e.Secret, OtpAuthUrl: e.OTPAuthURL}
	})
}

func (s *accountServer) VerifyTOTP(ctx context.Context, req *connect.Request[accountv1.VerifyTOTPRequest]) (*connect.Response[accountv1.VerifyTOTPResponse], error) {
	err := s.svc.VerifyTOTP(ctx, principalFromProto(req.Msg.GetPrincipal()), req.Msg.GetCode())
	return respond(ctx, s.log, req, err, empty[accountv1.VerifyTOTPResponse])
}

// authServer serves postmill.account.v1.AuthService from a ports.AuthService.
type authServer struct {
	svc ports.AuthService
	log *slog.Logger
}

func newAuthServer(svc ports.AuthService, log *slog.Logger) accountv1connect.AuthServiceHandler {
	return &authServer{svc: svc, log: log}
}

func (s *authServer) AuthenticateAPIKey(ctx context.Context, req *connect.Request[accountv1.AuthenticateAPIKeyRequest]) (*connect.Response[accountv1.AuthenticateAPIKeyResponse], error) {
	p, err := s.svc.AuthenticateAPIKey(ctx, req.Msg.GetToken())
	return respond(ctx, s.log, req, err, func() *accountv1.AuthenticateAPIKeyResponse {
		return &accountv1.AuthenticateAPIKeyResponse{Principal: principalToProto(p)}
	})
}

func (s *authServer) AuthenticateSession(ctx context.Context, req *connect.Request[accountv1.AuthenticateSessionRequest]) (*connect.Response[accountv1.AuthenticateSessionResponse], error) {
	p, err := s.svc.AuthenticateSession(ctx, req.Msg.GetToken())
	return respond(ctx, s.log, req, err, func() *accountv1.AuthenticateSessionResponse {
		return &accountv1.AuthenticateSessionResponse{Principal: principalToProto(p)}
	})
}

func (s *authServer) AuthenticateSMTP(ctx context.Context, req *connect.Request[accountv1.AuthenticateSMTPRequest]) (*connect.Response[accountv1.AuthenticateSMTPResponse], error) {
	p, err := s.svc.AuthenticateSMTP(ctx, req.Msg.GetUsername(), req.Msg.GetPassword())
	return respond(ctx, s.log, req, err, func() *accountv1.AuthenticateSMTPResponse {
		return &accountv1.AuthenticateSMTPResponse{Principal: principalToProto(p)}
	})
}

// accountClient implements ports.AccountService over postmill.account.v1.AccountService.
type accountClient struct {
	conn accountv1connect.AccountServiceClient
}

func newAccountClient(conn accountv1connect.AccountServiceClient) ports.AccountService {
	return &accountClient{conn: conn}
}

func (c *accountClient) Signup(ctx context.Context, in ports.SignupInput) (ports.SignupResult, error) {
	return call(ctx, accountv1connect.AccountServiceSignupProcedure, c.conn.Signup, &accountv1.SignupRequest{
		Email:            in.Email,
		Password:         in.Password,
		OrganizationName: in.OrganizationName,
	}, func(m *accountv1.SignupResponse) ports.SignupResult {
		return ports.SignupResult{
			UserID:         m.GetUserId(),
			OrganizationID: m.GetOrganizationId(),
			Tokens:         tokenPairFromProto(m.GetTokens()),
		}
	})
}

func (c *accountClient) Login(ctx context.Context, in ports.LoginInput) (ports.TokenPair, error) {
	return call(ctx, accountv1connect.AccountServiceLoginProcedure, c.conn.Login, &accountv1.LoginRequest{
		Email:    in.Email,
		Password: in.Password,
		Totp:     in.TOTP,
		OrgId:    in.OrgID,
	}, pick((*accountv1.LoginResponse).GetTokens, tokenPairFromProto))
}

func (c *accountClient) Refresh(ctx context.Context, refreshToken string) (ports.TokenPair, error) {
	return call(ctx, accountv1connect.AccountServiceRefreshProcedure, c.conn.Refresh,
		&accountv1.RefreshRequest{RefreshToken: refreshToken},
		pick((*accountv1.RefreshResponse).GetTokens, tokenPairFromProto))
}

func (c *accountClient) Logout(ctx context.Context, refreshToken string) error {
	return exec(ctx, accountv1connect.AccountServiceLogoutProcedure, c.conn.Logout,
		&accountv1.LogoutRequest{RefreshToken: refreshToken})
}

func (c *accountClient) EnrollTOTP(ctx context.Context, p ports.Principal, password string) (ports.TOTPEnrollment, error) {
	return call(ctx, accountv1connect.AccountServiceEnrollTOTPProcedure, c.conn.EnrollTOTP,
		&accountv1.EnrollTOTPRequest{Principal: principalToProto(p), Password: password},
		func(m *accountv1.EnrollTOTPResponse) ports.TOTPEnrollment {
			return ports.TOTPEnrollment{Secret: m.GetSecret(), OTPAuthURL: m.GetOtpAuthUrl()}
		})
}

func (c *accountClient) VerifyTOTP(ctx context.Context, p ports.Principal, code string) error {
	return exec(ctx, accountv1connect.AccountServiceVerifyTOTPProcedure, c.conn.VerifyTOTP,
		&accountv1.VerifyTOTPRequest{Principal: principalToProto(p), Code: code})
}

// authClient implements ports.AuthService over postmill.account.v1.AuthService.
type authClient struct {
	conn accountv1connect.AuthServiceClient
}

func newAuthClient(conn accountv1connect.AuthServiceClient) ports.AuthService {
	return &authClient{conn: conn}
}

func (c *authClient) AuthenticateAPIKey(ctx context.Context, token string) (ports.Principal, error) {
	return call(ctx, accountv1connect.AuthServiceAuthenticateAPIKeyProcedure, c.conn.AuthenticateAPIKey,
		&accountv1.AuthenticateAPIKeyRequest{Token: token},
		pick((*accountv1.AuthenticateAPIKeyResponse).GetPrincipal, principalFromProto))
}

func (c *authClient) AuthenticateSession(ctx context.Context, token string) (ports.Principal, error) {
	return call(ctx, accountv1connect.AuthServiceAuthenticateSessionProcedure, c.conn.AuthenticateSession,
		&accountv1.AuthenticateSessionRequest{Token: token},
		pick((*accountv1.AuthenticateSessionResponse).GetPrincipal, principalFromProto))
}

func (c *authClient) AuthenticateSMTP(ctx context.Context, username, password string) (ports.Principal, error) {
	return call(ctx, accountv1connect.AuthServiceAuthenticateSMTPProcedure, c.conn.AuthenticateSMTP,
		&accountv1.AuthenticateSMTPRequest{Username: username, Password: password},
		pick((*accountv1.AuthenticateSMTPResponse).GetPrincipal, principalFromProto))
}

func accountScopesToProto(scopes []string) *accountv1.ScopeList {
	if scopes == nil {
		return nil
	}
	return &accountv1.ScopeList{Values: scopes}
}

func accountScopesFromProto(l *accountv1.ScopeList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func tokenPairToProto(t ports.TokenPair) *accountv1.TokenPair {
	return &accountv1.TokenPair{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken}
}

func tokenPairFromProto(t *accountv1.TokenPair) ports.TokenPair {
	return ports.TokenPair{AccessToken: t.GetAccessToken(), RefreshToken: t.GetRefreshToken()}
}

func principalToProto(p ports.Principal) *accountv1.Principal {
	return &accountv1.Principal{
		Kind:           string(p.Kind),
		OrganizationId: p.OrganizationID,
		UserId:         p.UserID,
		IsAdmin:        p.IsAdmin,
		ApiKeyId:       p.APIKeyID,
		Scopes:         accountScopesToProto(p.Scopes),
		ScopesEnforced: p.ScopesEnforced,
		TwoFactor:      p.TwoFactor,
	}
}

func principalFromProto(p *accountv1.Principal) ports.Principal {
	return ports.Principal{
		Kind:           ports.PrincipalKind(p.GetKind()),
		OrganizationID: p.GetOrganizationId(),
		UserID:         p.GetUserId(),
		IsAdmin:        p.GetIsAdmin(),
		APIKeyID:       p.GetApiKeyId(),
		Scopes:         accountScopesFromProto(p.GetScopes()),
		ScopesEnforced: p.GetScopesEnforced(),
		TwoFactor:      p.GetTwoFactor(),
	}
}
