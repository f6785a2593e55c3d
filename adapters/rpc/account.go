package rpc

import (
	"github.com/postmill/postmill/ports"

	accountv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1"
)

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
	}
}
