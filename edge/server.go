package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/postmill/postmill/ports"
)

// DefaultMaxBodyBytes bounds request bodies when Config.MaxBodyBytes is zero: large enough for every JSON
// body of SPEC §4.1, small enough that a client cannot make the edge buffer much per request.
const DefaultMaxBodyBytes int64 = 1 << 20

// SendMaxBodyBytes bounds the body of POST /v1/emails a little above the largest valid send: attachments
// travel as base64 inside the JSON, so the SPEC §8 total of 25 MiB decoded is 33.4 MiB of base64; html and
// text take up to 5 MiB each (ports.MaxBodyPartBytes); the remaining 4.6 MiB carries the escapes, headers
// and the JSON around them. A larger body is read on, unbuffered, for a size bound it breaks (a 400 naming
// the field), else refused with 413. The limit applies only to the send routes (Config.MaxBodyBytes when
// larger).
const SendMaxBodyBytes int64 = 48 << 20

// BatchMaxBodyBytes bounds the body of POST /v1/emails/batch: one item may be as large as the largest
// single send, and the other items (up to 500) share the remaining 8 MiB. Batches of many large messages
// belong in several requests.
const BatchMaxBodyBytes int64 = 56 << 20

// TemplateMaxBodyBytes bounds the body of POST /v1/templates/{id}/versions (Config.MaxBodyBytes when
// larger): a version carries its subject, HTML, text and React source at once. Mailbox providers clip HTML
// beyond about 100 KiB, so 4 MiB leaves room for generous markup and inline images while keeping what one
// request makes the edge buffer far below a send's bound.
const TemplateMaxBodyBytes int64 = 4 << 20

// readyTimeout bounds one readiness check so a hung dependency answers 503 rather than hanging the probe.
const readyTimeout = 5 * time.Second

// readyFresh is how long /readyz answers from the last readiness check: a flood of probes costs the
// database at most one check per readyFresh.
const readyFresh = time.Second

// Config is what the composition root decides for the edge; the zero value works (no trusted proxies,
// JSON logs on stderr, a private metrics registry, 1 MiB bodies, the default Timeouts, ready as soon as the
// core's Health answers).
type Config struct {
	// TrustedProxies are the networks whose X-Forwarded-For is believed when deriving the client IP used
	// by the per-IP rate limits of SPEC §8. Empty means the socket peer is the client.
	TrustedProxies []netip.Prefix
	// Ready reports whether every part of the process has started and the database answers; /readyz
	// calls it. Nil falls back to core.Health, then to always ready.
	Ready func(context.Context) error
	// Logger receives the access log and internal errors; every line of a request carries request_id.
	Logger *slog.Logger
	// Registerer receives the edge's metrics; nil keeps them in a private registry. The edge does not
	// serve /metrics: the composition root exposes the registry on its own listener, off the public one.
	Registerer prometheus.Registerer
	// MaxBodyBytes bounds request bodies; a larger body is a 413. Zero means DefaultMaxBodyBytes. The send
	// routes take SendMaxBodyBytes and BatchMaxBodyBytes, and template versions TemplateMaxBodyBytes,
	// instead, unless MaxBodyBytes is larger.
	MaxBodyBytes int64
	// BaseURL is the public address clients reach the edge at (POSTMILL_BASE_URL); the OpenAPI document
	// names it in servers. Empty leaves servers out, which readers take as the document's own origin.
	BaseURL string
	// AdminWithout2FA lets platform admins use /v1/admin/* without two-factor authentication on their
	// account (POSTMILL_ADMIN_REQUIRE_2FA=false, for tests and local runs). By default such an admin gets 403.
	AdminWithout2FA bool
	// RequestLogOff turns the request log capture off (POSTMILL_REQUEST_LOG=false): /v1 requests are not
	// recorded, GET /v1/logs still answers with what is stored.
	RequestLogOff bool
	// InFlight, when set, counts the HTTP requests being served, for other work of the process to give way
	// to (the MTA's signatures, while it is above their number of threads).
	InFlight *atomic.Int64
	// Timeouts bound how long HTTPServer waits for requests and takes to answer; zero fields take the
	// defaults (timeouts.go).
	Timeouts Timeouts
}

// Validate rejects configurations that would silently lose metrics or bodies.
func (c Config) Validate() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("edge: MaxBodyBytes must not be negative (got %d)", c.MaxBodyBytes)
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("edge: BaseURL must be an absolute http or https URL without query or fragment (got %q)", c.BaseURL)
		}
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return errors.New("edge: TrustedProxies holds an invalid prefix")
		}
	}
	return nil
}

// Server is the REST edge: a huma API on the standard library mux, wrapped in the request-scoped
// observability every route shares.
type Server struct {
	cfg     Config
	core    ports.Core
	logger  *slog.Logger
	metrics *httpMetrics
	tracer  trace.Tracer
	mux     *http.ServeMux
	api     huma.API
	batch   *batchSchemas // what POST /v1/emails/batch checks by hand (email.go)
	handler http.Handler
	ready   *readiness
	logs    *logShipper // nil without core.Logs
}

// New builds the edge over the core's driving interfaces. It fails when cfg is invalid or the core lacks
// a service the routes need, so a wiring mistake stops the process at start rather than at a request.
func New(cfg Config, core ports.Core) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case core.Accounts == nil, core.Auth == nil, core.APIKeys == nil, core.SMTPCredentials == nil,
		core.Organizations == nil, core.RateLimiter == nil, core.Domains == nil, core.Emails == nil,
		core.Webhooks == nil, core.Templates == nil, core.Deliverability == nil, core.Tracking == nil:
		return nil, errors.New("edge: ports.Core needs Accounts, Auth, APIKeys, SMTPCredentials, Organizations, " +
			"RateLimiter, Domains, Emails, Webhooks, Templates, Deliverability and Tracking")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	s := &Server{cfg: cfg, core: core, logger: cfg.Logger, tracer: otel.Tracer("github.com/postmill/postmill/edge")}
	if s.logger == nil {
		s.logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}

	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	var err error
	if s.metrics, err = newHTTPMetrics(reg); err != nil {
		return nil, fmt.Errorf("edge: registering metrics: %w", err)
	}

	docs, err := newDocsSite()
	if err != nil {
		return nil, fmt.Errorf("edge: loading the embedded API reference: %w", err)
	}

	s.mux = http.NewServeMux()
	s.api = humago.New(s.mux, apiConfig(cfg))
	s.api.OpenAPI().OnAddOperation = append(s.api.OpenAPI().OnAddOperation, s.sizeBodyTimeouts)
	s.api.UseMiddleware(s.bodyDeadlines, s.guard, s.notePrincipal)
	s.registerAccountRoutes()
	s.registerCredentialRoutes()
	s.registerOrganizationRoutes()
	s.registerDomainRoutes()
	s.registerEmailRoutes()
	s.registerWebhookRoutes()
	s.registerTemplateRoutes()
	s.registerDeliverabilityRoutes()
	s.registerContactRoutes()
	s.registerTopicRoutes()
	s.registerSegmentRoutes()
	s.registerPreferenceRoutes()
	s.registerTrackingRoutes()
	s.registerBroadcastRoutes()
	s.registerUnsubscribeRoutes()
	s.registerBillingRoutes()
	s.registerReputationRoutes()
	s.registerDMARCRoutes()
	s.registerPlatformRoutes()
	s.registerLogRoutes()
	s.registerAnalyticsRoutes()
	s.registerInboundRoutes()
	documentValidationAs400(s.api.OpenAPI())
	if err := documentExamples(s.api.OpenAPI()); err != nil {
		return nil, err
	}

	s.mux.HandleFunc("GET /docs", docs.servePage)
	s.mux.HandleFunc("GET /docs/assets/{file...}", docs.serveAsset)

	ready := cfg.Ready
	if ready == nil && core.Health != nil {
		ready = core.Health.Ping
	}
	s.ready = newReadiness(ready, readyFresh, time.Now)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("/", notFound)

	s.handler = s.observe(s.captureRequests(securityHeaders(s.mux)))
	return s, nil
}

// Handler serves every route; HTTPServer puts it on a listener with the edge's timeouts.
func (s *Server) Handler() http.Handler { return s.handler }

// apiConfig is huma's default configuration without the $schema links it would add to every response
// body (the SPEC shapes are exact), without the /schemas route, and without huma's /docs page, which loads
// its viewer from a CDN: the edge serves its own from embedded files (docs.go).
func apiConfig(cfg Config) huma.Config {
	c := huma.DefaultConfig("Postmill API", "1.0.0")
	c.CreateHooks = nil
	c.SchemasPath = ""
	c.OpenAPIPath = "/v1/openapi"
	c.DocsPath = ""
	if cfg.BaseURL != "" {
		c.Servers = []*huma.Server{{URL: strings.TrimRight(cfg.BaseURL, "/"), Description: "This installation"}}
	}
	c.Info.Description = "Multi-tenant email delivery. Errors use one body: {statusCode, error, message} " +
		"plus details, constraint, retryAfterSeconds or requiredScopes where they apply."
	c.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securitySession: {
			Type:         "http",
			Scheme:       "bearer",
			BearerFormat: "JWT",
			Description:  "Dashboard session access token from /v1/auth/login, /v1/auth/signup or /v1/auth/refresh.",
		},
		securityAPIKey: {
			Type:         "http",
			Scheme:       "bearer",
			BearerFormat: "svc_live_<prefix>.<secret>",
			Description:  "API key; the listed scopes are alternatives (any one suffices).",
		},
	}
	c.Tags = []*huma.Tag{
		{Name: tagAuth, Description: "Sign-up, sign-in, token refresh and two-factor enrolment."},
		{Name: tagAPIKeys, Description: "API key administration (dashboard session)."},
		{Name: tagSMTP, Description: "SMTP submission credentials (dashboard session)."},
		{Name: tagOrganization, Description: "The signed-in organization."},
		{Name: tagAdmin, Description: "Platform administration (session of a platform admin)."},
		{Name: tagBilling, Description: "Plan and usage (API key)."},
		{Name: tagReputation, Description: "Bounce and complaint rates per sending domain, automatic protection (dashboard session)."},
		{Name: tagDomains, Description: "Sending domains: DKIM keys, the DNS records to publish, verification (dashboard session)."},
		{Name: tagEmails, Description: "Sending email and reading its timeline (API key; the list takes a dashboard session)."},
		{Name: tagWebhooks, Description: "Signed event delivery to your endpoints: endpoints, tests, secret rotation, replays and recent deliveries (API key)."},
		{Name: tagTemplates, Description: "Versioned email templates: created, versioned and published with an API key, read from the dashboard."},
		{Name: tagDeliverability, Description: "Suppressions, bounces and complaints (API key)."},
	}
	return c
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers from the last readiness check while it is younger than readyFresh (see readiness).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ready.check(r.Context()); err != nil {
		loggerFrom(r.Context()).Warn("not ready", slog.String("error", err.Error()))
		writeJSONError(w, statusProblem(http.StatusServiceUnavailable, ""))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// notFound answers every request no route matched, in the SPEC §7 shape.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeJSONError(w, statusProblem(http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path)))
}

func writeJSONError(w http.ResponseWriter, body *errorBody) {
	writeJSON(w, body.StatusCode, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"statusCode":500,"error":"Internal Server Error","message":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// documentValidationAs400 removes the 422 huma documents for every operation with inputs: SPEC §7 answers
// schema violations with 400, which humaError guarantees at run time.
func documentValidationAs400(doc *huma.OpenAPI) {
	for _, item := range doc.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if op == nil {
				continue
			}
			unprocessable, ok := op.Responses["422"]
			if !ok {
				continue
			}
			delete(op.Responses, "422")
			if _, ok := op.Responses["400"]; !ok {
				unprocessable.Description = http.StatusText(http.StatusBadRequest)
				op.Responses["400"] = unprocessable
			}
		}
	}
}
