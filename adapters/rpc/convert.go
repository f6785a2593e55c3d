package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/postmill/postmill/ports"

	accountv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1"
	credentialv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1"
	deliverabilityv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1"
	deliveryv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1"
	domainv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1"
	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	organizationv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1"
	ratelimitv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1"
	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
	webhookv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1"
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
	return &organizationv1.OrganizationList{Items: mapItems(orgs, organizationToProto)}
}

func organizationsFromProto(l *organizationv1.OrganizationList) []ports.Organization {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), organizationFromProto)
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

// Sending: domains, emails and delivery. The same rules hold: nil slices and maps travel as unset
// wrappers, nil []byte as an unset optional field, nil *time.Time and zero time.Time as unset Timestamps.
// Domain.DKIMPrivateKey and StoredAttachment.Key have no field in the domain and email schemas and are
// dropped on the way out; the delivery schema carries both, because the MTA signs and attaches.

func stringListToProto(values []string) *emailv1.StringList {
	if values == nil {
		return nil
	}
	return &emailv1.StringList{Values: values}
}

func stringListFromProto(l *emailv1.StringList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func stringMapToProto(m map[string]string) *emailv1.StringMap {
	if m == nil {
		return nil
	}
	return &emailv1.StringMap{Values: m}
}

func stringMapFromProto(m *emailv1.StringMap) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m.GetValues()))
	for k, v := range m.GetValues() {
		out[k] = v
	}
	return out
}

// jsonObjectToProto encodes a JSON object held as a Go map; nil stays nil so that the receiver can tell
// it from an empty object.
func jsonObjectToProto(m map[string]any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return json.Marshal(m)
}

// jsonObjectFromProto decodes what jsonObjectToProto encoded. UseNumber keeps every number exact, as
// json.Number: a float64 would round integers beyond 2^53.
func jsonObjectFromProto(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		// "null" is not what jsonObjectToProto sends for a non-nil map; keep the promise of non-nil.
		m = map[string]any{}
	}
	return m, nil
}

func dnsRecordToProto(r ports.DNSRecord) *domainv1.DNSRecord {
	return &domainv1.DNSRecord{
		Id:        r.ID,
		DomainId:  r.DomainID,
		Type:      r.Type,
		Host:      r.Host,
		Value:     r.Value,
		Ttl:       int64(r.TTL),
		Required:  r.Required,
		Verified:  r.Verified,
		CheckedAt: timePtrToProto(r.CheckedAt),
	}
}

func dnsRecordFromProto(r *domainv1.DNSRecord) ports.DNSRecord {
	return ports.DNSRecord{
		ID:        r.GetId(),
		DomainID:  r.GetDomainId(),
		Type:      r.GetType(),
		Host:      r.GetHost(),
		Value:     r.GetValue(),
		TTL:       int(r.GetTtl()),
		Required:  r.GetRequired(),
		Verified:  r.GetVerified(),
		CheckedAt: timePtrFromProto(r.GetCheckedAt()),
	}
}

func dnsRecordsToProto(records []ports.DNSRecord) *domainv1.DNSRecordList {
	if records == nil {
		return nil
	}
	return &domainv1.DNSRecordList{Items: mapItems(records, dnsRecordToProto)}
}

func dnsRecordsFromProto(l *domainv1.DNSRecordList) []ports.DNSRecord {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), dnsRecordFromProto)
}

// domainToProto leaves DKIMPrivateKey behind: the schema has no field for it.
func domainToProto(d ports.Domain) *domainv1.Domain {
	return &domainv1.Domain{
		Id:             d.ID,
		OrganizationId: d.OrganizationID,
		Name:           d.Name,
		Status:         string(d.Status),
		Region:         d.Region,
		DkimSelector:   d.DKIMSelector,
		DkimPublicKey:  d.DKIMPublicKey,
		VerifiedAt:     timePtrToProto(d.VerifiedAt),
		CreatedAt:      timeToProto(d.CreatedAt),
		Records:        dnsRecordsToProto(d.Records),
		OpenTracking:   d.OpenTracking,
		ClickTracking:  d.ClickTracking,
	}
}

func domainFromProto(d *domainv1.Domain) ports.Domain {
	return ports.Domain{
		ID:             d.GetId(),
		OrganizationID: d.GetOrganizationId(),
		Name:           d.GetName(),
		Status:         ports.DomainStatus(d.GetStatus()),
		Region:         d.GetRegion(),
		DKIMSelector:   d.GetDkimSelector(),
		DKIMPublicKey:  d.GetDkimPublicKey(),
		VerifiedAt:     timePtrFromProto(d.GetVerifiedAt()),
		CreatedAt:      timeFromProto(d.GetCreatedAt()),
		Records:        dnsRecordsFromProto(d.GetRecords()),
		OpenTracking:   d.GetOpenTracking(),
		ClickTracking:  d.GetClickTracking(),
	}
}

// boolPtrCopy copies an optional bool, so that a ports value never points into a wire message or the
// other way round.
func boolPtrCopy(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// trackingSettingsToProto keeps each setting's presence: unset means "leave as it is", false "turn off".
func trackingSettingsToProto(t ports.TrackingSettings) *domainv1.TrackingSettings {
	return &domainv1.TrackingSettings{OpenTracking: boolPtrCopy(t.OpenTracking), ClickTracking: boolPtrCopy(t.ClickTracking)}
}

func trackingSettingsFromProto(t *domainv1.TrackingSettings) ports.TrackingSettings {
	if t == nil {
		return ports.TrackingSettings{}
	}
	return ports.TrackingSettings{OpenTracking: boolPtrCopy(t.OpenTracking), ClickTracking: boolPtrCopy(t.ClickTracking)}
}

func domainsToProto(domains []ports.Domain) *domainv1.DomainList {
	if domains == nil {
		return nil
	}
	return &domainv1.DomainList{Items: mapItems(domains, domainToProto)}
}

func domainsFromProto(l *domainv1.DomainList) []ports.Domain {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), domainFromProto)
}

func templateRefToProto(t *ports.TemplateRef) (*emailv1.TemplateRef, error) {
	if t == nil {
		return nil, nil
	}
	vars, err := jsonObjectToProto(t.Variables)
	if err != nil {
		return nil, fmt.Errorf("template variables: %w", err)
	}
	return &emailv1.TemplateRef{Id: t.ID, VariablesJson: vars}, nil
}

func templateRefFromProto(t *emailv1.TemplateRef) (*ports.TemplateRef, error) {
	if t == nil {
		return nil, nil
	}
	vars, err := jsonObjectFromProto(t.GetVariablesJson())
	if err != nil {
		return nil, fmt.Errorf("template variables: %w", err)
	}
	return &ports.TemplateRef{ID: t.GetId(), Variables: vars}, nil
}

func attachmentsToProto(atts []ports.Attachment) *emailv1.AttachmentList {
	if atts == nil {
		return nil
	}
	l := &emailv1.AttachmentList{Items: make([]*emailv1.Attachment, 0, len(atts))}
	for _, a := range atts {
		l.Items = append(l.Items, &emailv1.Attachment{
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Content:     a.Content,
			Inline:      a.Inline,
			ContentId:   a.ContentID,
		})
	}
	return l
}

func attachmentsFromProto(l *emailv1.AttachmentList) []ports.Attachment {
	if l == nil {
		return nil
	}
	atts := make([]ports.Attachment, 0, len(l.GetItems()))
	for _, a := range l.GetItems() {
		atts = append(atts, ports.Attachment{
			Filename:    a.GetFilename(),
			ContentType: a.GetContentType(),
			Content:     a.GetContent(),
			Inline:      a.GetInline(),
			ContentID:   a.GetContentId(),
		})
	}
	return atts
}

// sendEmailToProto fails only when template variables cannot be encoded as JSON, which ports promises
// they can.
func sendEmailToProto(r ports.SendRequest) (*emailv1.SendEmail, error) {
	tmpl, err := templateRefToProto(r.Template)
	if err != nil {
		return nil, err
	}
	return &emailv1.SendEmail{
		From:           r.From,
		To:             stringListToProto(r.To),
		Cc:             stringListToProto(r.Cc),
		Bcc:            stringListToProto(r.Bcc),
		Subject:        r.Subject,
		Html:           r.HTML,
		Text:           r.Text,
		ReplyTo:        r.ReplyTo,
		Template:       tmpl,
		Attachments:    attachmentsToProto(r.Attachments),
		Headers:        stringMapToProto(r.Headers),
		Tags:           stringMapToProto(r.Tags),
		Metadata:       r.Metadata,
		Sandbox:        r.Sandbox,
		ScheduledAt:    timePtrToProto(r.ScheduledAt),
		IdempotencyKey: r.IdempotencyKey,
	}, nil
}

func sendEmailFromProto(r *emailv1.SendEmail) (ports.SendRequest, error) {
	tmpl, err := templateRefFromProto(r.GetTemplate())
	if err != nil {
		return ports.SendRequest{}, err
	}
	return ports.SendRequest{
		From:           r.GetFrom(),
		To:             stringListFromProto(r.GetTo()),
		Cc:             stringListFromProto(r.GetCc()),
		Bcc:            stringListFromProto(r.GetBcc()),
		Subject:        r.GetSubject(),
		HTML:           r.GetHtml(),
		Text:           r.GetText(),
		ReplyTo:        r.GetReplyTo(),
		Template:       tmpl,
		Attachments:    attachmentsFromProto(r.GetAttachments()),
		Headers:        stringMapFromProto(r.GetHeaders()),
		Tags:           stringMapFromProto(r.GetTags()),
		Metadata:       json.RawMessage(r.GetMetadata()),
		Sandbox:        r.GetSandbox(),
		ScheduledAt:    timePtrFromProto(r.GetScheduledAt()),
		IdempotencyKey: r.GetIdempotencyKey(),
	}, nil
}

func sendEmailsToProto(reqs []ports.SendRequest) (*emailv1.SendEmailList, error) {
	if reqs == nil {
		return nil, nil
	}
	l := &emailv1.SendEmailList{Items: make([]*emailv1.SendEmail, 0, len(reqs))}
	for i, r := range reqs {
		m, err := sendEmailToProto(r)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		l.Items = append(l.Items, m)
	}
	return l, nil
}

func sendEmailsFromProto(l *emailv1.SendEmailList) ([]ports.SendRequest, error) {
	if l == nil {
		return nil, nil
	}
	reqs := make([]ports.SendRequest, 0, len(l.GetItems()))
	for i, m := range l.GetItems() {
		r, err := sendEmailFromProto(m)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

func sendResultToProto(r ports.SendResult) *emailv1.SendResult {
	return &emailv1.SendResult{Id: r.ID, Status: string(r.Status), Deduped: r.Deduped}
}

func sendResultFromProto(r *emailv1.SendResult) ports.SendResult {
	return ports.SendResult{ID: r.GetId(), Status: ports.MessageStatus(r.GetStatus()), Deduped: r.GetDeduped()}
}

func batchResultsToProto(results []ports.BatchItemResult) *emailv1.BatchItemResultList {
	if results == nil {
		return nil
	}
	l := &emailv1.BatchItemResultList{Items: make([]*emailv1.BatchItemResult, 0, len(results))}
	for _, r := range results {
		l.Items = append(l.Items, &emailv1.BatchItemResult{
			Index:  int64(r.Index),
			Result: sendResultToProto(r.Result),
			Error:  batchItemErrorToProto(r.Err),
		})
	}
	return l
}

func batchResultsFromProto(l *emailv1.BatchItemResultList) []ports.BatchItemResult {
	if l == nil {
		return nil
	}
	results := make([]ports.BatchItemResult, 0, len(l.GetItems()))
	for _, r := range l.GetItems() {
		results = append(results, ports.BatchItemResult{
			Index:  int(r.GetIndex()),
			Result: sendResultFromProto(r.GetResult()),
			Err:    batchItemErrorFromProto(r.GetError()),
		})
	}
	return results
}

func recipientToProto(r ports.Recipient) *emailv1.Recipient {
	return &emailv1.Recipient{Id: r.ID, Type: r.Type, Address: r.Address, Status: string(r.Status)}
}

func recipientFromProto(r *emailv1.Recipient) ports.Recipient {
	return ports.Recipient{ID: r.GetId(), Type: r.GetType(), Address: r.GetAddress(), Status: ports.MessageStatus(r.GetStatus())}
}

func recipientsToProto(recipients []ports.Recipient) *emailv1.RecipientList {
	if recipients == nil {
		return nil
	}
	return &emailv1.RecipientList{Items: mapItems(recipients, recipientToProto)}
}

func recipientsFromProto(l *emailv1.RecipientList) []ports.Recipient {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), recipientFromProto)
}

// storedAttachmentsToProto leaves Key behind: the email schema has no field for it.
func storedAttachmentsToProto(atts []ports.StoredAttachment) *emailv1.StoredAttachmentList {
	if atts == nil {
		return nil
	}
	l := &emailv1.StoredAttachmentList{Items: make([]*emailv1.StoredAttachment, 0, len(atts))}
	for _, a := range atts {
		l.Items = append(l.Items, &emailv1.StoredAttachment{
			Id:          a.ID,
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Size:        a.Size,
			Inline:      a.Inline,
			ContentId:   a.ContentID,
		})
	}
	return l
}

func storedAttachmentsFromProto(l *emailv1.StoredAttachmentList) []ports.StoredAttachment {
	if l == nil {
		return nil
	}
	atts := make([]ports.StoredAttachment, 0, len(l.GetItems()))
	for _, a := range l.GetItems() {
		atts = append(atts, ports.StoredAttachment{
			ID:          a.GetId(),
			Filename:    a.GetFilename(),
			ContentType: a.GetContentType(),
			Size:        a.GetSize(),
			Inline:      a.GetInline(),
			ContentID:   a.GetContentId(),
		})
	}
	return atts
}

func eventToProto(e ports.Event) *emailv1.Event {
	return &emailv1.Event{
		Id:               e.ID,
		OrganizationId:   e.OrganizationID,
		Type:             e.Type,
		MessageId:        e.MessageID,
		RecipientId:      e.RecipientID,
		DomainId:         e.DomainID,
		ProviderResponse: e.ProviderResponse,
		OccurredAt:       timeToProto(e.OccurredAt),
		Url:              e.URL,
		LinkId:           e.LinkID,
	}
}

func eventFromProto(e *emailv1.Event) ports.Event {
	return ports.Event{
		ID:               e.GetId(),
		OrganizationID:   e.GetOrganizationId(),
		Type:             e.GetType(),
		MessageID:        e.GetMessageId(),
		RecipientID:      e.GetRecipientId(),
		DomainID:         e.GetDomainId(),
		ProviderResponse: e.ProviderResponse,
		OccurredAt:       timeFromProto(e.GetOccurredAt()),
		URL:              e.GetUrl(),
		LinkID:           e.GetLinkId(),
	}
}

func eventsToProto(events []ports.Event) *emailv1.EventList {
	if events == nil {
		return nil
	}
	return &emailv1.EventList{Items: mapItems(events, eventToProto)}
}

func eventsFromProto(l *emailv1.EventList) []ports.Event {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), eventFromProto)
}

func messageToProto(m ports.Message) *emailv1.Message {
	return &emailv1.Message{
		Id:             m.ID,
		OrganizationId: m.OrganizationID,
		DomainId:       m.DomainID,
		Status:         string(m.Status),
		From:           m.From,
		Subject:        m.Subject,
		Html:           m.HTML,
		Text:           m.Text,
		ReplyTo:        m.ReplyTo,
		Headers:        stringMapToProto(m.Headers),
		Tags:           stringMapToProto(m.Tags),
		Metadata:       m.Metadata,
		Sandbox:        m.Sandbox,
		ScheduledAt:    timePtrToProto(m.ScheduledAt),
		IdempotencyKey: m.IdempotencyKey,
		CreatedAt:      timeToProto(m.CreatedAt),
		Recipients:     recipientsToProto(m.Recipients),
		Attachments:    storedAttachmentsToProto(m.Attachments),
		Events:         eventsToProto(m.Events),
	}
}

func messageFromProto(m *emailv1.Message) ports.Message {
	return ports.Message{
		ID:             m.GetId(),
		OrganizationID: m.GetOrganizationId(),
		DomainID:       m.GetDomainId(),
		Status:         ports.MessageStatus(m.GetStatus()),
		From:           m.GetFrom(),
		Subject:        m.GetSubject(),
		HTML:           m.GetHtml(),
		Text:           m.GetText(),
		ReplyTo:        m.GetReplyTo(),
		Headers:        stringMapFromProto(m.GetHeaders()),
		Tags:           stringMapFromProto(m.GetTags()),
		Metadata:       json.RawMessage(m.GetMetadata()),
		Sandbox:        m.GetSandbox(),
		ScheduledAt:    timePtrFromProto(m.GetScheduledAt()),
		IdempotencyKey: m.GetIdempotencyKey(),
		CreatedAt:      timeFromProto(m.GetCreatedAt()),
		Recipients:     recipientsFromProto(m.GetRecipients()),
		Attachments:    storedAttachmentsFromProto(m.GetAttachments()),
		Events:         eventsFromProto(m.GetEvents()),
	}
}

func messagesToProto(messages []ports.Message) *emailv1.MessageList {
	if messages == nil {
		return nil
	}
	return &emailv1.MessageList{Items: mapItems(messages, messageToProto)}
}

func messagesFromProto(l *emailv1.MessageList) []ports.Message {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), messageFromProto)
}

func deliveryJobToProto(j ports.DeliveryJob) *deliveryv1.DeliveryJob {
	return &deliveryv1.DeliveryJob{
		Id:             j.ID,
		OrganizationId: j.OrganizationID,
		MessageId:      j.MessageID,
		Domain:         j.Domain,
		RecipientIds:   stringListToProto(j.RecipientIDs),
		Attempt:        int64(j.Attempt),
		FirstQueuedAt:  timeToProto(j.FirstQueuedAt),
		NotBefore:      timeToProto(j.NotBefore),
	}
}

func deliveryJobFromProto(j *deliveryv1.DeliveryJob) ports.DeliveryJob {
	return ports.DeliveryJob{
		ID:             j.GetId(),
		OrganizationID: j.GetOrganizationId(),
		MessageID:      j.GetMessageId(),
		Domain:         j.GetDomain(),
		RecipientIDs:   stringListFromProto(j.GetRecipientIds()),
		Attempt:        int(j.GetAttempt()),
		FirstQueuedAt:  timeFromProto(j.GetFirstQueuedAt()),
		NotBefore:      timeFromProto(j.GetNotBefore()),
	}
}

// outboundAttachmentsToProto keeps Key: the MTA reads the bytes from the blob store under it.
func outboundAttachmentsToProto(atts []ports.StoredAttachment) *deliveryv1.OutboundAttachmentList {
	if atts == nil {
		return nil
	}
	l := &deliveryv1.OutboundAttachmentList{Items: make([]*deliveryv1.OutboundAttachment, 0, len(atts))}
	for _, a := range atts {
		l.Items = append(l.Items, &deliveryv1.OutboundAttachment{
			Id:          a.ID,
			Filename:    a.Filename,
			ContentType: a.ContentType,
			Size:        a.Size,
			Inline:      a.Inline,
			ContentId:   a.ContentID,
			Key:         a.Key,
		})
	}
	return l
}

func outboundAttachmentsFromProto(l *deliveryv1.OutboundAttachmentList) []ports.StoredAttachment {
	if l == nil {
		return nil
	}
	atts := make([]ports.StoredAttachment, 0, len(l.GetItems()))
	for _, a := range l.GetItems() {
		atts = append(atts, ports.StoredAttachment{
			ID:          a.GetId(),
			Filename:    a.GetFilename(),
			ContentType: a.GetContentType(),
			Size:        a.GetSize(),
			Inline:      a.GetInline(),
			ContentID:   a.GetContentId(),
			Key:         a.GetKey(),
		})
	}
	return atts
}

// outboundMessageToProto carries the DKIM private key: see delivery.proto for why this hop may.
func outboundMessageToProto(m ports.OutboundMessage) *deliveryv1.OutboundMessage {
	return &deliveryv1.OutboundMessage{
		Job:             deliveryJobToProto(m.Job),
		MessageId:       m.MessageID,
		OrganizationId:  m.OrganizationID,
		From:            m.From,
		ReplyTo:         m.ReplyTo,
		Subject:         m.Subject,
		Html:            m.HTML,
		Text:            m.Text,
		Headers:         stringMapToProto(m.Headers),
		To:              stringListToProto(m.To),
		Cc:              stringListToProto(m.Cc),
		Recipients:      recipientsToProto(m.Recipients),
		Attachments:     outboundAttachmentsToProto(m.Attachments),
		CreatedAt:       timeToProto(m.CreatedAt),
		DkimDomain:      m.DKIMDomain,
		DkimSelector:    m.DKIMSelector,
		DkimPrivateKey:  m.DKIMPrivateKey,
		ReturnPath:      m.ReturnPath,
		MessageIdHeader: m.MessageIDHeader,
	}
}

func outboundMessageFromProto(m *deliveryv1.OutboundMessage) ports.OutboundMessage {
	return ports.OutboundMessage{
		Job:             deliveryJobFromProto(m.GetJob()),
		MessageID:       m.GetMessageId(),
		OrganizationID:  m.GetOrganizationId(),
		From:            m.GetFrom(),
		ReplyTo:         m.GetReplyTo(),
		Subject:         m.GetSubject(),
		HTML:            m.GetHtml(),
		Text:            m.GetText(),
		Headers:         stringMapFromProto(m.GetHeaders()),
		To:              stringListFromProto(m.GetTo()),
		Cc:              stringListFromProto(m.GetCc()),
		Recipients:      recipientsFromProto(m.GetRecipients()),
		Attachments:     outboundAttachmentsFromProto(m.GetAttachments()),
		CreatedAt:       timeFromProto(m.GetCreatedAt()),
		DKIMDomain:      m.GetDkimDomain(),
		DKIMSelector:    m.GetDkimSelector(),
		DKIMPrivateKey:  m.GetDkimPrivateKey(),
		ReturnPath:      m.GetReturnPath(),
		MessageIDHeader: m.GetMessageIdHeader(),
	}
}

func recipientOutcomesToProto(outcomes []ports.RecipientOutcome) *deliveryv1.RecipientOutcomeList {
	if outcomes == nil {
		return nil
	}
	l := &deliveryv1.RecipientOutcomeList{Items: make([]*deliveryv1.RecipientOutcome, 0, len(outcomes))}
	for _, o := range outcomes {
		l.Items = append(l.Items, &deliveryv1.RecipientOutcome{RecipientId: o.RecipientID, Kind: string(o.Kind), Response: o.Response})
	}
	return l
}

func recipientOutcomesFromProto(l *deliveryv1.RecipientOutcomeList) []ports.RecipientOutcome {
	if l == nil {
		return nil
	}
	outcomes := make([]ports.RecipientOutcome, 0, len(l.GetItems()))
	for _, o := range l.GetItems() {
		outcomes = append(outcomes, ports.RecipientOutcome{
			RecipientID: o.GetRecipientId(),
			Kind:        ports.DeliveryOutcomeKind(o.GetKind()),
			Response:    o.GetResponse(),
		})
	}
	return outcomes
}

func deliveryReportToProto(r ports.DeliveryReport) *deliveryv1.DeliveryReport {
	return &deliveryv1.DeliveryReport{
		Job:        deliveryJobToProto(r.Job),
		Handed:     r.Handed,
		Recipients: recipientOutcomesToProto(r.Recipients),
		At:         timeToProto(r.At),
	}
}

func deliveryReportFromProto(r *deliveryv1.DeliveryReport) ports.DeliveryReport {
	return ports.DeliveryReport{
		Job:        deliveryJobFromProto(r.GetJob()),
		Handed:     r.GetHanded(),
		Recipients: recipientOutcomesFromProto(r.GetRecipients()),
		At:         timeFromProto(r.GetAt()),
	}
}

// Webhooks: the same rules hold. WebhookEndpoint.Secret, the sealed secret, has no wire field and is
// dropped on the way out; the plaintext travels only as CreatedWebhookEndpoint.PlainSecret. Payload keeps
// nil and empty apart through its optional field.

func eventTypesToProto(types []string) *webhookv1.EventTypeList {
	if types == nil {
		return nil
	}
	return &webhookv1.EventTypeList{Values: types}
}

func eventTypesFromProto(l *webhookv1.EventTypeList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func webhookEndpointToProto(e ports.WebhookEndpoint) *webhookv1.WebhookEndpoint {
	return &webhookv1.WebhookEndpoint{
		Id:             e.ID,
		OrganizationId: e.OrganizationID,
		Url:            e.URL,
		Enabled:        e.Enabled,
		EventTypes:     eventTypesToProto(e.EventTypes),
		CreatedAt:      timeToProto(e.CreatedAt),
	}
}

func webhookEndpointFromProto(e *webhookv1.WebhookEndpoint) ports.WebhookEndpoint {
	return ports.WebhookEndpoint{
		ID:             e.GetId(),
		OrganizationID: e.GetOrganizationId(),
		URL:            e.GetUrl(),
		Enabled:        e.GetEnabled(),
		EventTypes:     eventTypesFromProto(e.GetEventTypes()),
		CreatedAt:      timeFromProto(e.GetCreatedAt()),
	}
}

func webhookEndpointsToProto(endpoints []ports.WebhookEndpoint) *webhookv1.WebhookEndpointList {
	if endpoints == nil {
		return nil
	}
	return &webhookv1.WebhookEndpointList{Items: mapItems(endpoints, webhookEndpointToProto)}
}

func webhookEndpointsFromProto(l *webhookv1.WebhookEndpointList) []ports.WebhookEndpoint {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), webhookEndpointFromProto)
}

func createdWebhookEndpointToProto(e ports.CreatedWebhookEndpoint) *webhookv1.CreatedWebhookEndpoint {
	return &webhookv1.CreatedWebhookEndpoint{
		Endpoint:    webhookEndpointToProto(e.WebhookEndpoint),
		PlainSecret: e.PlainSecret,
	}
}

func createdWebhookEndpointFromProto(e *webhookv1.CreatedWebhookEndpoint) ports.CreatedWebhookEndpoint {
	return ports.CreatedWebhookEndpoint{
		WebhookEndpoint: webhookEndpointFromProto(e.GetEndpoint()),
		PlainSecret:     e.GetPlainSecret(),
	}
}

func webhookDeliveryToProto(d ports.WebhookDelivery) *webhookv1.WebhookDelivery {
	return &webhookv1.WebhookDelivery{
		Id:              d.ID,
		OrganizationId:  d.OrganizationID,
		EndpointId:      d.EndpointID,
		EventId:         d.EventID,
		EventType:       d.EventType,
		Status:          d.Status,
		Attempts:        int64(d.Attempts),
		ResponseCode:    int64(d.ResponseCode),
		NextRetryAt:     timePtrToProto(d.NextRetryAt),
		DeliveredAt:     timePtrToProto(d.DeliveredAt),
		CreatedAt:       timeToProto(d.CreatedAt),
		Payload:         d.Payload,
		OriginalEventId: d.OriginalEventID,
	}
}

func webhookDeliveryFromProto(d *webhookv1.WebhookDelivery) ports.WebhookDelivery {
	return ports.WebhookDelivery{
		ID:              d.GetId(),
		OrganizationID:  d.GetOrganizationId(),
		EndpointID:      d.GetEndpointId(),
		EventID:         d.GetEventId(),
		EventType:       d.GetEventType(),
		Status:          d.GetStatus(),
		Attempts:        int(d.GetAttempts()),
		ResponseCode:    int(d.GetResponseCode()),
		NextRetryAt:     timePtrFromProto(d.GetNextRetryAt()),
		DeliveredAt:     timePtrFromProto(d.GetDeliveredAt()),
		CreatedAt:       timeFromProto(d.GetCreatedAt()),
		Payload:         d.GetPayload(),
		OriginalEventID: d.GetOriginalEventId(),
	}
}

func webhookDeliveriesToProto(deliveries []ports.WebhookDelivery) *webhookv1.WebhookDeliveryList {
	if deliveries == nil {
		return nil
	}
	return &webhookv1.WebhookDeliveryList{Items: mapItems(deliveries, webhookDeliveryToProto)}
}

func webhookDeliveriesFromProto(l *webhookv1.WebhookDeliveryList) []ports.WebhookDelivery {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), webhookDeliveryFromProto)
}

// Templates: the same rules hold. CurrentVersion travels as an optional field, so a template never
// published (nil) and one whose pointer is set come back as they left; Versions, filled only by
// GetTemplate, travels as an unset list wrapper when nil.

func intPtrToProto(n *int) *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

func intPtrFromProto(n *int64) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

func templateVersionToProto(v ports.TemplateVersion) *templatev1.TemplateVersion {
	return &templatev1.TemplateVersion{
		Id:          v.ID,
		TemplateId:  v.TemplateID,
		Version:     int64(v.Version),
		Subject:     v.Subject,
		Html:        v.HTML,
		Text:        v.Text,
		ReactSource: v.ReactSource,
		CreatedAt:   timeToProto(v.CreatedAt),
	}
}

func templateVersionFromProto(v *templatev1.TemplateVersion) ports.TemplateVersion {
	return ports.TemplateVersion{
		ID:          v.GetId(),
		TemplateID:  v.GetTemplateId(),
		Version:     int(v.GetVersion()),
		Subject:     v.GetSubject(),
		HTML:        v.GetHtml(),
		Text:        v.GetText(),
		ReactSource: v.GetReactSource(),
		CreatedAt:   timeFromProto(v.GetCreatedAt()),
	}
}

func templateVersionsToProto(versions []ports.TemplateVersion) *templatev1.TemplateVersionList {
	if versions == nil {
		return nil
	}
	return &templatev1.TemplateVersionList{Items: mapItems(versions, templateVersionToProto)}
}

func templateVersionsFromProto(l *templatev1.TemplateVersionList) []ports.TemplateVersion {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), templateVersionFromProto)
}

func templateToProto(t ports.Template) *templatev1.Template {
	return &templatev1.Template{
		Id:             t.ID,
		OrganizationId: t.OrganizationID,
		Name:           t.Name,
		CurrentVersion: intPtrToProto(t.CurrentVersion),
		CreatedAt:      timeToProto(t.CreatedAt),
		UpdatedAt:      timeToProto(t.UpdatedAt),
		Versions:       templateVersionsToProto(t.Versions),
	}
}

func templateFromProto(t *templatev1.Template) ports.Template {
	return ports.Template{
		ID:             t.GetId(),
		OrganizationID: t.GetOrganizationId(),
		Name:           t.GetName(),
		CurrentVersion: intPtrFromProto(t.CurrentVersion),
		CreatedAt:      timeFromProto(t.GetCreatedAt()),
		UpdatedAt:      timeFromProto(t.GetUpdatedAt()),
		Versions:       templateVersionsFromProto(t.GetVersions()),
	}
}

func templatesToProto(templates []ports.Template) *templatev1.TemplateList {
	if templates == nil {
		return nil
	}
	return &templatev1.TemplateList{Items: mapItems(templates, templateToProto)}
}

func templatesFromProto(l *templatev1.TemplateList) []ports.Template {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), templateFromProto)
}

func newTemplateVersionToProto(v ports.NewTemplateVersion) *templatev1.NewTemplateVersion {
	return &templatev1.NewTemplateVersion{Subject: v.Subject, Html: v.HTML, Text: v.Text, ReactSource: v.ReactSource}
}

func newTemplateVersionFromProto(v *templatev1.NewTemplateVersion) ports.NewTemplateVersion {
	return ports.NewTemplateVersion{Subject: v.GetSubject(), HTML: v.GetHtml(), Text: v.GetText(), ReactSource: v.GetReactSource()}
}

func renderedTemplateToProto(r ports.RenderedTemplate) *templatev1.RenderedTemplate {
	return &templatev1.RenderedTemplate{Subject: r.Subject, Html: r.HTML, Text: r.Text}
}

func renderedTemplateFromProto(r *templatev1.RenderedTemplate) ports.RenderedTemplate {
	return ports.RenderedTemplate{Subject: r.GetSubject(), HTML: r.GetHtml(), Text: r.GetText()}
}

// Deliverability and feedback: the same rules hold. Complaint.ArrivalDate and ComplaintReport.ArrivalDate
// travel as unset Timestamps when nil, so "the report did not say" survives the hop.

func suppressionToProto(s ports.Suppression) *deliverabilityv1.Suppression {
	return &deliverabilityv1.Suppression{
		Id:             s.ID,
		OrganizationId: s.OrganizationID,
		Address:        s.Address,
		Scope:          s.Scope,
		Reason:         s.Reason,
		CreatedAt:      timeToProto(s.CreatedAt),
	}
}

func suppressionFromProto(s *deliverabilityv1.Suppression) ports.Suppression {
	return ports.Suppression{
		ID:             s.GetId(),
		OrganizationID: s.GetOrganizationId(),
		Address:        s.GetAddress(),
		Scope:          s.GetScope(),
		Reason:         s.GetReason(),
		CreatedAt:      timeFromProto(s.GetCreatedAt()),
	}
}

func suppressionsToProto(suppressions []ports.Suppression) *deliverabilityv1.SuppressionList {
	if suppressions == nil {
		return nil
	}
	return &deliverabilityv1.SuppressionList{Items: mapItems(suppressions, suppressionToProto)}
}

func suppressionsFromProto(l *deliverabilityv1.SuppressionList) []ports.Suppression {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), suppressionFromProto)
}

func newSuppressionToProto(s ports.NewSuppression) *deliverabilityv1.NewSuppression {
	return &deliverabilityv1.NewSuppression{Address: s.Address, Scope: s.Scope, Reason: s.Reason}
}

func newSuppressionFromProto(s *deliverabilityv1.NewSuppression) ports.NewSuppression {
	return ports.NewSuppression{Address: s.GetAddress(), Scope: s.GetScope(), Reason: s.GetReason()}
}

func pageQueryToProto(q ports.PageQuery) *deliverabilityv1.PageQuery {
	return &deliverabilityv1.PageQuery{Limit: int64(q.Limit), Cursor: q.Cursor}
}

func pageQueryFromProto(q *deliverabilityv1.PageQuery) ports.PageQuery {
	return ports.PageQuery{Limit: int(q.GetLimit()), Cursor: q.GetCursor()}
}

func bounceToProto(b ports.Bounce) *deliverabilityv1.Bounce {
	return &deliverabilityv1.Bounce{
		Id:             b.ID,
		OrganizationId: b.OrganizationID,
		MessageId:      b.MessageID,
		RecipientId:    b.RecipientID,
		Address:        b.Address,
		Type:           b.Type,
		Status:         b.Status,
		Action:         b.Action,
		DiagnosticCode: b.DiagnosticCode,
		RemoteMta:      b.RemoteMTA,
		ReportingMta:   b.ReportingMTA,
		CreatedAt:      timeToProto(b.CreatedAt),
	}
}

func bounceFromProto(b *deliverabilityv1.Bounce) ports.Bounce {
	return ports.Bounce{
		ID:             b.GetId(),
		OrganizationID: b.GetOrganizationId(),
		MessageID:      b.GetMessageId(),
		RecipientID:    b.GetRecipientId(),
		Address:        b.GetAddress(),
		Type:           b.GetType(),
		Status:         b.GetStatus(),
		Action:         b.GetAction(),
		DiagnosticCode: b.GetDiagnosticCode(),
		RemoteMTA:      b.GetRemoteMta(),
		ReportingMTA:   b.GetReportingMta(),
		CreatedAt:      timeFromProto(b.GetCreatedAt()),
	}
}

func bouncesToProto(bounces []ports.Bounce) *deliverabilityv1.BounceList {
	if bounces == nil {
		return nil
	}
	return &deliverabilityv1.BounceList{Items: mapItems(bounces, bounceToProto)}
}

func bouncesFromProto(l *deliverabilityv1.BounceList) []ports.Bounce {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), bounceFromProto)
}

func complaintToProto(c ports.Complaint) *deliverabilityv1.Complaint {
	return &deliverabilityv1.Complaint{
		Id:             c.ID,
		OrganizationId: c.OrganizationID,
		MessageId:      c.MessageID,
		RecipientId:    c.RecipientID,
		Address:        c.Address,
		FeedbackType:   c.FeedbackType,
		UserAgent:      c.UserAgent,
		ReportedDomain: c.ReportedDomain,
		SourceIp:       c.SourceIP,
		ArrivalDate:    timePtrToProto(c.ArrivalDate),
		CreatedAt:      timeToProto(c.CreatedAt),
	}
}

func complaintFromProto(c *deliverabilityv1.Complaint) ports.Complaint {
	return ports.Complaint{
		ID:             c.GetId(),
		OrganizationID: c.GetOrganizationId(),
		MessageID:      c.GetMessageId(),
		RecipientID:    c.GetRecipientId(),
		Address:        c.GetAddress(),
		FeedbackType:   c.GetFeedbackType(),
		UserAgent:      c.GetUserAgent(),
		ReportedDomain: c.GetReportedDomain(),
		SourceIP:       c.GetSourceIp(),
		ArrivalDate:    timePtrFromProto(c.GetArrivalDate()),
		CreatedAt:      timeFromProto(c.GetCreatedAt()),
	}
}

func complaintsToProto(complaints []ports.Complaint) *deliverabilityv1.ComplaintList {
	if complaints == nil {
		return nil
	}
	return &deliverabilityv1.ComplaintList{Items: mapItems(complaints, complaintToProto)}
}

func complaintsFromProto(l *deliverabilityv1.ComplaintList) []ports.Complaint {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), complaintFromProto)
}

func dsnRecipientsToProto(recipients []ports.DSNRecipient) *deliverabilityv1.DSNRecipientList {
	if recipients == nil {
		return nil
	}
	l := &deliverabilityv1.DSNRecipientList{Items: make([]*deliverabilityv1.DSNRecipient, 0, len(recipients))}
	for _, r := range recipients {
		l.Items = append(l.Items, &deliverabilityv1.DSNRecipient{
			FinalRecipient:    r.FinalRecipient,
			OriginalRecipient: r.OriginalRecipient,
			Action:            r.Action,
			Status:            r.Status,
			DiagnosticCode:    r.DiagnosticCode,
			RemoteMta:         r.RemoteMTA,
		})
	}
	return l
}

func dsnRecipientsFromProto(l *deliverabilityv1.DSNRecipientList) []ports.DSNRecipient {
	if l == nil {
		return nil
	}
	recipients := make([]ports.DSNRecipient, 0, len(l.GetItems()))
	for _, r := range l.GetItems() {
		recipients = append(recipients, ports.DSNRecipient{
			FinalRecipient:    r.GetFinalRecipient(),
			OriginalRecipient: r.GetOriginalRecipient(),
			Action:            r.GetAction(),
			Status:            r.GetStatus(),
			DiagnosticCode:    r.GetDiagnosticCode(),
			RemoteMTA:         r.GetRemoteMta(),
		})
	}
	return recipients
}

func bounceReportToProto(r ports.BounceReport) *deliverabilityv1.BounceReport {
	return &deliverabilityv1.BounceReport{
		Rcpt:              r.Rcpt,
		ReportingMta:      r.ReportingMTA,
		OriginalMessageId: r.OriginalMessageID,
		Recipients:        dsnRecipientsToProto(r.Recipients),
		ArrivedAt:         timeToProto(r.ArrivedAt),
	}
}

func bounceReportFromProto(r *deliverabilityv1.BounceReport) ports.BounceReport {
	return ports.BounceReport{
		Rcpt:              r.GetRcpt(),
		ReportingMTA:      r.GetReportingMta(),
		OriginalMessageID: r.GetOriginalMessageId(),
		Recipients:        dsnRecipientsFromProto(r.GetRecipients()),
		ArrivedAt:         timeFromProto(r.GetArrivedAt()),
	}
}

func complaintReportToProto(r ports.ComplaintReport) *deliverabilityv1.ComplaintReport {
	return &deliverabilityv1.ComplaintReport{
		Rcpt:              r.Rcpt,
		FeedbackType:      r.FeedbackType,
		UserAgent:         r.UserAgent,
		OriginalMailFrom:  r.OriginalMailFrom,
		OriginalRcptTo:    stringListToProto(r.OriginalRcptTo),
		OriginalMessageId: r.OriginalMessageID,
		ReportedDomain:    r.ReportedDomain,
		SourceIp:          r.SourceIP,
		ArrivalDate:       timePtrToProto(r.ArrivalDate),
		ArrivedAt:         timeToProto(r.ArrivedAt),
	}
}

func complaintReportFromProto(r *deliverabilityv1.ComplaintReport) ports.ComplaintReport {
	return ports.ComplaintReport{
		Rcpt:              r.GetRcpt(),
		FeedbackType:      r.GetFeedbackType(),
		UserAgent:         r.GetUserAgent(),
		OriginalMailFrom:  r.GetOriginalMailFrom(),
		OriginalRcptTo:    stringListFromProto(r.GetOriginalRcptTo()),
		OriginalMessageID: r.GetOriginalMessageId(),
		ReportedDomain:    r.GetReportedDomain(),
		SourceIP:          r.GetSourceIp(),
		ArrivalDate:       timePtrFromProto(r.GetArrivalDate()),
		ArrivedAt:         timeFromProto(r.GetArrivedAt()),
	}
}

// mapItems converts each element of a list between its ports and proto forms, in order. The list wrappers
// around it keep nil apart from empty; an empty in gives an empty (not nil) out.
func mapItems[T, U any](in []T, convert func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, convert(v))
	}
	return out
}
