package rpc

import (
	"github.com/postmill/postmill/ports"

	credentialv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1"
)

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
