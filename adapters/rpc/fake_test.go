package rpc_test

import (
	"context"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// fakeCore implements every interface of ports.Core by recording each call's arguments and answering
// with the fixed values a test put in it. It stands in for the core: the tests exercise the transport.
type fakeCore struct {
	mu    sync.Mutex
	calls []call

	// err, when set, is what every method returns; panicWith, when set, is what every method panics with.
	err       error
	panicWith any

	signup      ports.SignupResult
	tokens      ports.TokenPair
	enrollment  ports.TOTPEnrollment
	principal   ports.Principal
	apiKeys     []ports.APIKey
	createdKey  ports.CreatedAPIKey
	createdCred ports.CreatedSMTPCredential
	creds       []ports.SMTPCredential
	org         ports.Organization
	orgs        []ports.Organization
	sub         ports.Subscription
	decision    ports.RateDecision
	domain      ports.Domain
	domains     []ports.Domain
	sendResult  ports.SendResult
	batch       []ports.BatchItemResult
	message     ports.Message
	page        ports.EmailPage
	outbound    ports.OutboundMessage
	created     ports.CreatedWebhookEndpoint
	endpoints   []ports.WebhookEndpoint
	delivery    ports.WebhookDelivery
	deliveries  []ports.WebhookDelivery

	template      ports.Template
	templates     []ports.Template
	version       ports.TemplateVersion
	rendered      ports.RenderedTemplate
	suppression   ports.Suppression
	suppressions  []ports.Suppression
	deleted       bool
	bouncePage    ports.BouncePage
	complaintPage ports.ComplaintPage
	accepted      bool
	clickURL      string

	// The pages of the paged lists.
	domainPage      ports.Page[ports.Domain]
	templatePage    ports.Page[ports.Template]
	versionPage     ports.Page[ports.TemplateVersion]
	suppressionPage ports.Page[ports.Suppression]
	endpointPage    ports.Page[ports.WebhookEndpoint]

	// seen receives the context of each call, for tests of what travels in it.
	seen func(ctx context.Context)
}

type call struct {
	method string
	args   []any
}

func (f *fakeCore) core() ports.Core {
	return ports.Core{
		Accounts:        f,
		Auth:            f,
		APIKeys:         f,
		SMTPCredentials: f,
		Organizations:   f,
		RateLimiter:     f,
		Domains:         f,
		Emails:          f,
		Delivery:        f,
		DeliveryBatch:   f,
		Webhooks:        f,
		Templates:       f,
		Renderer:        f,
		Deliverability:  f,
		Feedback:        f,
		Tracking:        f,
		Inbound:         f,
		Receiving:       f,
		Contacts:        f,
		Topics:          f,
		Segments:        f,
		Preferences:     f,
		Broadcasts:      f,
		Unsubscribe:     f,
		Billing:         f,
		Reputation:      f,
		DMARC:           f,
		Logs:            f,
		Analytics:       f,
		Health:          f,
	}
}

func (f *fakeCore) record(ctx context.Context, method string, args ...any) error {
	f.mu.Lock()
	f.calls = append(f.calls, call{method: method, args: args})
	seen, panicWith, err := f.seen, f.panicWith, f.err
	f.mu.Unlock()
	if seen != nil {
		seen(ctx)
	}
	if panicWith != nil {
		panic(panicWith)
	}
	return err
}

func (f *fakeCore) recorded() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeCore) Signup(ctx context.Context, in ports.SignupInput) (ports.SignupResult, error) {
	return f.signup, f.record(ctx, "Signup", in)
}

func (f *fakeCore) Login(ctx context.Context, in ports.LoginInput) (ports.TokenPair, error) {
	return f.tokens, f.record(ctx, "Login", in)
}

func (f *fakeCore) Refresh(ctx context.Context, refreshToken string) (ports.TokenPair, error) {
	return f.tokens, f.record(ctx, "Refresh", refreshToken)
}

func (f *fakeCore) Logout(ctx context.Context, refreshToken string) error {
	return f.record(ctx, "Logout", refreshToken)
}

func (f *fakeCore) EnrollTOTP(ctx context.Context, p ports.Principal, password string) (ports.TOTPEnrollment, error) {
	return f.enrollment, f.record(ctx, "EnrollTOTP", p, password)
}

func (f *fakeCore) VerifyTOTP(ctx context.Context, p ports.Principal, code string) error {
	return f.record(ctx, "VerifyTOTP", p, code)
}

func (f *fakeCore) AuthenticateAPIKey(ctx context.Context, token string) (ports.Principal, error) {
	return f.principal, f.record(ctx, "AuthenticateAPIKey", token)
}

func (f *fakeCore) AuthenticateSession(ctx context.Context, token string) (ports.Principal, error) {
	return f.principal, f.record(ctx, "AuthenticateSession", token)
}

func (f *fakeCore) AuthenticateSMTP(ctx context.Context, username, password string) (ports.Principal, error) {
	return f.principal, f.record(ctx, "AuthenticateSMTP", username, password)
}

func (f *fakeCore) ListAPIKeys(ctx context.Context, orgID string) ([]ports.APIKey, error) {
	return f.apiKeys, f.record(ctx, "ListAPIKeys", orgID)
}

func (f *fakeCore) CreateAPIKey(ctx context.Context, orgID, name string, scopes []string) (ports.CreatedAPIKey, error) {
	return f.createdKey, f.record(ctx, "CreateAPIKey", orgID, name, scopes)
}

func (f *fakeCore) RevokeAPIKey(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "RevokeAPIKey", orgID, id)
}

func (f *fakeCore) CreateSMTPCredential(ctx context.Context, orgID string) (ports.CreatedSMTPCredential, error) {
	return f.createdCred, f.record(ctx, "CreateSMTPCredential", orgID)
}

func (f *fakeCore) ListSMTPCredentials(ctx context.Context, orgID string) ([]ports.SMTPCredential, error) {
	return f.creds, f.record(ctx, "ListSMTPCredentials", orgID)
}

func (f *fakeCore) DeleteSMTPCredential(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteSMTPCredential", orgID, id)
}

func (f *fakeCore) GetOrganization(ctx context.Context, orgID string) (ports.Organization, error) {
	return f.org, f.record(ctx, "GetOrganization", orgID)
}

func (f *fakeCore) ListOrganizations(ctx context.Context) ([]ports.Organization, error) {
	return f.orgs, f.record(ctx, "ListOrganizations")
}

func (f *fakeCore) SetPaused(ctx context.Context, orgID string, paused bool) (ports.Organization, error) {
	return f.org, f.record(ctx, "SetPaused", orgID, paused)
}

func (f *fakeCore) SetPlan(ctx context.Context, orgID string, plan ports.Plan) (ports.Organization, error) {
	return f.org, f.record(ctx, "SetPlan", orgID, plan)
}

func (f *fakeCore) Subscription(ctx context.Context, orgID string) (ports.Subscription, error) {
	return f.sub, f.record(ctx, "Subscription", orgID)
}

func (f *fakeCore) Allow(ctx context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	return f.decision, f.record(ctx, "Allow", key, limit, window)
}

func (f *fakeCore) Ping(ctx context.Context) error {
	return f.record(ctx, "Ping")
}

func (f *fakeCore) CreateDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	return f.domain, f.record(ctx, "CreateDomain", orgID, name)
}

func (f *fakeCore) ListDomains(ctx context.Context, orgID string) ([]ports.Domain, error) {
	return f.domains, f.record(ctx, "ListDomains", orgID)
}

func (f *fakeCore) ListDomainsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Domain], error) {
	return f.domainPage, f.record(ctx, "ListDomainsPage", orgID, q)
}

func (f *fakeCore) GetDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	return f.domain, f.record(ctx, "GetDomain", orgID, id)
}

func (f *fakeCore) VerifyDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	return f.domain, f.record(ctx, "VerifyDomain", orgID, id)
}

func (f *fakeCore) SuspendDomain(ctx context.Context, orgID, id string) (ports.Domain, error) {
	return f.domain, f.record(ctx, "SuspendDomain", orgID, id)
}

func (f *fakeCore) UpdateDomainTracking(ctx context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	return f.domain, f.record(ctx, "UpdateDomainTracking", orgID, id, t)
}

func (f *fakeCore) Send(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	return f.sendResult, f.record(ctx, "Send", orgID, req)
}

func (f *fakeCore) SendBatch(ctx context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	return f.batch, f.record(ctx, "SendBatch", orgID, reqs)
}

func (f *fakeCore) GetEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	return f.message, f.record(ctx, "GetEmail", orgID, id)
}

func (f *fakeCore) CancelEmail(ctx context.Context, orgID, id string) (ports.Message, error) {
	return f.message, f.record(ctx, "CancelEmail", orgID, id)
}

func (f *fakeCore) ListEmails(ctx context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	return f.page, f.record(ctx, "ListEmails", orgID, q)
}

func (f *fakeCore) LoadOutbound(ctx context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	return f.outbound, f.record(ctx, "LoadOutbound", job)
}

func (f *fakeCore) ReportDelivery(ctx context.Context, r ports.DeliveryReport) error {
	return f.record(ctx, "ReportDelivery", r)
}

// LoadOutbounds answers every job with f.outbound.
func (f *fakeCore) LoadOutbounds(ctx context.Context, jobs []ports.DeliveryJob) ([]ports.OutboundResult, error) {
	if err := f.record(ctx, "LoadOutbounds", jobs); err != nil {
		return nil, err
	}
	results := make([]ports.OutboundResult, len(jobs))
	for i := range results {
		results[i].Message = f.outbound
	}
	return results, nil
}

// ReportDeliveries applies every report.
func (f *fakeCore) ReportDeliveries(ctx context.Context, reports []ports.DeliveryReport) ([]error, error) {
	if err := f.record(ctx, "ReportDeliveries", reports); err != nil {
		return nil, err
	}
	return make([]error, len(reports)), nil
}

func (f *fakeCore) CreateEndpoint(ctx context.Context, orgID, url string, eventTypes []string) (ports.CreatedWebhookEndpoint, error) {
	return f.created, f.record(ctx, "CreateEndpoint", orgID, url, eventTypes)
}

func (f *fakeCore) ListEndpoints(ctx context.Context, orgID string) ([]ports.WebhookEndpoint, error) {
	return f.endpoints, f.record(ctx, "ListEndpoints", orgID)
}

func (f *fakeCore) ListEndpointsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.WebhookEndpoint], error) {
	return f.endpointPage, f.record(ctx, "ListEndpointsPage", orgID, q)
}

func (f *fakeCore) DeleteEndpoint(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteEndpoint", orgID, id)
}

func (f *fakeCore) TestEndpoint(ctx context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	return f.delivery, f.record(ctx, "TestEndpoint", orgID, id)
}

func (f *fakeCore) RotateSecret(ctx context.Context, orgID, id string) (ports.CreatedWebhookEndpoint, error) {
	return f.created, f.record(ctx, "RotateSecret", orgID, id)
}

func (f *fakeCore) Replay(ctx context.Context, orgID, endpointID, deliveryID string) (ports.WebhookDelivery, error) {
	return f.delivery, f.record(ctx, "Replay", orgID, endpointID, deliveryID)
}

func (f *fakeCore) ListDeliveries(ctx context.Context, orgID string) ([]ports.WebhookDelivery, error) {
	return f.deliveries, f.record(ctx, "ListDeliveries", orgID)
}

func (f *fakeCore) CreateTemplate(ctx context.Context, orgID, name string) (ports.Template, error) {
	return f.template, f.record(ctx, "CreateTemplate", orgID, name)
}

func (f *fakeCore) CreateTemplateVersion(ctx context.Context, orgID, templateID string, v ports.NewTemplateVersion) (ports.TemplateVersion, error) {
	return f.version, f.record(ctx, "CreateTemplateVersion", orgID, templateID, v)
}

func (f *fakeCore) PublishTemplate(ctx context.Context, orgID, templateID string, version int) (ports.Template, error) {
	return f.template, f.record(ctx, "PublishTemplate", orgID, templateID, version)
}

func (f *fakeCore) ListTemplates(ctx context.Context, orgID string) ([]ports.Template, error) {
	return f.templates, f.record(ctx, "ListTemplates", orgID)
}

func (f *fakeCore) ListTemplatesPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Template], error) {
	return f.templatePage, f.record(ctx, "ListTemplatesPage", orgID, q)
}

func (f *fakeCore) GetTemplate(ctx context.Context, orgID, id string) (ports.Template, error) {
	return f.template, f.record(ctx, "GetTemplate", orgID, id)
}

func (f *fakeCore) ListTemplateVersions(ctx context.Context, orgID, templateID string, q ports.PageQuery) (ports.Page[ports.TemplateVersion], error) {
	return f.versionPage, f.record(ctx, "ListTemplateVersions", orgID, templateID, q)
}

func (f *fakeCore) RenderTemplate(ctx context.Context, orgID, templateID string, vars map[string]any) (ports.RenderedTemplate, error) {
	return f.rendered, f.record(ctx, "RenderTemplate", orgID, templateID, vars)
}

func (f *fakeCore) ListSuppressions(ctx context.Context, orgID string) ([]ports.Suppression, error) {
	return f.suppressions, f.record(ctx, "ListSuppressions", orgID)
}

func (f *fakeCore) ListSuppressionsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Suppression], error) {
	return f.suppressionPage, f.record(ctx, "ListSuppressionsPage", orgID, q)
}

func (f *fakeCore) CreateSuppression(ctx context.Context, orgID string, s ports.NewSuppression) (ports.Suppression, error) {
	return f.suppression, f.record(ctx, "CreateSuppression", orgID, s)
}

func (f *fakeCore) DeleteSuppression(ctx context.Context, orgID, id string) (bool, error) {
	return f.deleted, f.record(ctx, "DeleteSuppression", orgID, id)
}

func (f *fakeCore) ListGlobalSuppressions(ctx context.Context) ([]ports.Suppression, error) {
	return f.suppressions, f.record(ctx, "ListGlobalSuppressions")
}

func (f *fakeCore) CreateGlobalSuppression(ctx context.Context, s ports.NewSuppression) (ports.Suppression, error) {
	return f.suppression, f.record(ctx, "CreateGlobalSuppression", s)
}

func (f *fakeCore) DeleteGlobalSuppression(ctx context.Context, id string) (bool, error) {
	return f.deleted, f.record(ctx, "DeleteGlobalSuppression", id)
}

func (f *fakeCore) ListBounces(ctx context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	return f.bouncePage, f.record(ctx, "ListBounces", orgID, q)
}

func (f *fakeCore) ListComplaints(ctx context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	return f.complaintPage, f.record(ctx, "ListComplaints", orgID, q)
}

func (f *fakeCore) AcceptsRecipient(ctx context.Context, rcpt string) (bool, error) {
	return f.accepted, f.record(ctx, "AcceptsRecipient", rcpt)
}

func (f *fakeCore) RecordBounce(ctx context.Context, r ports.BounceReport) error {
	return f.record(ctx, "RecordBounce", r)
}

func (f *fakeCore) RecordComplaint(ctx context.Context, r ports.ComplaintReport) error {
	return f.record(ctx, "RecordComplaint", r)
}

func (f *fakeCore) Open(ctx context.Context, token string) error {
	return f.record(ctx, "Open", token)
}

func (f *fakeCore) Click(ctx context.Context, token string) (string, error) {
	return f.clickURL, f.record(ctx, "Click", token)
}
