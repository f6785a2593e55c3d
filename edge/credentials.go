package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

type apiKeyResponse struct {
	ID             string     `json:"id" format:"uuid" doc:"API key id; what DELETE takes"`
	Name           string     `json:"name" doc:"Label given at creation"`
	Prefix         string     `json:"prefix" doc:"16 hex characters, the public part of the token"`
	Scopes         []string   `json:"scopes" nullable:"false" doc:"Scopes the key holds; * grants every route"`
	ScopesEnforced bool       `json:"scopesEnforced" doc:"Whether routes check the key's scopes; every key created now is enforced"`
	LastUsedAt     *time.Time `json:"lastUsedAt" doc:"Last successful authentication; null if never used"`
	RevokedAt      *time.Time `json:"revokedAt" doc:"When the key was revoked; null while it works"`
	CreatedAt      time.Time  `json:"createdAt" doc:"When the key was created"`
}

// createdAPIKeyResponse repeats apiKeyResponse's fields rather than embedding it: huma documents only
// exported embedded types, and the create answer must be documented in full.
type createdAPIKeyResponse struct {
	ID             string     `json:"id" format:"uuid" doc:"API key id; what DELETE takes"`
	Name           string     `json:"name" doc:"Label given at creation"`
	Prefix         string     `json:"prefix" doc:"16 hex characters, the public part of the token"`
	Scopes         []string   `json:"scopes" nullable:"false" doc:"Scopes the key holds; * grants every route"`
	ScopesEnforced bool       `json:"scopesEnforced" doc:"Whether routes check the key's scopes; every key created now is enforced"`
	LastUsedAt     *time.Time `json:"lastUsedAt" doc:"null: the key has not been used yet"`
	RevokedAt      *time.Time `json:"revokedAt" doc:"null: the key is active"`
	CreatedAt      time.Time  `json:"createdAt" doc:"When the key was created"`
	Token          string     `json:"token" doc:"The plaintext key; shown only in this response"`
}

type createAPIKeyRequest struct {
	_    struct{} `json:"-" additionalProperties:"true"`
	Name string   `json:"name" minLength:"1" maxLength:"100" doc:"Label, 1-100 characters"`
	// Scopes stays nil when absent so the core applies ports.DefaultScopes.
	Scopes []string `json:"scopes,omitempty" doc:"Scopes from the vocabulary of SPEC §5, or *; default [emails:send]"`
}

type idPath struct {
	ID string `path:"id" format:"uuid" doc:"Resource id"`
}

type revokedResponse struct {
	Revoked bool `json:"revoked" doc:"true: the key no longer authenticates"`
}

type smtpCredentialResponse struct {
	ID        string    `json:"id" format:"uuid" doc:"Credential id; what DELETE takes"`
	Username  string    `json:"username" doc:"Generated SMTP username (pm_ and 20 hex characters)"`
	Host      string    `json:"host" doc:"SMTP submission host"`
	Port      int       `json:"port" doc:"SMTP submission port"`
	CreatedAt time.Time `json:"createdAt" doc:"When the credential was created"`
}

type createdSMTPCredentialResponse struct {
	ID        string    `json:"id" format:"uuid" doc:"Credential id; what DELETE takes"`
	Username  string    `json:"username" doc:"Generated SMTP username (pm_ and 20 hex characters)"`
	Password  string    `json:"password" doc:"Shown only in this response"`
	Host      string    `json:"host" doc:"SMTP submission host"`
	Port      int       `json:"port" doc:"SMTP submission port"`
	CreatedAt time.Time `json:"createdAt" doc:"When the credential was created"`
}

type createSMTPCredentialRequest struct {
	_    struct{} `json:"-" additionalProperties:"true"`
	Name string   `json:"name,omitempty" doc:"Accepted and ignored: usernames are generated"`
}

type deletedResponse struct {
	Deleted bool `json:"deleted" doc:"true when the resource was deleted"`
}

func (s *Server) registerCredentialRoutes() {
	session := access{kind: authSession}

	register(s, huma.Operation{
		OperationID: "list-api-keys", Method: http.MethodGet, Path: "/v1/api-keys",
		Tags: []string{tagAPIKeys}, Summary: "List API keys",
		Description: "The organization's keys, newest first; metadata only, never the token or its hash.",
	}, session, s.listAPIKeys)

	register(s, huma.Operation{
		OperationID: "create-api-key", Method: http.MethodPost, Path: "/v1/api-keys", DefaultStatus: http.StatusCreated,
		Tags: []string{tagAPIKeys}, Summary: "Create an API key",
		Description: "Issues a key; the plaintext token is returned once, in this response. An organization " +
			"holding as many keys that are not revoked as the deployment allows (100 unless the operator raised " +
			"POSTMILL_MAX_API_KEYS_PER_ORG) gets 403 resource_limit_reached; revoking a key makes room.",
	}, session, s.createAPIKey, http.StatusBadRequest, http.StatusForbidden)

	register(s, huma.Operation{
		OperationID: "revoke-api-key", Method: http.MethodDelete, Path: "/v1/api-keys/{id}",
		Tags: []string{tagAPIKeys}, Summary: "Revoke an API key",
		Description: "Revokes the key immediately.",
	}, session, s.revokeAPIKey, http.StatusBadRequest, http.StatusNotFound)

	register(s, huma.Operation{
		OperationID: "create-smtp-credential", Method: http.MethodPost, Path: "/v1/smtp-credentials",
		DefaultStatus: http.StatusCreated,
		Tags:          []string{tagSMTP}, Summary: "Create an SMTP credential",
		Description: "Generates a username and password for SMTP submission; the password is returned once.",
	}, session, s.createSMTPCredential, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "list-smtp-credentials", Method: http.MethodGet, Path: "/v1/smtp-credentials",
		Tags: []string{tagSMTP}, Summary: "List SMTP credentials",
		Description: "The organization's credentials, newest first, without passwords.",
	}, session, s.listSMTPCredentials)

	register(s, huma.Operation{
		OperationID: "delete-smtp-credential", Method: http.MethodDelete, Path: "/v1/smtp-credentials/{id}",
		Tags: []string{tagSMTP}, Summary: "Delete an SMTP credential",
	}, session, s.deleteSMTPCredential, http.StatusBadRequest, http.StatusNotFound)
}

func toAPIKey(k ports.APIKey) apiKeyResponse {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return apiKeyResponse{
		ID:             k.ID,
		Name:           k.Name,
		Prefix:         k.Prefix,
		Scopes:         scopes,
		ScopesEnforced: k.ScopesEnforced,
		LastUsedAt:     utcPtr(k.LastUsedAt),
		RevokedAt:      utcPtr(k.RevokedAt),
		CreatedAt:      utc(k.CreatedAt),
	}
}

func (s *Server) listAPIKeys(ctx context.Context, _ *struct{}) (*body[[]apiKeyResponse], error) {
	keys, err := s.core.APIKeys.ListAPIKeys(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make([]apiKeyResponse, 0, len(keys))
	for _, k := range keys {
		out = append(out, toAPIKey(k))
	}
	return &body[[]apiKeyResponse]{out}, nil
}

func (s *Server) createAPIKey(ctx context.Context, in *body[createAPIKeyRequest]) (*body[createdAPIKeyResponse], error) {
	k, err := s.core.APIKeys.CreateAPIKey(ctx, principalFrom(ctx).OrganizationID, in.Body.Name, in.Body.Scopes)
	if err != nil {
		return nil, err
	}
	m := toAPIKey(k.APIKey)
	return &body[createdAPIKeyResponse]{createdAPIKeyResponse{
		ID: m.ID, Name: m.Name, Prefix: m.Prefix, Scopes: m.Scopes, ScopesEnforced: m.ScopesEnforced,
		LastUsedAt: m.LastUsedAt, RevokedAt: m.RevokedAt, CreatedAt: m.CreatedAt, Token: k.Token,
	}}, nil
}

func (s *Server) revokeAPIKey(ctx context.Context, in *idPath) (*body[revokedResponse], error) {
	if err := s.core.APIKeys.RevokeAPIKey(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[revokedResponse]{revokedResponse{Revoked: true}}, nil
}

func (s *Server) createSMTPCredential(ctx context.Context, _ *struct {
	Body *createSMTPCredentialRequest
}) (*body[createdSMTPCredentialResponse], error) {
	c, err := s.core.SMTPCredentials.CreateSMTPCredential(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	return &body[createdSMTPCredentialResponse]{createdSMTPCredentialResponse{
		ID:        c.ID,
		Username:  c.Username,
		Password:  c.Password,
		Host:      c.Host,
		Port:      c.Port,
		CreatedAt: utc(c.CreatedAt),
	}}, nil
}

func (s *Server) listSMTPCredentials(ctx context.Context, _ *struct{}) (*body[[]smtpCredentialResponse], error) {
	creds, err := s.core.SMTPCredentials.ListSMTPCredentials(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make([]smtpCredentialResponse, 0, len(creds))
	for _, c := range creds {
		out = append(out, smtpCredentialResponse{
			ID:        c.ID,
			Username:  c.Username,
			Host:      c.Host,
			Port:      c.Port,
			CreatedAt: utc(c.CreatedAt),
		})
	}
	return &body[[]smtpCredentialResponse]{out}, nil
}

func (s *Server) deleteSMTPCredential(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.SMTPCredentials.DeleteSMTPCredential(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}
