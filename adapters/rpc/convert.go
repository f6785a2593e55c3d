package rpc

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/postmill/postmill/ports"

	accountv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1"
	credentialv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1"
	organizationv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1"
	ratelimitv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1"
)

// Conversions between ports values and their wire messages. Each pair is exact inverses on everything
// the wire carries: a zero time.Time travels as an unset Timestamp, a nil *time.Time likewise, and a nil
// slice as an unset list wrapper, so nil, empty and set all come back as they left. Go ints travel as
// int64. TokenHash and PasswordHash have no wire field and are dropped on the way out.

func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeFromProto(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func timePtrToProto(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func timePtrFromProto(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func durationToProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func durationFromProto(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// cloneStrings copies a wire list into a slice that is non-nil even when empty: the caller has already
// decided, from the wrapper's presence, that the value is not nil.
func cloneStrings(in []string) []string {
	return append(make([]string, 0, len(in)), in...)
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
	l := &credentialv1.APIKeyList{Items: make([]*credentialv1.APIKey, 0, len(keys))}
	for _, k := range keys {
		l.Items = append(l.Items, apiKeyToProto(k))
	}
	return l
}

func apiKeysFromProto(l *credentialv1.APIKeyList) []ports.APIKey {
	if l == nil {
		return nil
	}
	keys := make([]ports.APIKey, 0, len(l.GetItems()))
	for _, k := range l.GetItems() {
		keys = append(keys, apiKeyFromProto(k))
	}
	return keys
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
	l := &credentialv1.SMTPCredentialList{Items: make([]*credentialv1.SMTPCredential, 0, len(creds))}
	for _, c := range creds {
		l.Items = append(l.Items, smtpCredentialToProto(c))
	}
	return l
}

func smtpCredentialsFromProto(l *credentialv1.SMTPCredentialList) []ports.SMTPCredential {
	if l == nil {
		return nil
	}
	creds := make([]ports.SMTPCredential, 0, len(l.GetItems()))
	for _, c := range l.GetItems() {
		creds = append(creds, smtpCredentialFromProto(c))
	}
	return creds
}

func planToProto(p ports.Plan) *organizationv1.Plan {
	return &organizationv1.Plan{MonthlyLimit: p.MonthlyLimit, WarmupCap: p.WarmupCap}
}

func planFromProto(p *organizationv1.Plan) ports.Plan {
	return ports.Plan{MonthlyLimit: p.GetMonthlyLimit(), WarmupCap: p.GetWarmupCap()}
}

func organizationToProto(o ports.Organization) *organizationv1.Organization {
	return &organizationv1.Organization{
		Id:        o.ID,
		Name:      o.Name,
		Slug:      o.Slug,
		CreatedAt: timeToProto(o.CreatedAt),
		Paused:    o.Paused,
		Plan:      planToProto(o.Plan),
	}
}

func organizationFromProto(o *organizationv1.Organization) ports.Organization {
	return ports.Organization{
		ID:        o.GetId(),
		Name:      o.GetName(),
		Slug:      o.GetSlug(),
		CreatedAt: timeFromProto(o.GetCreatedAt()),
		Paused:    o.GetPaused(),
		Plan:      planFromProto(o.GetPlan()),
	}
}

func organizationsToProto(orgs []ports.Organization) *organizationv1.OrganizationList {
	if orgs == nil {
		return nil
	}
	l := &organizationv1.OrganizationList{Items: make([]*organizationv1.Organization, 0, len(orgs))}
	for _, o := range orgs {
		l.Items = append(l.Items, organizationToProto(o))
	}
	return l
}

func organizationsFromProto(l *organizationv1.OrganizationList) []ports.Organization {
	if l == nil {
		return nil
	}
	orgs := make([]ports.Organization, 0, len(l.GetItems()))
	for _, o := range l.GetItems() {
		orgs = append(orgs, organizationFromProto(o))
	}
	return orgs
}

func subscriptionToProto(s ports.Subscription) *organizationv1.Subscription {
	return &organizationv1.Subscription{
		OrganizationId: s.OrganizationID,
		Plan:           planToProto(s.Plan),
		PeriodStart:    timeToProto(s.PeriodStart),
		PeriodEnd:      timeToProto(s.PeriodEnd),
		EmailsSent:     s.EmailsSent,
	}
}

func subscriptionFromProto(s *organizationv1.Subscription) ports.Subscription {
	return ports.Subscription{
		OrganizationID: s.GetOrganizationId(),
		Plan:           planFromProto(s.GetPlan()),
		PeriodStart:    timeFromProto(s.GetPeriodStart()),
		PeriodEnd:      timeFromProto(s.GetPeriodEnd()),
		EmailsSent:     s.GetEmailsSent(),
	}
}

func rateDecisionToProto(d ports.RateDecision) *ratelimitv1.RateDecision {
	return &ratelimitv1.RateDecision{
		Allowed:    d.Allowed,
		Count:      int64(d.Count),
		Limit:      int64(d.Limit),
		RetryAfter: durationToProto(d.RetryAfter),
	}
}

func rateDecisionFromProto(d *ratelimitv1.RateDecision) ports.RateDecision {
	return ports.RateDecision{
		Allowed:    d.GetAllowed(),
		Count:      int(d.GetCount()),
		Limit:      int(d.GetLimit()),
		RetryAfter: durationFromProto(d.GetRetryAfter()),
	}
}
