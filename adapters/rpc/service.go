package rpc

import (
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	"github.com/postmill/postmill/adapters/rpc/gen/postmill/account/v1/accountv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/analytics/v1/analyticsv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/billing/v1/billingv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/broadcast/v1/broadcastv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/contact/v1/contactv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/credential/v1/credentialv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1/deliverabilityv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/delivery/v1/deliveryv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/dmarc/v1/dmarcv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1/domainv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1/emailv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/health/v1/healthv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/inbound/v1/inboundv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1/organizationv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1/ratelimitv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/reputation/v1/reputationv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/segment/v1/segmentv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1/templatev1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/topic/v1/topicv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/tracking/v1/trackingv1connect"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1/webhookv1connect"
)

// service is one row of the table NewHandler and NewClient are built from: a Connect service of proto/
// and the fields of ports.Core it carries. Neither function names a service; each area's file registers
// the services of its proto package from init, so a new service is a new proto and a new file.
type service struct {
	// mount returns the service's path and its handler serving what core offers, or ok false when core
	// offers none of it, which leaves the service unmounted.
	mount func(core ports.Core, env handlerEnv) (path string, h http.Handler, ok bool)
	// fill sets the fields of core that the service's client implements.
	fill func(core *ports.Core, env clientEnv)
}

// handlerEnv is what every service's handler is built with.
type handlerEnv struct {
	log  *slog.Logger
	opts []connect.HandlerOption
}

// clientEnv is what every service's generated client is built with.
type clientEnv struct {
	httpClient connect.HTTPClient
	baseURL    string
	opts       []connect.ClientOption
}

// services is the table. The areas' init functions fill it before main runs; after that it is only read.
var services []service

// callers is the allow-list the server's authentication enforces: for each Connect service, the tiers
// whose credentials may call it. A procedure with a row of its own follows that row instead of its
// service's. A service or procedure without a row is called by no tier, so a new service is closed until
// it gets its row here; TestEveryServiceHasCallers fails until it does. Each row is what the tier's code
// uses and nothing more: the edge serves the tenant API and the public pages, the MTA loads what it
// signs and reports outcomes, the inbound tier asks about recipients and records feedback, and every
// tier asks for health to answer its own readiness.
var callers = map[string][]Tier{
	accountv1connect.AccountServiceName:                      {TierEdge},
	accountv1connect.AuthServiceName:                         {TierEdge},
	credentialv1connect.APIKeyServiceName:                    {TierEdge},
	credentialv1connect.SMTPCredentialServiceName:            {TierEdge},
	organizationv1connect.OrganizationServiceName:            {TierEdge},
	billingv1connect.BillingServiceName:                      {TierEdge},
	reputationv1connect.ReputationServiceName:                {TierEdge},
	dmarcv1connect.DMARCServiceName:                          {TierEdge},
	dmarcv1connect.DMARCServiceIngestDMARCReportProcedure:    {TierInbound},
	analyticsv1connect.LogServiceName:                        {TierEdge},
	analyticsv1connect.AnalyticsServiceName:                  {TierEdge},
	ratelimitv1connect.RateLimitServiceName:                  {TierEdge},
	domainv1connect.DomainServiceName:                        {TierEdge},
	emailv1connect.EmailServiceName:                          {TierEdge},
	webhookv1connect.WebhookServiceName:                      {TierEdge},
	templatev1connect.TemplateServiceName:                    {TierEdge},
	deliverabilityv1connect.DeliverabilityServiceName:        {TierEdge},
	trackingv1connect.TrackingServiceName:                    {TierEdge},
	contactv1connect.ContactServiceName:                      {TierEdge},
	contactv1connect.PublicPreferenceServiceName:             {TierEdge},
	topicv1connect.TopicServiceName:                          {TierEdge},
	segmentv1connect.SegmentServiceName:                      {TierEdge},
	deliveryv1connect.DeliveryServiceName:                    {TierMTA},
	deliverabilityv1connect.FeedbackServiceName:              {TierInbound},
	inboundv1connect.InboundServiceName:                      {TierEdge},
	broadcastv1connect.BroadcastServiceName:                  {TierEdge},
	broadcastv1connect.UnsubscribeServiceName:                {TierEdge},
	inboundv1connect.ReceiveServiceName:                      {TierInbound},
	healthv1connect.HealthServiceName:                        {TierEdge, TierMTA, TierInbound},
	templatev1connect.TemplateServiceRenderTemplateProcedure: nil, // sending renders inside the core
}

// register adds rows to the table; only init functions call it.
func register(rows ...service) {
	services = append(services, rows...)
}

// portService is the row of a service that carries exactly one field of ports.Core, which field points
// at. newHandler and newClient are the generated constructors; newServer wraps the field's value in the
// generated handler interface, and newPortClient wraps the generated client in the field's interface.
// The service is mounted when the field is set.
func portService[P, H, C any](
	field func(*ports.Core) *P,
	newHandler func(H, ...connect.HandlerOption) (string, http.Handler),
	newServer func(P, *slog.Logger) H,
	newClient func(connect.HTTPClient, string, ...connect.ClientOption) C,
	newPortClient func(C) P,
) service {
	return service{
		mount: func(core ports.Core, env handlerEnv) (string, http.Handler, bool) {
			port := *field(&core)
			// P is an interface type: a nil field converts to a nil any.
			if any(port) == nil {
				return "", nil, false
			}
			path, h := newHandler(newServer(port, env.log), env.opts...)
			return path, h, true
		},
		fill: func(core *ports.Core, env clientEnv) {
			*field(core) = newPortClient(newClient(env.httpClient, env.baseURL, env.opts...))
		},
	}
}
