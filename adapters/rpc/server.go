package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	accountv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1/accountv1connect"
	credentialv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1/credentialv1connect"
	deliverabilityv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1/deliverabilityv1connect"
	deliveryv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1/deliveryv1connect"
	domainv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1/domainv1connect"
	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1/emailv1connect"
	healthv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
	organizationv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1/organizationv1connect"
	ratelimitv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1/ratelimitv1connect"
	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1/templatev1connect"
	trackingv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1/trackingv1connect"
	webhookv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1/webhookv1connect"
)

// MaxMessageBytes bounds every message either side of the hop reads or sends. A send carries up to
// 25 MiB of decoded attachments (SPEC §8) besides its bodies, so the bound sits well above that; it still
// keeps a single call from exhausting a process's memory.
const MaxMessageBytes = 64 << 20

// ServerConfig configures the core's side of the hop.
type ServerConfig struct {
	// Token is the shared secret every caller must present as `Authorization: Bearer <Token>`. The
	// handler refuses every call while it is empty, so a forgotten setting fails closed.
	Token string
	// Logger receives panics and errors that are not *ports.Error, which callers only see as
	// "internal error". Nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports a configuration that would refuse every call, so that a deployment fails at start
// rather than on its first request.
func (c ServerConfig) Validate() error {
	if c.Token == "" {
		return errors.New("rpc: server token is required")
	}
	return nil
}

// NewHandler serves core's services on one mux, behind the interceptors of serverInterceptors. A nil
// field of core leaves its service unmounted, so a process serves only what it has; calls to it fail as
// Unimplemented, which clients report as internal errors.
//
// ports.Core has no field for a ports.TemplateRenderer: the core's template service is both, so
// RenderTemplate is served when core.Templates also implements ports.TemplateRenderer, and answers
// Unimplemented otherwise.
func NewHandler(core ports.Core, cfg ServerConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &server{core: core, log: log}
	if r, ok := core.Templates.(ports.TemplateRenderer); ok {
		s.renderer = r
	}
	opts := []connect.HandlerOption{
		connect.WithInterceptors(serverInterceptors(cfg, log)...),
		connect.WithReadMaxBytes(MaxMessageBytes),
		connect.WithSendMaxBytes(MaxMessageBytes),
	}
	mux := http.NewServeMux()
	mount := func(path string, h http.Handler) { mux.Handle(path, h) }
	if core.Accounts != nil {
		mount(accountv1connect.NewAccountServiceHandler(s, opts...))
	}
	if core.Auth != nil {
		mount(accountv1connect.NewAuthServiceHandler(s, opts...))
	}
	if core.APIKeys != nil {
		mount(credentialv1connect.NewAPIKeyServiceHandler(s, opts...))
	}
	if core.SMTPCredentials != nil {
		mount(credentialv1connect.NewSMTPCredentialServiceHandler(s, opts...))
	}
	if core.Organizations != nil {
		mount(organizationv1connect.NewOrganizationServiceHandler(s, opts...))
	}
	if core.RateLimiter != nil {
		mount(ratelimitv1connect.NewRateLimitServiceHandler(s, opts...))
	}
	if core.Domains != nil {
		mount(domainv1connect.NewDomainServiceHandler(s, opts...))
	}
	if core.Emails != nil {
		mount(emailv1connect.NewEmailServiceHandler(s, opts...))
	}
	if core.Delivery != nil {
		mount(deliveryv1connect.NewDeliveryServiceHandler(s, opts...))
	}
	if core.Webhooks != nil {
		mount(webhookv1connect.NewWebhookServiceHandler(s, opts...))
	}
	if core.Templates != nil {
		mount(templatev1connect.NewTemplateServiceHandler(s, opts...))
	}
	if core.Deliverability != nil {
		mount(deliverabilityv1connect.NewDeliverabilityServiceHandler(s, opts...))
	}
	if core.Feedback != nil {
		mount(deliverabilityv1connect.NewFeedbackServiceHandler(s, opts...))
	}
	if core.Tracking != nil {
		mount(trackingv1connect.NewTrackingServiceHandler(s, opts...))
	}
	if core.Health != nil {
		mount(healthv1connect.NewHealthServiceHandler(s, opts...))
	}
	return mux
}

// server implements every generated handler interface by converting the request, calling core and
// converting the answer; method names do not collide across the services.
type server struct {
	core ports.Core
	// renderer is core.Templates when it renders too; nil leaves RenderTemplate unimplemented.
	renderer ports.TemplateRenderer
	log      *slog.Logger
}

var (
	_ accountv1connect.AccountServiceHandler               = (*server)(nil)
	_ accountv1connect.AuthServiceHandler                  = (*server)(nil)
	_ credentialv1connect.APIKeyServiceHandler             = (*server)(nil)
	_ credentialv1connect.SMTPCredentialServiceHandler     = (*server)(nil)
	_ organizationv1connect.OrganizationServiceHandler     = (*server)(nil)
	_ ratelimitv1connect.RateLimitServiceHandler           = (*server)(nil)
	_ domainv1connect.DomainServiceHandler                 = (*server)(nil)
	_ emailv1connect.EmailServiceHandler                   = (*server)(nil)
	_ deliveryv1connect.DeliveryServiceHandler             = (*server)(nil)
	_ webhookv1connect.WebhookServiceHandler               = (*server)(nil)
	_ templatev1connect.TemplateServiceHandler             = (*server)(nil)
	_ deliverabilityv1connect.DeliverabilityServiceHandler = (*server)(nil)
	_ deliverabilityv1connect.FeedbackServiceHandler       = (*server)(nil)
	_ trackingv1connect.TrackingServiceHandler             = (*server)(nil)
	_ healthv1connect.HealthServiceHandler                 = (*server)(nil)
)

// fail turns an implementation's error into its wire form, logging what the caller will not see.
func (s *server) fail(ctx context.Context, spec connect.Spec, err error) error {
	if ports.ErrorCode(err) == ports.CodeInternal {
		s.log.ErrorContext(ctx, "rpc: internal error", "procedure", spec.Procedure, "err", err)
	}
	return toConnectError(err)
}

func (s *server) Signup(ctx context.Context, req *connect.Request[accountv1.SignupRequest]) (*connect.Response[accountv1.SignupResponse], error) {
	m := req.Msg
	res, err := s.core.Accounts.Signup(ctx, ports.SignupInput{
		Email:            m.GetEmail(),
		Password:         m.GetPassword(),
		OrganizationName: m.GetOrganizationName(),
	})
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.SignupResponse{
		UserId:         res.UserID,
		OrganizationId: res.OrganizationID,
		Tokens:         tokenPairToProto(res.Tokens),
	}), nil
}

func (s *server) Login(ctx context.Context, req *connect.Request[accountv1.LoginRequest]) (*connect.Response[accountv1.LoginResponse], error) {
	m := req.Msg
	tokens, err := s.core.Accounts.Login(ctx, ports.LoginInput{
		Email:    m.GetEmail(),
		Password: m.GetPassword(),
		TOTP:     m.GetTotp(),
		OrgID:    m.GetOrgId(),
	})
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.LoginResponse{Tokens: tokenPairToProto(tokens)}), nil
}

func (s *server) Refresh(ctx context.Context, req *connect.Request[accountv1.RefreshRequest]) (*connect.Response[accountv1.RefreshResponse], error) {
	tokens, err := s.core.Accounts.Refresh(ctx, req.Msg.GetRefreshToken())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.RefreshResponse{Tokens: tokenPairToProto(tokens)}), nil
}

func (s *server) EnrollTOTP(ctx context.Context, req *connect.Request[accountv1.EnrollTOTPRequest]) (*connect.Response[accountv1.EnrollTOTPResponse], error) {
	e, err := s.core.Accounts.EnrollTOTP(ctx, principalFromProto(req.Msg.GetPrincipal()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.EnrollTOTPResponse{Secret: e.Secret, OtpAuthUrl: e.OTPAuthURL}), nil
}

func (s *server) VerifyTOTP(ctx context.Context, req *connect.Request[accountv1.VerifyTOTPRequest]) (*connect.Response[accountv1.VerifyTOTPResponse], error) {
	if err := s.core.Accounts.VerifyTOTP(ctx, principalFromProto(req.Msg.GetPrincipal()), req.Msg.GetCode()); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.VerifyTOTPResponse{}), nil
}

func (s *server) AuthenticateAPIKey(ctx context.Context, req *connect.Request[accountv1.AuthenticateAPIKeyRequest]) (*connect.Response[accountv1.AuthenticateAPIKeyResponse], error) {
	p, err := s.core.Auth.AuthenticateAPIKey(ctx, req.Msg.GetToken())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.AuthenticateAPIKeyResponse{Principal: principalToProto(p)}), nil
}

func (s *server) AuthenticateSession(ctx context.Context, req *connect.Request[accountv1.AuthenticateSessionRequest]) (*connect.Response[accountv1.AuthenticateSessionResponse], error) {
	p, err := s.core.Auth.AuthenticateSession(ctx, req.Msg.GetToken())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.AuthenticateSessionResponse{Principal: principalToProto(p)}), nil
}

func (s *server) AuthenticateSMTP(ctx context.Context, req *connect.Request[accountv1.AuthenticateSMTPRequest]) (*connect.Response[accountv1.AuthenticateSMTPResponse], error) {
	p, err := s.core.Auth.AuthenticateSMTP(ctx, req.Msg.GetUsername(), req.Msg.GetPassword())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&accountv1.AuthenticateSMTPResponse{Principal: principalToProto(p)}), nil
}

func (s *server) ListAPIKeys(ctx context.Context, req *connect.Request[credentialv1.ListAPIKeysRequest]) (*connect.Response[credentialv1.ListAPIKeysResponse], error) {
	keys, err := s.core.APIKeys.ListAPIKeys(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&credentialv1.ListAPIKeysResponse{ApiKeys: apiKeysToProto(keys)}), nil
}

func (s *server) CreateAPIKey(ctx context.Context, req *connect.Request[credentialv1.CreateAPIKeyRequest]) (*connect.Response[credentialv1.CreateAPIKeyResponse], error) {
	m := req.Msg
	k, err := s.core.APIKeys.CreateAPIKey(ctx, m.GetOrganizationId(), m.GetName(), credentialScopesFromProto(m.GetScopes()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&credentialv1.CreateAPIKeyResponse{ApiKey: apiKeyToProto(k.APIKey), Token: k.Token}), nil
}

func (s *server) RevokeAPIKey(ctx context.Context, req *connect.Request[credentialv1.RevokeAPIKeyRequest]) (*connect.Response[credentialv1.RevokeAPIKeyResponse], error) {
	if err := s.core.APIKeys.RevokeAPIKey(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId()); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&credentialv1.RevokeAPIKeyResponse{}), nil
}

func (s *server) CreateSMTPCredential(ctx context.Context, req *connect.Request[credentialv1.CreateSMTPCredentialRequest]) (*connect.Response[credentialv1.CreateSMTPCredentialResponse], error) {
	c, err := s.core.SMTPCredentials.CreateSMTPCredential(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&credentialv1.CreateSMTPCredentialResponse{
		SmtpCredential: smtpCredentialToProto(c.SMTPCredential),
		Password:       c.Password,
	}), nil
}

func (s *server) ListSMTPCredentials(ctx context.Context, req *connect.Request[credentialv1.ListSMTPCredentialsRequest]) (*connect.Response[credentialv1.ListSMTPCredentialsResponse], error) {
	creds, err := s.core.SMTPCredentials.ListSMTPCredentials(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&credentialv1.ListSMTPCredentialsResponse{SmtpCredentials: smtpCredentialsToProto(creds)}), nil
}

func (s *server) DeleteSMTPCredential(ctx context.Context, req *connect.Request[credentialv1.DeleteSMTPCredentialRequest]) (*connect.Response[credentialv1.DeleteSMTPCredentialResponse], error) {
	if err := s.core.SMTPCredentials.DeleteSMTPCredential(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId()); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&credentialv1.DeleteSMTPCredentialResponse{}), nil
}

func (s *server) GetOrganization(ctx context.Context, req *connect.Request[organizationv1.GetOrganizationRequest]) (*connect.Response[organizationv1.GetOrganizationResponse], error) {
	o, err := s.core.Organizations.GetOrganization(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&organizationv1.GetOrganizationResponse{Organization: organizationToProto(o)}), nil
}

func (s *server) ListOrganizations(ctx context.Context, req *connect.Request[organizationv1.ListOrganizationsRequest]) (*connect.Response[organizationv1.ListOrganizationsResponse], error) {
	orgs, err := s.core.Organizations.ListOrganizations(ctx)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&organizationv1.ListOrganizationsResponse{Organizations: organizationsToProto(orgs)}), nil
}

func (s *server) SetPaused(ctx context.Context, req *connect.Request[organizationv1.SetPausedRequest]) (*connect.Response[organizationv1.SetPausedResponse], error) {
	o, err := s.core.Organizations.SetPaused(ctx, req.Msg.GetOrganizationId(), req.Msg.GetPaused())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&organizationv1.SetPausedResponse{Organization: organizationToProto(o)}), nil
}

func (s *server) SetPlan(ctx context.Context, req *connect.Request[organizationv1.SetPlanRequest]) (*connect.Response[organizationv1.SetPlanResponse], error) {
	o, err := s.core.Organizations.SetPlan(ctx, req.Msg.GetOrganizationId(), planFromProto(req.Msg.GetPlan()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&organizationv1.SetPlanResponse{Organization: organizationToProto(o)}), nil
}

func (s *server) Subscription(ctx context.Context, req *connect.Request[organizationv1.SubscriptionRequest]) (*connect.Response[organizationv1.SubscriptionResponse], error) {
	sub, err := s.core.Organizations.Subscription(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&organizationv1.SubscriptionResponse{Subscription: subscriptionToProto(sub)}), nil
}

func (s *server) Allow(ctx context.Context, req *connect.Request[ratelimitv1.AllowRequest]) (*connect.Response[ratelimitv1.AllowResponse], error) {
	m := req.Msg
	d, err := s.core.RateLimiter.Allow(ctx, m.GetKey(), int(m.GetLimit()), durationFromProto(m.GetWindow()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&ratelimitv1.AllowResponse{Decision: rateDecisionToProto(d)}), nil
}

func (s *server) Check(ctx context.Context, req *connect.Request[healthv1.CheckRequest]) (*connect.Response[healthv1.CheckResponse], error) {
	if err := s.core.Health.Ping(ctx); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&healthv1.CheckResponse{}), nil
}

func (s *server) CreateDomain(ctx context.Context, req *connect.Request[domainv1.CreateDomainRequest]) (*connect.Response[domainv1.CreateDomainResponse], error) {
	d, err := s.core.Domains.CreateDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetName())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&domainv1.CreateDomainResponse{Domain: domainToProto(d)}), nil
}

func (s *server) ListDomains(ctx context.Context, req *connect.Request[domainv1.ListDomainsRequest]) (*connect.Response[domainv1.ListDomainsResponse], error) {
	domains, err := s.core.Domains.ListDomains(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&domainv1.ListDomainsResponse{Domains: domainsToProto(domains)}), nil
}

func (s *server) GetDomain(ctx context.Context, req *connect.Request[domainv1.GetDomainRequest]) (*connect.Response[domainv1.GetDomainResponse], error) {
	d, err := s.core.Domains.GetDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&domainv1.GetDomainResponse{Domain: domainToProto(d)}), nil
}

func (s *server) VerifyDomain(ctx context.Context, req *connect.Request[domainv1.VerifyDomainRequest]) (*connect.Response[domainv1.VerifyDomainResponse], error) {
	d, err := s.core.Domains.VerifyDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&domainv1.VerifyDomainResponse{Domain: domainToProto(d)}), nil
}

func (s *server) SuspendDomain(ctx context.Context, req *connect.Request[domainv1.SuspendDomainRequest]) (*connect.Response[domainv1.SuspendDomainResponse], error) {
	d, err := s.core.Domains.SuspendDomain(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&domainv1.SuspendDomainResponse{Domain: domainToProto(d)}), nil
}

func (s *server) UpdateDomainTracking(ctx context.Context, req *connect.Request[domainv1.UpdateDomainTrackingRequest]) (*connect.Response[domainv1.UpdateDomainTrackingResponse], error) {
	m := req.Msg
	d, err := s.core.Domains.UpdateDomainTracking(ctx, m.GetOrganizationId(), m.GetId(), trackingSettingsFromProto(m.GetTracking()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&domainv1.UpdateDomainTrackingResponse{Domain: domainToProto(d)}), nil
}

func (s *server) Send(ctx context.Context, req *connect.Request[emailv1.SendRequest]) (*connect.Response[emailv1.SendResponse], error) {
	in, err := sendEmailFromProto(req.Msg.GetEmail())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	res, err := s.core.Emails.Send(ctx, req.Msg.GetOrganizationId(), in)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&emailv1.SendResponse{Result: sendResultToProto(res)}), nil
}

func (s *server) SendBatch(ctx context.Context, req *connect.Request[emailv1.SendBatchRequest]) (*connect.Response[emailv1.SendBatchResponse], error) {
	in, err := sendEmailsFromProto(req.Msg.GetEmails())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	results, err := s.core.Emails.SendBatch(ctx, req.Msg.GetOrganizationId(), in)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	for _, r := range results {
		// An item's error reaches the caller only as "internal error" unless it is a *ports.Error; log
		// what the caller will not see, as fail does for a whole call.
		if r.Err != nil && ports.ErrorCode(r.Err) == ports.CodeInternal {
			s.log.ErrorContext(ctx, "rpc: internal error", "procedure", req.Spec().Procedure, "index", r.Index, "err", r.Err)
		}
	}
	return connect.NewResponse(&emailv1.SendBatchResponse{Results: batchResultsToProto(results)}), nil
}

func (s *server) GetEmail(ctx context.Context, req *connect.Request[emailv1.GetEmailRequest]) (*connect.Response[emailv1.GetEmailResponse], error) {
	m, err := s.core.Emails.GetEmail(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&emailv1.GetEmailResponse{Message: messageToProto(m)}), nil
}

func (s *server) CancelEmail(ctx context.Context, req *connect.Request[emailv1.CancelEmailRequest]) (*connect.Response[emailv1.CancelEmailResponse], error) {
	m, err := s.core.Emails.CancelEmail(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&emailv1.CancelEmailResponse{Message: messageToProto(m)}), nil
}

func (s *server) ListEmails(ctx context.Context, req *connect.Request[emailv1.ListEmailsRequest]) (*connect.Response[emailv1.ListEmailsResponse], error) {
	m := req.Msg
	page, err := s.core.Emails.ListEmails(ctx, m.GetOrganizationId(), ports.ListEmailsQuery{
		Limit:  int(m.GetLimit()),
		Cursor: m.GetCursor(),
		Status: ports.MessageStatus(m.GetStatus()),
	})
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&emailv1.ListEmailsResponse{Data: messagesToProto(page.Data), NextCursor: page.NextCursor}), nil
}

func (s *server) LoadOutbound(ctx context.Context, req *connect.Request[deliveryv1.LoadOutboundRequest]) (*connect.Response[deliveryv1.LoadOutboundResponse], error) {
	m, err := s.core.Delivery.LoadOutbound(ctx, deliveryJobFromProto(req.Msg.GetJob()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliveryv1.LoadOutboundResponse{Message: outboundMessageToProto(m)}), nil
}

func (s *server) ReportDelivery(ctx context.Context, req *connect.Request[deliveryv1.ReportDeliveryRequest]) (*connect.Response[deliveryv1.ReportDeliveryResponse], error) {
	if err := s.core.Delivery.ReportDelivery(ctx, deliveryReportFromProto(req.Msg.GetReport())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliveryv1.ReportDeliveryResponse{}), nil
}

func (s *server) CreateEndpoint(ctx context.Context, req *connect.Request[webhookv1.CreateEndpointRequest]) (*connect.Response[webhookv1.CreateEndpointResponse], error) {
	m := req.Msg
	e, err := s.core.Webhooks.CreateEndpoint(ctx, m.GetOrganizationId(), m.GetUrl(), eventTypesFromProto(m.GetEventTypes()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.CreateEndpointResponse{Endpoint: createdWebhookEndpointToProto(e)}), nil
}

func (s *server) ListEndpoints(ctx context.Context, req *connect.Request[webhookv1.ListEndpointsRequest]) (*connect.Response[webhookv1.ListEndpointsResponse], error) {
	endpoints, err := s.core.Webhooks.ListEndpoints(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.ListEndpointsResponse{Endpoints: webhookEndpointsToProto(endpoints)}), nil
}

func (s *server) DeleteEndpoint(ctx context.Context, req *connect.Request[webhookv1.DeleteEndpointRequest]) (*connect.Response[webhookv1.DeleteEndpointResponse], error) {
	if err := s.core.Webhooks.DeleteEndpoint(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId()); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.DeleteEndpointResponse{}), nil
}

func (s *server) TestEndpoint(ctx context.Context, req *connect.Request[webhookv1.TestEndpointRequest]) (*connect.Response[webhookv1.TestEndpointResponse], error) {
	d, err := s.core.Webhooks.TestEndpoint(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.TestEndpointResponse{Delivery: webhookDeliveryToProto(d)}), nil
}

func (s *server) RotateSecret(ctx context.Context, req *connect.Request[webhookv1.RotateSecretRequest]) (*connect.Response[webhookv1.RotateSecretResponse], error) {
	e, err := s.core.Webhooks.RotateSecret(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.RotateSecretResponse{Endpoint: createdWebhookEndpointToProto(e)}), nil
}

func (s *server) Replay(ctx context.Context, req *connect.Request[webhookv1.ReplayRequest]) (*connect.Response[webhookv1.ReplayResponse], error) {
	m := req.Msg
	d, err := s.core.Webhooks.Replay(ctx, m.GetOrganizationId(), m.GetEndpointId(), m.GetDeliveryId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.ReplayResponse{Delivery: webhookDeliveryToProto(d)}), nil
}

func (s *server) ListDeliveries(ctx context.Context, req *connect.Request[webhookv1.ListDeliveriesRequest]) (*connect.Response[webhookv1.ListDeliveriesResponse], error) {
	deliveries, err := s.core.Webhooks.ListDeliveries(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&webhookv1.ListDeliveriesResponse{Deliveries: webhookDeliveriesToProto(deliveries)}), nil
}

func (s *server) CreateTemplate(ctx context.Context, req *connect.Request[templatev1.CreateTemplateRequest]) (*connect.Response[templatev1.CreateTemplateResponse], error) {
	t, err := s.core.Templates.CreateTemplate(ctx, req.Msg.GetOrganizationId(), req.Msg.GetName())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.CreateTemplateResponse{Template: templateToProto(t)}), nil
}

func (s *server) CreateTemplateVersion(ctx context.Context, req *connect.Request[templatev1.CreateTemplateVersionRequest]) (*connect.Response[templatev1.CreateTemplateVersionResponse], error) {
	m := req.Msg
	v, err := s.core.Templates.CreateTemplateVersion(ctx, m.GetOrganizationId(), m.GetTemplateId(), newTemplateVersionFromProto(m.GetVersion()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.CreateTemplateVersionResponse{Version: templateVersionToProto(v)}), nil
}

func (s *server) PublishTemplate(ctx context.Context, req *connect.Request[templatev1.PublishTemplateRequest]) (*connect.Response[templatev1.PublishTemplateResponse], error) {
	m := req.Msg
	t, err := s.core.Templates.PublishTemplate(ctx, m.GetOrganizationId(), m.GetTemplateId(), int(m.GetVersion()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.PublishTemplateResponse{Template: templateToProto(t)}), nil
}

func (s *server) ListTemplates(ctx context.Context, req *connect.Request[templatev1.ListTemplatesRequest]) (*connect.Response[templatev1.ListTemplatesResponse], error) {
	templates, err := s.core.Templates.ListTemplates(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.ListTemplatesResponse{Templates: templatesToProto(templates)}), nil
}

func (s *server) GetTemplate(ctx context.Context, req *connect.Request[templatev1.GetTemplateRequest]) (*connect.Response[templatev1.GetTemplateResponse], error) {
	t, err := s.core.Templates.GetTemplate(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.GetTemplateResponse{Template: templateToProto(t)}), nil
}

func (s *server) RenderTemplate(ctx context.Context, req *connect.Request[templatev1.RenderTemplateRequest]) (*connect.Response[templatev1.RenderTemplateResponse], error) {
	if s.renderer == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("rpc: this core's template service does not render"))
	}
	m := req.Msg
	vars, err := jsonObjectFromProto(m.GetVariablesJson())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), fmt.Errorf("template variables: %w", err))
	}
	r, err := s.renderer.RenderTemplate(ctx, m.GetOrganizationId(), m.GetTemplateId(), vars)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&templatev1.RenderTemplateResponse{Rendered: renderedTemplateToProto(r)}), nil
}

func (s *server) ListSuppressions(ctx context.Context, req *connect.Request[deliverabilityv1.ListSuppressionsRequest]) (*connect.Response[deliverabilityv1.ListSuppressionsResponse], error) {
	suppressions, err := s.core.Deliverability.ListSuppressions(ctx, req.Msg.GetOrganizationId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListSuppressionsResponse{Suppressions: suppressionsToProto(suppressions)}), nil
}

func (s *server) CreateSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.CreateSuppressionRequest]) (*connect.Response[deliverabilityv1.CreateSuppressionResponse], error) {
	sup, err := s.core.Deliverability.CreateSuppression(ctx, req.Msg.GetOrganizationId(), newSuppressionFromProto(req.Msg.GetSuppression()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.CreateSuppressionResponse{Suppression: suppressionToProto(sup)}), nil
}

func (s *server) DeleteSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.DeleteSuppressionRequest]) (*connect.Response[deliverabilityv1.DeleteSuppressionResponse], error) {
	deleted, err := s.core.Deliverability.DeleteSuppression(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.DeleteSuppressionResponse{Deleted: deleted}), nil
}

func (s *server) ListGlobalSuppressions(ctx context.Context, req *connect.Request[deliverabilityv1.ListGlobalSuppressionsRequest]) (*connect.Response[deliverabilityv1.ListGlobalSuppressionsResponse], error) {
	suppressions, err := s.core.Deliverability.ListGlobalSuppressions(ctx)
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListGlobalSuppressionsResponse{Suppressions: suppressionsToProto(suppressions)}), nil
}

func (s *server) CreateGlobalSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.CreateGlobalSuppressionRequest]) (*connect.Response[deliverabilityv1.CreateGlobalSuppressionResponse], error) {
	sup, err := s.core.Deliverability.CreateGlobalSuppression(ctx, newSuppressionFromProto(req.Msg.GetSuppression()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.CreateGlobalSuppressionResponse{Suppression: suppressionToProto(sup)}), nil
}

func (s *server) DeleteGlobalSuppression(ctx context.Context, req *connect.Request[deliverabilityv1.DeleteGlobalSuppressionRequest]) (*connect.Response[deliverabilityv1.DeleteGlobalSuppressionResponse], error) {
	deleted, err := s.core.Deliverability.DeleteGlobalSuppression(ctx, req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.DeleteGlobalSuppressionResponse{Deleted: deleted}), nil
}

func (s *server) ListBounces(ctx context.Context, req *connect.Request[deliverabilityv1.ListBouncesRequest]) (*connect.Response[deliverabilityv1.ListBouncesResponse], error) {
	page, err := s.core.Deliverability.ListBounces(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListBouncesResponse{Data: bouncesToProto(page.Data), NextCursor: page.NextCursor}), nil
}

func (s *server) ListComplaints(ctx context.Context, req *connect.Request[deliverabilityv1.ListComplaintsRequest]) (*connect.Response[deliverabilityv1.ListComplaintsResponse], error) {
	page, err := s.core.Deliverability.ListComplaints(ctx, req.Msg.GetOrganizationId(), pageQueryFromProto(req.Msg.GetQuery()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.ListComplaintsResponse{Data: complaintsToProto(page.Data), NextCursor: page.NextCursor}), nil
}

func (s *server) AcceptsRecipient(ctx context.Context, req *connect.Request[deliverabilityv1.AcceptsRecipientRequest]) (*connect.Response[deliverabilityv1.AcceptsRecipientResponse], error) {
	ok, err := s.core.Feedback.AcceptsRecipient(ctx, string(req.Msg.GetRcpt()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.AcceptsRecipientResponse{Accepted: ok}), nil
}

func (s *server) RecordBounce(ctx context.Context, req *connect.Request[deliverabilityv1.RecordBounceRequest]) (*connect.Response[deliverabilityv1.RecordBounceResponse], error) {
	if err := s.core.Feedback.RecordBounce(ctx, bounceReportFromProto(req.Msg.GetReport())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.RecordBounceResponse{}), nil
}

func (s *server) RecordComplaint(ctx context.Context, req *connect.Request[deliverabilityv1.RecordComplaintRequest]) (*connect.Response[deliverabilityv1.RecordComplaintResponse], error) {
	if err := s.core.Feedback.RecordComplaint(ctx, complaintReportFromProto(req.Msg.GetReport())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&deliverabilityv1.RecordComplaintResponse{}), nil
}

func (s *server) Open(ctx context.Context, req *connect.Request[trackingv1.OpenRequest]) (*connect.Response[trackingv1.OpenResponse], error) {
	if err := s.core.Tracking.Open(ctx, string(req.Msg.GetToken())); err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&trackingv1.OpenResponse{}), nil
}

func (s *server) Click(ctx context.Context, req *connect.Request[trackingv1.ClickRequest]) (*connect.Response[trackingv1.ClickResponse], error) {
	url, err := s.core.Tracking.Click(ctx, string(req.Msg.GetToken()))
	if err != nil {
		return nil, s.fail(ctx, req.Spec(), err)
	}
	return connect.NewResponse(&trackingv1.ClickResponse{Url: url}), nil
}
