package ports

// Core bundles the driving interfaces a tier calls. In one process they are the core's use cases; in a
// split deployment they are adapters/rpc clients, and the tier cannot tell the difference.
type Core struct {
	Accounts        AccountService
	Auth            AuthService
	APIKeys         APIKeyService
	SMTPCredentials SMTPCredentialService
	Organizations   OrganizationService
	RateLimiter     RateLimiter
	Domains         DomainService
	Emails          EmailService
	// Delivery is what the MTA tier calls. DeliveryBatch takes the same calls many jobs at a time; it is
	// nil when the implementation has no batch form, and then the Connect server answers a batch with one
	// Delivery call per item.
	Delivery      DeliveryService
	DeliveryBatch DeliveryBatcher
	Webhooks      WebhookService
	Templates     TemplateService
	// Renderer renders published templates; in one process it is the template service itself.
	Renderer       TemplateRenderer
	Deliverability DeliverabilityService
	// Feedback is what the inbound tier calls for bounces and complaints.
	Feedback FeedbackService
	// Tracking answers the open pixel and click redirects.
	Tracking TrackingService
	// Inbound manages inbound domains, routes and received mail.
	Inbound InboundService
	// Receiving is what the inbound tier calls for mail to customers' inbound domains.
	Receiving ReceiveService
	// Contacts, Topics and Segments are SPEC §4.7-§4.9; Preferences answers the public /p/prefs and
	// /p/confirm pages (SPEC §4.11).
	Contacts    ContactService
	Topics      TopicService
	Segments    SegmentService
	Preferences PublicPreferenceService
	// Broadcasts is SPEC §4.10; Unsubscribe answers the public /p/u pages (SPEC §4.11).
	Broadcasts  BroadcastService
	Unsubscribe PublicUnsubscribeService
	// Billing is the plan catalogue and subscriptions (SPEC §4.13).
	Billing BillingService
	// Reputation is GET /v1/reputation and automatic protection's state (SPEC §4.13).
	Reputation ReputationService
	// DMARC takes aggregate reports from the inbound tier and summarises them for the edge.
	DMARC DMARCService
	// Logs answers GET /v1/logs and stores the request log the edge captures; Analytics answers
	// GET /v1/analytics (SPEC §4.2). Either may be nil when the process has no analytics store.
	Logs      LogService
	Analytics AnalyticsService
	// Health answers when the core and its database answer.
	Health Pinger
}
