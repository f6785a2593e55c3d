package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
