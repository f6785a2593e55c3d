package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	credentialv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1/credentialv1connect"
)

func init() {
	register(
		portService(func(c *ports.Core) *ports.APIKeyService { return &c.APIKeys },
			credentialv1connect.NewAPIKeyServiceHandler, newAPIKeyServer,
			credentialv1connect.NewAPIKeyServiceClient, newAPIKeyClient).
			calledBy(credentialv1connect.APIKeyServiceName, TierEdge),
		portService(func(c *ports.Core) *ports.SMTPCredentialService { return &c.SMTPCredentials },
			credentialv1connect.NewSMTPCredentialServiceHandler, newSMTPCredentialServer,
			credentialv1connect.NewSMTPCredentialServiceClient, newSMTPCredentialClient).
			calledBy(credentialv1connect.SMTPCredentialServiceName, TierEdge),
	)
}

// apiKeyServer serves postmill.credential.v1.APIKeyService from a ports.APIKeyService.
type apiKeyServer struct {
	svc ports.APIKeyService
	log *slog.Logger
}

func newAPIKeyServer(svc ports.APIKeyService, log *slog.Logger) credentialv1connect.APIKeyServiceHandler {
	return &apiKeyServer{svc: svc, log: log}
}

func (s *apiKeyServer) ListAPIKeys(ctx context.Context, req *connect.Request[credentialv1.ListAPIKeysRequest]) (*connect.Response[credentialv1.ListAPIKeysResponse], error) {
	keys, err := s.svc.ListAPIKeys(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *credentialv1.ListAPIKeysResponse {
		return &credentialv1.ListAPIKeysResponse{ApiKeys: apiKeysToProto(keys)}
	})
}

func (s *apiKeyServer) CreateAPIKey(ctx context.Context, req *connect.Request[credentialv1.CreateAPIKeyRequest]) (*connect.Response[credentialv1.CreateAPIKeyResponse], error) {
	m := req.Msg
	k, err := s.svc.CreateAPIKey(ctx, m.GetOrganizationId(), m.GetName(), credentialScopesFromProto(m.GetScopes()))
	return respond(ctx, s.log, req, err, func() *credentialv1.CreateAPIKeyResponse {
		return &credentialv1.CreateAPIKeyResponse{ApiKey: apiKeyToProto(k.APIKey), Token: k.Token}
	})
}

func (s *apiKeyServer) RevokeAPIKey(ctx context.Context, req *connect.Request[credentialv1.RevokeAPIKeyRequest]) (*connect.Response[credentialv1.RevokeAPIKeyResponse], error) {
	err := s.svc.RevokeAPIKey(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[credentialv1.RevokeAPIKeyResponse])
}

// smtpCredentialServer serves postmill.credential.v1.SMTPCredentialService from a
// ports.SMTPCredentialService.
type smtpCredentialServer struct {
	svc ports.SMTPCredentialService
	log *slog.Logger
}

func newSMTPCredentialServer(svc ports.SMTPCredentialService, log *slog.Logger) credentialv1connect.SMTPCredentialServiceHandler {
	return &smtpCredentialServer{svc: svc, log: log}
}

func (s *smtpCredentialServer) CreateSMTPCredential(ctx context.Context, req *connect.Request[credentialv1.CreateSMTPCredentialRequest]) (*connect.Response[credentialv1.CreateSMTPCredentialResponse], error) {
	c, err := s.svc.CreateSMTPCredential(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *credentialv1.CreateSMTPCredentialResponse {
		return &credentialv1.CreateSMTPCredentialResponse{
			SmtpCredential: smtpCredentialToProto(c.SMTPCredential),
			Password:       c.Password,
		}
	})
}

func (s *smtpCredentialServer) ListSMTPCredentials(ctx context.Context, req *connect.Request[credentialv1.ListSMTPCredentialsRequest]) (*connect.Response[credentialv1.ListSMTPCredentialsResponse], error) {
	creds, err := s.svc.ListSMTPCredentials(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *credentialv1.ListSMTPCredentialsResponse {
		return &credentialv1.ListSMTPCredentialsResponse{SmtpCredentials: smtpCredentialsToProto(creds)}
	})
}

func (s *smtpCredentialServer) DeleteSMTPCredential(ctx context.Context, req *connect.Request[credentialv1.DeleteSMTPCredentialRequest]) (*connect.Response[credentialv1.DeleteSMTPCredentialResponse], error) {
	err := s.svc.DeleteSMTPCredential(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[credentialv1.DeleteSMTPCredentialResponse])
}

// apiKeyClient implements ports.APIKeyService over postmill.credential.v1.APIKeyService.
type apiKeyClient struct {
	conn credentialv1connect.APIKeyServiceClient
}

func newAPIKeyClient(conn credentialv1connect.APIKeyServiceClient) ports.APIKeyService {
	return &apiKeyClient{conn: conn}
}

func (c *apiKeyClient) ListAPIKeys(ctx context.Context, orgID string) ([]ports.APIKey, error) {
	return call(ctx, credentialv1connect.APIKeyServiceListAPIKeysProcedure, c.conn.ListAPIKeys,
		&credentialv1.ListAPIKeysRequest{OrganizationId: orgID},
		pick((*credentialv1.ListAPIKeysResponse).GetApiKeys, apiKeysFromProto))
}

func (c *apiKeyClient) CreateAPIKey(ctx context.Context, orgID, name string, scopes []string) (ports.CreatedAPIKey, error) {
	return call(ctx, credentialv1connect.APIKeyServiceCreateAPIKeyProcedure, c.conn.CreateAPIKey, &credentialv1.CreateAPIKeyRequest{
		OrganizationId: orgID,
		Name:           name,
		Scopes:         credentialScopesToProto(scopes),
	}, func(m *credentialv1.CreateAPIKeyResponse) ports.CreatedAPIKey {
		return ports.CreatedAPIKey{APIKey: apiKeyFromProto(m.GetApiKey()), Token: m.GetToken()}
	})
}

func (c *apiKeyClient) RevokeAPIKey(ctx context.Context, orgID, id string) error {
	return exec(ctx, credentialv1connect.APIKeyServiceRevokeAPIKeyProcedure, c.conn.RevokeAPIKey,
		&credentialv1.RevokeAPIKeyRequest{OrganizationId: orgID, Id: id})
}

// smtpCredentialClient implements ports.SMTPCredentialService over
// postmill.credential.v1.SMTPCredentialService.
type smtpCredentialClient struct {
	conn credentialv1connect.SMTPCredentialServiceClient
}

func newSMTPCredentialClient(conn credentialv1connect.SMTPCredentialServiceClient) ports.SMTPCredentialService {
	return &smtpCredentialClient{conn: conn}
}

func (c *smtpCredentialClient) CreateSMTPCredential(ctx context.Context, orgID string) (ports.CreatedSMTPCredential, error) {
	return call(ctx, credentialv1connect.SMTPCredentialServiceCreateSMTPCredentialProcedure, c.conn.CreateSMTPCredential,
		&credentialv1.CreateSMTPCredentialRequest{OrganizationId: orgID},
		func(m *credentialv1.CreateSMTPCredentialResponse) ports.CreatedSMTPCredential {
			return ports.CreatedSMTPCredential{
				SMTPCredential: smtpCredentialFromProto(m.GetSmtpCredential()),
				Password:       m.GetPassword(),
			}
		})
}

func (c *smtpCredentialClient) ListSMTPCredentials(ctx context.Context, orgID string) ([]ports.SMTPCredential, error) {
	return call(ctx, credentialv1connect.SMTPCredentialServiceListSMTPCredentialsProcedure, c.conn.ListSMTPCredentials,
		&credentialv1.ListSMTPCredentialsRequest{OrganizationId: orgID},
		pick((*credentialv1.ListSMTPCredentialsResponse).GetSmtpCredentials, smtpCredentialsFromProto))
}

func (c *smtpCredentialClient) DeleteSMTPCredential(ctx context.Context, orgID, id string) error {
	return exec(ctx, credentialv1connect.SMTPCredentialServiceDeleteSMTPCredentialProcedure, c.conn.DeleteSMTPCredential,
		&credentialv1.DeleteSMTPCredentialRequest{OrganizationId: orgID, Id: id})
}

// TokenHash and PasswordHash have no wire field and are dropped on the way out.

func credentialScopesToProto(scopes []string) *credentialv1.ScopeList {
	if scopes == nil {
		return nil
	}
	return &credentialv1.ScopeList{Values: scopes}
}

func credentialScopesFromProto(l *credentialv1.ScopeList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func apiKeyToProto(k ports.APIKey) *credentialv1.APIKey {
	return &credentialv1.APIKey{
		Id:             k.ID,
		OrganizationId: k.OrganizationID,
		Name:           k.Name,
		Prefix:         k.Prefix,
		Scopes:         credentialScopesToProto(k.Scopes),
		ScopesEnforced: k.ScopesEnforced,
		LastUsedAt:     timePtrToProto(k.LastUsedAt),
		RevokedAt:      timePtrToProto(k.RevokedAt),
		CreatedAt:      timeToProto(k.CreatedAt),
	}
}

func apiKeyFromProto(k *credentialv1.APIKey) ports.APIKey {
	return ports.APIKey{
		ID:             k.GetId(),
		OrganizationID: k.GetOrganizationId(),
		Name:           k.GetName(),
		Prefix:         k.GetPrefix(),
		Scopes:         credentialScopesFromProto(k.GetScopes()),
		ScopesEnforced: k.GetScopesEnforced(),
		LastUsedAt:     timePtrFromProto(k.GetLastUsedAt()),
		RevokedAt:      timePtrFromProto(k.GetRevokedAt()),
		CreatedAt:      timeFromProto(k.GetCreatedAt()),
	}
}

func apiKeysToProto(keys []ports.APIKey) *credentialv1.APIKeyList {
	if keys == nil {
		return nil
	}
	return &credentialv1.APIKeyList{Items: mapItems(keys, apiKeyToProto)}
}

func apiKeysFromProto(l *credentialv1.APIKeyList) []ports.APIKey {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), apiKeyFromProto)
}

func smtpCredentialToProto(c ports.SMTPCredential) *credentialv1.SMTPCredential {
	return &credentialv1.SMTPCredential{
		Id:             c.ID,
		OrganizationId: c.OrganizationID,
		Username:       c.Username,
		Host:           c.Host,
		Port:           int64(c.Port),
		CreatedAt:      timeToProto(c.CreatedAt),
	}
}

func smtpCredentialFromProto(c *credentialv1.SMTPCredential) ports.SMTPCredential {
	return ports.SMTPCredential{
		ID:             c.GetId(),
		OrganizationID: c.GetOrganizationId(),
		Username:       c.GetUsername(),
		Host:           c.GetHost(),
		Port:           int(c.GetPort()),
		CreatedAt:      timeFromProto(c.GetCreatedAt()),
	}
}

func smtpCredentialsToProto(creds []ports.SMTPCredential) *credentialv1.SMTPCredentialList {
	if creds == nil {
		return nil
	}
	return &credentialv1.SMTPCredentialList{Items: mapItems(creds, smtpCredentialToProto)}
}

func smtpCredentialsFromProto(l *credentialv1.SMTPCredentialList) []ports.SMTPCredential {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), smtpCredentialFromProto)
}
