package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// Tokens the fake core recognises. Session tokens have the JWT shape; keys the svc_live_ shape.
const (
	userToken  = "eyJhbGciOiJIUzI1NiJ9.dXNlcg.c2ln"
	adminToken = "eyJhbGciOiJIUzI1NiJ9.YWRtaW4.c2ln"
	// admin1FAToken is an admin whose account has no two-factor authentication.
	admin1FAToken = "eyJhbGciOiJIUzI1NiJ9.YWRtaW4xZmE.c2ln"
	bogusJWT      = "eyJhbGciOiJIUzI1NiJ9.Ym9ndXM.c2ln"
	sendKey       = "svc_live_0123456789abcdef.send"
	billingKey    = "svc_live_1123456789abcdef.billing"
	starKey       = "svc_live_2123456789abcdef.star"
	unenforcedKy  = "svc_live_3123456789abcdef.legacy"

	readKey = "svc_live_4123456789abcdef.read"
	// Keys holding only one of the webhook scopes.
	webhooksReadKey  = "svc_live_5123456789abcdef.whread"
	webhooksWriteKey = "svc_live_6123456789abcdef.whwrite"
	// Keys holding only templates:write, suppressions:read or suppressions:write.
	templatesKey         = "svc_live_7123456789abcdef.tplwrite"
	suppressionsReadKey  = "svc_live_8123456789abcdef.supread"
	suppressionsWriteKey = "svc_live_9123456789abcdef.supwrite"

	userOrg  = "0190a0b0-0000-7000-8000-00000000000a"
	adminOrg = "0190a0b0-0000-7000-8000-00000000000b"
	otherOrg = "0190a0b0-0000-7000-8000-0000000000ff"
	keyID    = "0190a0b0-0000-7000-8000-000000000001"
	domainID = "0190a0b0-0000-7000-8000-0000000000d1"
	recordID = "0190a0b0-0000-7000-8000-0000000000d2"
	emailID  = "0190a0b0-0000-7000-8000-0000000000e1"

	// A webhook endpoint, one of its deliveries and the event it carried.
	webhookID  = "0190a0b0-0000-7000-8000-0000000000f1"
	deliveryID = "0190a0b0-0000-7000-8000-0000000000f2"
	eventID    = "0190a0b0-0000-7000-8000-0000000000f3"
	// An older endpoint and an older delivery, listed after the newer ones.
	oldWebhookID  = "0190a0b0-0000-7000-8000-0000000000f4"
	oldDeliveryID = "0190a0b0-0000-7000-8000-0000000000f5"

	// A template with two versions.
	templateID = "0190a0b0-0000-7000-8000-0000000000a1"
	versionID1 = "0190a0b0-0000-7000-8000-0000000000a2"
	versionID2 = "0190a0b0-0000-7000-8000-0000000000a3"

	// Suppressions, a bounce and a complaint.
	suppressionID = "0190a0b0-0000-7000-8000-0000000000b1"
	globalSuppID  = "0190a0b0-0000-7000-8000-0000000000b2"
	bounceID      = "0190a0b0-0000-7000-8000-0000000000b3"
	complaintID   = "0190a0b0-0000-7000-8000-0000000000b4"
	recipientID   = "0190a0b0-0000-7000-8000-0000000000b5"

	// dkimSecret stands for the sealed private key: no response may contain it.
	dkimSecret = "SEALED-DKIM-PRIVATE-KEY"
	// sealedWebhookSecret stands for an endpoint's sealed secret: no response may contain it.
	sealedWebhookSecret = "SEALED-WEBHOOK-SECRET"
	// plainWebhookSecret is what create and rotate answer, once.
	plainWebhookSecret = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// fakeCore implements the driving interfaces of ports.Core with canned answers and records what the edge
// passed in, so tests can assert on the HTTP concerns alone.
type fakeCore struct {
	mu    sync.Mutex
	calls []string
	// orgIDs records the organization id each tenant call received.
	orgIDs []string
	// scopes records what CreateAPIKey received.
	scopes      [][]string
	scopesIsNil []bool
	limiterKeys []string
	plans       []ports.Plan

	// Overrides.
	deny   time.Duration // when non-zero the limiter refuses with this RetryAfter
	orgErr error         // returned by GetOrganization
	panics bool          // GetOrganization panics
	limErr error         // returned by Allow
	org    ports.Organization

	// Sending domains.
	domain    ports.Domain // returned (with the caller's organization) by every DomainService method
	domainErr error        // returned by every DomainService method

	// Emails.
	sends     []ports.SendRequest   // what Send received
	batches   [][]ports.SendRequest // what SendBatch received
	sendErr   error                 // returned by Send
	batchErrs map[int]error         // per-item errors of SendBatch
	idem      map[string]string     // Idempotency-Key → message id, for replays
	email     ports.Message         // returned by GetEmail and (as cancelled) CancelEmail
	emailErr  error                 // returned by GetEmail and CancelEmail
	page      ports.EmailPage       // returned by ListEmails
	queries   []ports.ListEmailsQuery

	// Webhooks.
	endpoints   []ports.WebhookEndpoint // returned by ListEndpoints; the first is what create and rotate answer
	deliveries  []ports.WebhookDelivery // returned by ListDeliveries; the first is what test and replay answer
	webhookErr  error                   // returned by every WebhookService method
	hookCreates []webhookCreate         // what CreateEndpoint received

	// Domain tracking settings UpdateDomainTracking received; they are applied to the domain it answers.
	trackingUpdates []ports.TrackingSettings

	// Templates.
	template    ports.Template // GetTemplate answers it (with versions); the others answer it without
	templateErr error          // returned by every TemplateService method
	newVersions []ports.NewTemplateVersion
	publishes   []int
	tplNames    []string

	// Deliverability.
	suppressions       []ports.Suppression // the organization's; ListSuppressions answers them
	globalSupps        []ports.Suppression // ListGlobalSuppressions answers them
	suppressionCreates []ports.NewSuppression
	globalCreates      []ports.NewSuppression
	deletes            []string // ids DeleteSuppression and DeleteGlobalSuppression received, global ones prefixed "global:"
	deleteFound        bool     // what the delete methods answer
	deliverabilityErr  error    // returned by every DeliverabilityService method
	bouncePage         ports.BouncePage
	complaintPage      ports.ComplaintPage
	pageQueries        []ports.PageQuery

	// tracking, when set, is the core's TrackingService; otherwise every token is refused.
	tracking ports.TrackingService
}

// webhookCreate is one CreateEndpoint call as the core received it.
type webhookCreate struct {
	url        string
	eventTypes []string
}

func newFakeCore() *fakeCore {
	checked := time.Date(2026, 11, 20, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	f := &fakeCore{org: ports.Organization{
		ID: userOrg, Name: "Acme", Slug: "acme",
		CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600)),
		Plan:      ports.Plan{MonthlyLimit: 3000},
	}, endpoints: []ports.WebhookEndpoint{
		{ID: webhookID, OrganizationID: userOrg, URL: "https://hooks.example.com/postmill", Enabled: true,
			EventTypes: []string{ports.EventEmailDelivered, ports.EventEmailBounced}, Secret: []byte(sealedWebhookSecret),
			CreatedAt: time.Date(2026, 11, 2, 1, 0, 0, 0, time.FixedZone("CET", 3600))},
		{ID: oldWebhookID, OrganizationID: userOrg, URL: "http://old.example.com/hook", Secret: []byte(sealedWebhookSecret),
			CreatedAt: time.Date(2026, 10, 2, 1, 0, 0, 0, time.UTC)},
	}, deliveries: []ports.WebhookDelivery{
		{ID: deliveryID, OrganizationID: userOrg, EndpointID: webhookID, EventID: "evt_replay_" + eventID,
			EventType: ports.EventEmailBounced, Status: ports.WebhookFailed, Attempts: 2, ResponseCode: 503,
			NextRetryAt: ptr(time.Date(2026, 11, 21, 10, 30, 0, 0, time.FixedZone("CET", 3600))),
			CreatedAt:   time.Date(2026, 11, 21, 9, 0, 0, 0, time.FixedZone("CET", 3600)),
			Payload:     []byte(`{"id":"evt_replay_x","data":{"secret-payload":true}}`), OriginalEventID: eventID},
		{ID: oldDeliveryID, OrganizationID: userOrg, EndpointID: oldWebhookID, EventID: eventID,
			EventType: ports.EventEmailDelivered, Status: ports.WebhookDelivered, Attempts: 1, ResponseCode: 204,
			DeliveredAt: ptr(time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)), CreatedAt: time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)},
	}, domain: ports.Domain{
		ID: domainID, Name: "example.org", Status: ports.DomainPending, Region: "eu-west-1",
		DKIMSelector: "pmabcdefghij", DKIMPrivateKey: []byte(dkimSecret), DKIMPublicKey: "MIIBIjANBgkq",
		CreatedAt: time.Date(2026, 11, 1, 1, 2, 3, 0, time.FixedZone("CET", 3600)),
		Records: []ports.DNSRecord{
			{ID: recordID, Type: ports.RecordSPF, Host: "example.org", Value: "v=spf1 include:spf.postmill.local ~all", TTL: 3600, Required: true, Verified: true, CheckedAt: &checked},
			{ID: recordID, Type: ports.RecordDKIM, Host: "pmabcdefghij._domainkey.example.org", Value: "v=DKIM1; k=rsa; p=MIIBIjANBgkq", TTL: 3600, Required: true},
			{ID: recordID, Type: ports.RecordDMARC, Host: "_dmarc.example.org", Value: "v=DMARC1; p=quarantine; rua=mailto:dmarc@reports.postmill.local; fo=1", TTL: 3600},
			{ID: recordID, Type: ports.RecordReturnPath, Host: "bounce.example.org", Value: "bounces.postmill.local", TTL: 3600, Required: true},
			{ID: recordID, Type: ports.RecordTracking, Host: "track.example.org", Value: "track.postmill.local", TTL: 3600},
		},
	}}
	published := 1
	f.template = ports.Template{
		ID: templateID, Name: "Welcome", CurrentVersion: &published,
		CreatedAt: time.Date(2026, 11, 10, 9, 0, 0, 0, time.FixedZone("CET", 3600)),
		UpdatedAt: time.Date(2026, 11, 11, 9, 0, 0, 0, time.FixedZone("CET", 3600)),
		Versions: []ports.TemplateVersion{
			{ID: versionID1, TemplateID: templateID, Version: 1, Subject: "Hello {{ user.firstName }}",
				Text: "Hi {{ user.firstName }}", CreatedAt: time.Date(2026, 11, 10, 9, 5, 0, 0, time.UTC)},
			{ID: versionID2, TemplateID: templateID, Version: 2, Subject: "Hello again",
				HTML: "<p>rendered</p>", ReactSource: "export default () => <p>rendered</p>",
				CreatedAt: time.Date(2026, 11, 10, 9, 6, 0, 0, time.UTC)},
		},
	}
	f.suppressions = []ports.Suppression{
		{ID: suppressionID, OrganizationID: userOrg, Address: "bounced@example.net", Scope: ports.SuppressionScopeTenant,
			Reason: ports.SuppressionBounce, CreatedAt: time.Date(2026, 11, 12, 1, 0, 0, 0, time.FixedZone("CET", 3600))},
		{ID: globalSuppID, OrganizationID: userOrg, Address: "example.com", Scope: ports.SuppressionScopeDomain,
			Reason: ports.SuppressionManual, CreatedAt: time.Date(2026, 11, 11, 1, 0, 0, 0, time.UTC)},
	}
	f.globalSupps = []ports.Suppression{
		{ID: globalSuppID, Address: "spamtrap.example", Scope: ports.SuppressionScopeGlobal,
			Reason: ports.SuppressionInvalid, CreatedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
	}
	f.bouncePage = ports.BouncePage{Data: []ports.Bounce{
		{ID: bounceID, OrganizationID: userOrg, MessageID: emailID, RecipientID: recipientID, Address: "gone@example.net",
			Type: ports.BounceHard, Status: "5.1.1", Action: "failed", DiagnosticCode: "smtp; 550 5.1.1 user unknown",
			RemoteMTA: "mx.example.net", ReportingMTA: "mta.postmill.local",
			CreatedAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("CET", 3600))},
		{ID: bounceID, OrganizationID: userOrg, MessageID: emailID, RecipientID: recipientID, Address: "full@example.net",
			Type: ports.BounceSoft, CreatedAt: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)},
	}, NextCursor: "cursor-2"}
	arrived := time.Date(2026, 11, 21, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	f.complaintPage = ports.ComplaintPage{Data: []ports.Complaint{
		{ID: complaintID, OrganizationID: userOrg, MessageID: emailID, RecipientID: recipientID, Address: "angry@example.net",
			FeedbackType: "abuse", UserAgent: "SomeISP-FBL/1.0", ReportedDomain: "example.org", SourceIP: "192.0.2.10",
			ArrivalDate: &arrived, CreatedAt: time.Date(2026, 11, 21, 8, 0, 0, 0, time.FixedZone("CET", 3600))},
		{ID: complaintID, OrganizationID: userOrg, MessageID: emailID, Address: "quiet@example.net",
			CreatedAt: time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)},
	}}
	return f
}

func (f *fakeCore) core() ports.Core {
	var tracking ports.TrackingService = refusingTracking{}
	if f.tracking != nil {
		tracking = f.tracking
	}
	return ports.Core{
		Accounts: f, Auth: f, APIKeys: f, SMTPCredentials: f, Organizations: f, RateLimiter: f,
		Domains: f, Emails: f, Webhooks: f, Templates: f, Deliverability: f, Tracking: tracking,
	}
}

// refusingTracking is the TrackingService of tests that do not exercise tracking: it made no token, so it
// accepts none.
type refusingTracking struct{}

func (refusingTracking) Open(context.Context, string) error {
	return ports.Errorf(ports.CodeInvalidArgument, "unknown tracking token")
}

func (refusingTracking) Click(context.Context, string) (string, error) {
	return "", ports.Errorf(ports.CodeInvalidArgument, "unknown tracking token")
}

func (f *fakeCore) record(call, orgID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if orgID != "" {
		f.orgIDs = append(f.orgIDs, orgID)
	}
}

func (f *fakeCore) called(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (f *fakeCore) lastOrgID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.orgIDs) == 0 {
		return ""
	}
	return f.orgIDs[len(f.orgIDs)-1]
}

// AccountService.

func (f *fakeCore) Signup(_ context.Context, in ports.SignupInput) (ports.SignupResult, error) {
	f.record("Signup", "")
	return ports.SignupResult{UserID: "0190a0b0-0000-7000-8000-0000000000c1", OrganizationID: userOrg,
		Tokens: ports.TokenPair{AccessToken: "access-" + in.Email, RefreshToken: "refresh"}}, nil
}

func (f *fakeCore) Login(_ context.Context, in ports.LoginInput) (ports.TokenPair, error) {
	f.record("Login", in.OrgID)
	return ports.TokenPair{AccessToken: "a", RefreshToken: "r"}, nil
}

func (f *fakeCore) Refresh(context.Context, string) (ports.TokenPair, error) {
	f.record("Refresh", "")
	return ports.TokenPair{AccessToken: "a2", RefreshToken: "r2"}, nil
}

func (f *fakeCore) Logout(_ context.Context, refreshToken string) error {
	f.record("Logout", "")
	if refreshToken == "unknown" {
		return ports.Unauthenticated("invalid or expired refresh token")
	}
	return nil
}

func (f *fakeCore) EnrollTOTP(_ context.Context, p ports.Principal, password string) (ports.TOTPEnrollment, error) {
	f.record("EnrollTOTP", p.OrganizationID)
	if password == "wrong one" {
		return ports.TOTPEnrollment{}, ports.Unauthenticated("invalid password")
	}
	return ports.TOTPEnrollment{Secret: "JBSWY3DPEHPK3PXP", OTPAuthURL: "otpauth://totp/Postmill:u?secret=JBSWY3DPEHPK3PXP"}, nil
}

func (f *fakeCore) VerifyTOTP(_ context.Context, p ports.Principal, _ string) error {
	f.record("VerifyTOTP", p.OrganizationID)
	return nil
}

// AuthService.

func (f *fakeCore) AuthenticateAPIKey(_ context.Context, token string) (ports.Principal, error) {
	f.record("AuthenticateAPIKey", "")
	p := ports.Principal{Kind: ports.PrincipalAPIKey, OrganizationID: userOrg, APIKeyID: keyID, ScopesEnforced: true}
	switch token {
	case sendKey:
		p.Scopes = []string{ports.ScopeEmailsSend}
	case billingKey:
		p.Scopes = []string{ports.ScopeBillingRead}
	case starKey:
		p.Scopes = []string{ports.ScopeAll}
	case unenforcedKy:
		p.ScopesEnforced = false
	case readKey:
		p.Scopes = []string{ports.ScopeEmailsRead}
	case webhooksReadKey:
		p.Scopes = []string{ports.ScopeWebhooksRead}
	case webhooksWriteKey:
		p.Scopes = []string{ports.ScopeWebhooksWrite}
	case templatesKey:
		p.Scopes = []string{ports.ScopeTemplatesWrite}
	case suppressionsReadKey:
		p.Scopes = []string{ports.ScopeSuppressionsRead}
	case suppressionsWriteKey:
		p.Scopes = []string{ports.ScopeSuppressionsWrite}
	default:
		return ports.Principal{}, ports.Unauthenticated("Invalid API key")
	}
	return p, nil
}

func (f *fakeCore) AuthenticateSession(_ context.Context, token string) (ports.Principal, error) {
	f.record("AuthenticateSession", "")
	switch token {
	case userToken:
		return ports.Principal{Kind: ports.PrincipalSession, OrganizationID: userOrg, UserID: "u1"}, nil
	case adminToken:
		return ports.Principal{Kind: ports.PrincipalSession, OrganizationID: adminOrg, UserID: "u2", IsAdmin: true, TwoFactor: true}, nil
	case admin1FAToken:
		return ports.Principal{Kind: ports.PrincipalSession, OrganizationID: adminOrg, UserID: "u3", IsAdmin: true}, nil
	}
	return ports.Principal{}, ports.Unauthenticated("Invalid session token")
}

func (f *fakeCore) AuthenticateSMTP(context.Context, string, string) (ports.Principal, error) {
	f.record("AuthenticateSMTP", "")
	return ports.Principal{}, ports.Unauthenticated("SMTP credentials are not used by the REST edge")
}

// APIKeyService.

func (f *fakeCore) ListAPIKeys(_ context.Context, orgID string) ([]ports.APIKey, error) {
	f.record("ListAPIKeys", orgID)
	used := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("X", -5*3600))
	return []ports.APIKey{
		{ID: keyID, OrganizationID: orgID, Name: "used", Prefix: "0123456789abcdef", TokenHash: []byte("secret-hash"),
			Scopes: []string{"emails:send"}, ScopesEnforced: true, LastUsedAt: &used, CreatedAt: used},
		{ID: keyID, OrganizationID: orgID, Name: "fresh", Prefix: "1123456789abcdef", TokenHash: []byte("secret-hash"),
			CreatedAt: used},
	}, nil
}

func (f *fakeCore) CreateAPIKey(_ context.Context, orgID, name string, scopes []string) (ports.CreatedAPIKey, error) {
	f.record("CreateAPIKey", orgID)
	f.mu.Lock()
	f.scopes = append(f.scopes, scopes)
	f.scopesIsNil = append(f.scopesIsNil, scopes == nil)
	f.mu.Unlock()
	if scopes == nil {
		scopes = ports.DefaultScopes
	}
	return ports.CreatedAPIKey{
		APIKey: ports.APIKey{ID: keyID, OrganizationID: orgID, Name: name, Prefix: "0123456789abcdef",
			TokenHash: []byte("secret-hash"), Scopes: scopes, ScopesEnforced: true, CreatedAt: time.Now()},
		Token: "svc_live_0123456789abcdef.plaintext",
	}, nil
}

func (f *fakeCore) RevokeAPIKey(_ context.Context, orgID, id string) error {
	f.record("RevokeAPIKey:"+id, orgID)
	return nil
}

// SMTPCredentialService.

func (f *fakeCore) CreateSMTPCredential(_ context.Context, orgID string) (ports.CreatedSMTPCredential, error) {
	f.record("CreateSMTPCredential", orgID)
	return ports.CreatedSMTPCredential{
		SMTPCredential: ports.SMTPCredential{ID: keyID, OrganizationID: orgID, Username: "smtp_abc",
			PasswordHash: "$argon2id$hash", Host: "smtp.example", Port: 1587, CreatedAt: time.Now()},
		Password: "plain-smtp-password",
	}, nil
}

func (f *fakeCore) ListSMTPCredentials(_ context.Context, orgID string) ([]ports.SMTPCredential, error) {
	f.record("ListSMTPCredentials", orgID)
	return []ports.SMTPCredential{{ID: keyID, OrganizationID: orgID, Username: "smtp_abc",
		PasswordHash: "$argon2id$hash", Host: "smtp.example", Port: 1587, CreatedAt: time.Now()}}, nil
}

func (f *fakeCore) DeleteSMTPCredential(_ context.Context, orgID, _ string) error {
	f.record("DeleteSMTPCredential", orgID)
	return nil
}

// OrganizationService.

func (f *fakeCore) GetOrganization(_ context.Context, orgID string) (ports.Organization, error) {
	f.record("GetOrganization", orgID)
	if f.panics {
		panic("boom: secret state")
	}
	if f.orgErr != nil {
		return ports.Organization{}, f.orgErr
	}
	o := f.org
	o.ID = orgID
	return o, nil
}

func (f *fakeCore) ListOrganizations(context.Context) ([]ports.Organization, error) {
	f.record("ListOrganizations", "")
	return []ports.Organization{f.org}, nil
}

func (f *fakeCore) SetPaused(_ context.Context, orgID string, paused bool) (ports.Organization, error) {
	f.record("SetPaused", orgID)
	o := f.org
	o.ID, o.Paused = orgID, paused
	return o, nil
}

func (f *fakeCore) SetPlan(_ context.Context, orgID string, plan ports.Plan) (ports.Organization, error) {
	f.record("SetPlan", orgID)
	f.mu.Lock()
	f.plans = append(f.plans, plan)
	f.mu.Unlock()
	o := f.org
	o.ID, o.Plan = orgID, plan
	return o, nil
}

func (f *fakeCore) Subscription(_ context.Context, orgID string) (ports.Subscription, error) {
	f.record("Subscription", orgID)
	return ports.Subscription{OrganizationID: orgID, Plan: ports.Plan{MonthlyLimit: 3000, WarmupCap: 0},
		PeriodStart: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), PeriodEnd: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		EmailsSent: 42}, nil
}

// RateLimiter.

func (f *fakeCore) Allow(_ context.Context, key string, limit int, window time.Duration) (ports.RateDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limiterKeys = append(f.limiterKeys, key+"|"+window.String())
	if f.limErr != nil {
		return ports.RateDecision{}, f.limErr
	}
	if f.deny > 0 {
		return ports.RateDecision{Allowed: false, Count: limit + 1, Limit: limit, RetryAfter: f.deny}, nil
	}
	return ports.RateDecision{Allowed: true, Count: 1, Limit: limit}, nil
}

func (f *fakeCore) limiterKeysSnapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.limiterKeys...)
}

// syncBuffer collects log output from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes the JSON log lines.
func (b *syncBuffer) lines(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			tb.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// testBundle is one edge under test with its fake core, logs and metrics registry.
type testBundle struct {
	fake *fakeCore
	srv  *httptest.Server
	logs *syncBuffer
	reg  *prometheus.Registry
}

// MustStartEdge serves an edge over fake on a loopback httptest server; edit mutates the config first.
func MustStartEdge(tb testing.TB, fake *fakeCore, edit func(*edge.Config)) *testBundle {
	tb.Helper()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	cfg := edge.Config{
		Logger:     slog.New(slog.NewJSONHandler(logs, nil)),
		Registerer: reg,
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := edge.New(cfg, fake.core())
	if err != nil {
		tb.Fatalf("edge.New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return &testBundle{fake: fake, srv: srv, logs: logs, reg: reg}
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
	list   []any
}

func (b *testBundle) do(tb testing.TB, method, path, token string, body any, headers ...string) response {
	tb.Helper()
	var rdr io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		rdr = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rdr)
	if err != nil {
		tb.Fatal(err)
	}
	if rdr != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.srv.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	_ = json.Unmarshal(raw, &r.list)
	return r
}

// mustStatus fails unless r has the status.
func mustStatus(tb testing.TB, r response, status int) response {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// mustError checks the SPEC §7 shape and returns the body; empty errWord or message are not checked.
func mustError(tb testing.TB, r response, status int, errWord, message string) map[string]any {
	tb.Helper()
	mustStatus(tb, r, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("content-type %q, want application/json", ct)
	}
	if got, _ := r.body["statusCode"].(float64); int(got) != status {
		tb.Errorf("statusCode %v, want %d: %s", r.body["statusCode"], status, r.raw)
	}
	if e, _ := r.body["error"].(string); e == "" || (errWord != "" && e != errWord) {
		tb.Errorf("error %q, want %q: %s", e, errWord, r.raw)
	}
	if m, _ := r.body["message"].(string); m == "" || (message != "" && m != message) {
		tb.Errorf("message %q, want %q: %s", m, message, r.raw)
	}
	return r.body
}

// detailPaths lists the paths of a validation body's details.
func detailPaths(tb testing.TB, body map[string]any) []string {
	tb.Helper()
	details, _ := body["details"].([]any)
	var out []string
	for _, d := range details {
		m, _ := d.(map[string]any)
		p, _ := m["path"].(string)
		if msg, _ := m["message"].(string); msg == "" {
			tb.Errorf("detail without message: %v", m)
		}
		out = append(out, p)
	}
	return out
}

// DomainService.

func (f *fakeCore) domainFor(call, orgID string) (ports.Domain, error) {
	f.record(call, orgID)
	if f.domainErr != nil {
		return ports.Domain{}, f.domainErr
	}
	d := f.domain
	d.OrganizationID = orgID
	d.Records = slices.Clone(f.domain.Records)
	for i := range d.Records {
		d.Records[i].DomainID = d.ID
	}
	return d, nil
}

func (f *fakeCore) CreateDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	d, err := f.domainFor("CreateDomain:"+name, orgID)
	if err == nil {
		d.Name = strings.ToLower(strings.TrimSpace(name))
	}
	return d, err
}

func (f *fakeCore) ListDomains(_ context.Context, orgID string) ([]ports.Domain, error) {
	d, err := f.domainFor("ListDomains", orgID)
	if err != nil {
		return nil, err
	}
	d.Records = nil
	return []ports.Domain{d}, nil
}

func (f *fakeCore) GetDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	return f.domainFor("GetDomain:"+id, orgID)
}

func (f *fakeCore) VerifyDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	d, err := f.domainFor("VerifyDomain:"+id, orgID)
	if err == nil {
		now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
		d.Status, d.VerifiedAt = ports.DomainVerified, &now
	}
	return d, err
}

func (f *fakeCore) UpdateDomainTracking(_ context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	d, err := f.domainFor("UpdateDomainTracking:"+id, orgID)
	if err != nil {
		return d, err
	}
	f.mu.Lock()
	f.trackingUpdates = append(f.trackingUpdates, t)
	f.mu.Unlock()
	if t.OpenTracking != nil {
		d.OpenTracking = *t.OpenTracking
	}
	if t.ClickTracking != nil {
		d.ClickTracking = *t.ClickTracking
	}
	return d, nil
}

func (f *fakeCore) SuspendDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	d, err := f.domainFor("SuspendDomain:"+id, orgID)
	d.Status = ports.DomainSuspended
	return d, err
}

// EmailService.

func (f *fakeCore) Send(_ context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	f.record("Send", orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, req)
	if f.sendErr != nil {
		return ports.SendResult{}, f.sendErr
	}
	if id, ok := f.idem[req.IdempotencyKey]; ok && req.IdempotencyKey != "" {
		return ports.SendResult{ID: id, Status: ports.StatusQueued, Deduped: true}, nil
	}
	id := fmt.Sprintf("0190a0b0-0000-7000-8000-%012d", len(f.sends))
	if f.idem == nil {
		f.idem = map[string]string{}
	}
	f.idem[req.IdempotencyKey] = id
	status := ports.StatusQueued
	if req.ScheduledAt != nil {
		status = ports.StatusScheduled
	}
	return ports.SendResult{ID: id, Status: status}, nil
}

// SendBatch answers in reverse order so that tests see the edge align results by index.
func (f *fakeCore) SendBatch(_ context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	f.record("SendBatch", orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, reqs)
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	out := make([]ports.BatchItemResult, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		if err := f.batchErrs[i]; err != nil {
			out = append(out, ports.BatchItemResult{Index: i, Err: err})
			continue
		}
		out = append(out, ports.BatchItemResult{Index: i, Result: ports.SendResult{
			ID: fmt.Sprintf("0190a0b0-0000-7000-8000-0000000b%04d", i), Status: ports.StatusQueued}})
	}
	return out, nil
}

func (f *fakeCore) GetEmail(_ context.Context, orgID, id string) (ports.Message, error) {
	f.record("GetEmail:"+id, orgID)
	if f.emailErr != nil {
		return ports.Message{}, f.emailErr
	}
	m := f.email
	m.OrganizationID = orgID
	return m, nil
}

func (f *fakeCore) CancelEmail(_ context.Context, orgID, id string) (ports.Message, error) {
	f.record("CancelEmail:"+id, orgID)
	if f.emailErr != nil {
		return ports.Message{}, f.emailErr
	}
	m := f.email
	m.OrganizationID, m.Status = orgID, ports.StatusCancelled
	return m, nil
}

func (f *fakeCore) ListEmails(_ context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	f.record("ListEmails", orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	if f.emailErr != nil {
		return ports.EmailPage{}, f.emailErr
	}
	return f.page, nil
}

func (f *fakeCore) sendsSnapshot() []ports.SendRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sends)
}

func ptr[T any](v T) *T { return &v }

// WebhookService.

func (f *fakeCore) webhookFor(call, orgID string) error {
	f.record(call, orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.webhookErr
}

func (f *fakeCore) CreateEndpoint(_ context.Context, orgID, url string, eventTypes []string) (ports.CreatedWebhookEndpoint, error) {
	if err := f.webhookFor("CreateEndpoint", orgID); err != nil {
		return ports.CreatedWebhookEndpoint{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hookCreates = append(f.hookCreates, webhookCreate{url: url, eventTypes: eventTypes})
	e := f.endpoints[0]
	e.URL, e.EventTypes = url, eventTypes
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: e, PlainSecret: plainWebhookSecret}, nil
}

func (f *fakeCore) ListEndpoints(_ context.Context, orgID string) ([]ports.WebhookEndpoint, error) {
	if err := f.webhookFor("ListEndpoints", orgID); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.endpoints), nil
}

func (f *fakeCore) DeleteEndpoint(_ context.Context, orgID, id string) error {
	return f.webhookFor("DeleteEndpoint:"+id, orgID)
}

func (f *fakeCore) TestEndpoint(_ context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	if err := f.webhookFor("TestEndpoint:"+id, orgID); err != nil {
		return ports.WebhookDelivery{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliveries[0], nil
}

func (f *fakeCore) RotateSecret(_ context.Context, orgID, id string) (ports.CreatedWebhookEndpoint, error) {
	if err := f.webhookFor("RotateSecret:"+id, orgID); err != nil {
		return ports.CreatedWebhookEndpoint{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: f.endpoints[0], PlainSecret: plainWebhookSecret}, nil
}

func (f *fakeCore) Replay(_ context.Context, orgID, endpointID, deliveryID string) (ports.WebhookDelivery, error) {
	if err := f.webhookFor("Replay:"+endpointID+"/"+deliveryID, orgID); err != nil {
		return ports.WebhookDelivery{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliveries[0], nil
}

func (f *fakeCore) ListDeliveries(_ context.Context, orgID string) ([]ports.WebhookDelivery, error) {
	if err := f.webhookFor("ListDeliveries", orgID); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deliveries), nil
}

// TemplateService.

func (f *fakeCore) templateFor(call, orgID string) (ports.Template, error) {
	f.record(call, orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.templateErr != nil {
		return ports.Template{}, f.templateErr
	}
	t := f.template
	t.OrganizationID = orgID
	t.Versions = slices.Clone(f.template.Versions)
	return t, nil
}

func (f *fakeCore) CreateTemplate(_ context.Context, orgID, name string) (ports.Template, error) {
	t, err := f.templateFor("CreateTemplate", orgID)
	if err != nil {
		return t, err
	}
	f.mu.Lock()
	f.tplNames = append(f.tplNames, name)
	f.mu.Unlock()
	t.Name, t.CurrentVersion, t.Versions, t.UpdatedAt = name, nil, nil, t.CreatedAt
	return t, nil
}

func (f *fakeCore) CreateTemplateVersion(_ context.Context, orgID, templateID string, v ports.NewTemplateVersion) (ports.TemplateVersion, error) {
	t, err := f.templateFor("CreateTemplateVersion:"+templateID, orgID)
	if err != nil {
		return ports.TemplateVersion{}, err
	}
	f.mu.Lock()
	f.newVersions = append(f.newVersions, v)
	f.mu.Unlock()
	out := ports.TemplateVersion{ID: versionID2, TemplateID: templateID, Version: len(t.Versions) + 1,
		Subject: v.Subject, HTML: v.HTML, Text: v.Text, ReactSource: v.ReactSource,
		CreatedAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("CET", 3600))}
	if v.ReactSource != "" {
		out.HTML = "<html><body>rendered</body></html>"
	}
	return out, nil
}

func (f *fakeCore) PublishTemplate(_ context.Context, orgID, templateID string, version int) (ports.Template, error) {
	t, err := f.templateFor("PublishTemplate:"+templateID, orgID)
	if err != nil {
		return t, err
	}
	f.mu.Lock()
	f.publishes = append(f.publishes, version)
	f.mu.Unlock()
	t.CurrentVersion, t.Versions = &version, nil
	return t, nil
}

func (f *fakeCore) ListTemplates(_ context.Context, orgID string) ([]ports.Template, error) {
	t, err := f.templateFor("ListTemplates", orgID)
	if err != nil {
		return nil, err
	}
	t.Versions = nil
	older := t
	older.ID, older.Name, older.CurrentVersion = versionID1, "older", nil
	return []ports.Template{t, older}, nil
}

func (f *fakeCore) GetTemplate(_ context.Context, orgID, id string) (ports.Template, error) {
	return f.templateFor("GetTemplate:"+id, orgID)
}

// DeliverabilityService.

func (f *fakeCore) deliverabilityFor(call, orgID string) error {
	f.record(call, orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliverabilityErr
}

func (f *fakeCore) ListSuppressions(_ context.Context, orgID string) ([]ports.Suppression, error) {
	if err := f.deliverabilityFor("ListSuppressions", orgID); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.suppressions), nil
}

func (f *fakeCore) CreateSuppression(_ context.Context, orgID string, in ports.NewSuppression) (ports.Suppression, error) {
	if err := f.deliverabilityFor("CreateSuppression", orgID); err != nil {
		return ports.Suppression{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.suppressionCreates = append(f.suppressionCreates, in)
	if in.Scope == ports.SuppressionScopeGlobal {
		return ports.Suppression{}, ports.Errorf(ports.CodePermissionDenied, "global suppressions are managed by platform admins")
	}
	return ports.Suppression{ID: suppressionID, OrganizationID: orgID, Address: strings.ToLower(strings.TrimSpace(in.Address)),
		Scope: in.Scope, Reason: in.Reason, CreatedAt: time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("CET", 3600))}, nil
}

func (f *fakeCore) DeleteSuppression(_ context.Context, orgID, id string) (bool, error) {
	if err := f.deliverabilityFor("DeleteSuppression", orgID); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, id)
	return f.deleteFound, nil
}

func (f *fakeCore) ListGlobalSuppressions(context.Context) ([]ports.Suppression, error) {
	if err := f.deliverabilityFor("ListGlobalSuppressions", ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.globalSupps), nil
}

func (f *fakeCore) CreateGlobalSuppression(_ context.Context, in ports.NewSuppression) (ports.Suppression, error) {
	if err := f.deliverabilityFor("CreateGlobalSuppression", ""); err != nil {
		return ports.Suppression{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.globalCreates = append(f.globalCreates, in)
	return ports.Suppression{ID: globalSuppID, Address: strings.ToLower(strings.TrimSpace(in.Address)),
		Scope: ports.SuppressionScopeGlobal, Reason: in.Reason, CreatedAt: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}, nil
}

func (f *fakeCore) DeleteGlobalSuppression(_ context.Context, id string) (bool, error) {
	if err := f.deliverabilityFor("DeleteGlobalSuppression", ""); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, "global:"+id)
	return f.deleteFound, nil
}

func (f *fakeCore) ListBounces(_ context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	if err := f.deliverabilityFor("ListBounces", orgID); err != nil {
		return ports.BouncePage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageQueries = append(f.pageQueries, q)
	return f.bouncePage, nil
}

func (f *fakeCore) ListComplaints(_ context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	if err := f.deliverabilityFor("ListComplaints", orgID); err != nil {
		return ports.ComplaintPage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageQueries = append(f.pageQueries, q)
	return f.complaintPage, nil
}

// mustSchema returns one component schema of the served OpenAPI document, decoded.
func mustSchema(tb testing.TB, b *testBundle, name string) map[string]any {
	tb.Helper()
	r := mustStatus(tb, b.do(tb, "GET", "/v1/openapi.json", "", nil), 200)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		tb.Fatal(err)
	}
	s, ok := doc.Components.Schemas[name]
	if !ok {
		tb.Fatalf("OpenAPI has no schema %s", name)
	}
	return s
}

// property returns a property of a decoded object schema.
func property(tb testing.TB, schema map[string]any, name string) map[string]any {
	tb.Helper()
	props, _ := schema["properties"].(map[string]any)
	p, ok := props[name].(map[string]any)
	if !ok {
		tb.Fatalf("schema has no property %s: %v", name, schema)
	}
	return p
}

// calledWith counts the calls whose name starts with prefix.
func (f *fakeCore) calledWith(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}
