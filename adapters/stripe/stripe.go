// Package stripe is the Stripe payment provider (ports.PaymentProvider): a plan with a priceId is paid
// through a Stripe Checkout session in subscription mode, and Stripe's signed webhook notifications
// confirm it. A later move to another priced plan changes the price of that subscription's item, and a
// move to a plan without a price cancels the subscription. The organization and the plan travel in the session's client_reference_id and metadata and
// in the subscription's metadata, so that the notifications name them; the core believes them only
// together with the checkout it recorded when the session was created.
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/postmill/postmill/ports"
)

// Tolerance is how far a notification's signed timestamp may be from now: Stripe's own default, which
// bounds how long a captured notification can be replayed (the event id makes a replay inside it harmless).
const Tolerance = 5 * time.Minute

// MaxEventBytes bounds a notification body. Stripe's checkout and subscription events are a few KiB; a
// session with many line items or custom fields stays far below this.
const MaxEventBytes = 256 << 10

// requestTimeout bounds one call to Stripe's API, retries included.
const requestTimeout = 30 * time.Second

// maxRetries caps stripe-go's retries of a call that failed for a network reason or a 409/5xx.
const maxRetries = 2

// Metadata keys Postmill sets on the sessions and subscriptions it creates.
const (
	MetadataOrganization = "postmill_organization_id"
	MetadataPlan         = "postmill_plan_id"
)

// Config is what the operator decides. SecretKey and WebhookSecret are secrets: they are never logged or
// returned.
type Config struct {
	// SecretKey is the API key the sessions are created with (POSTMILL_STRIPE_SECRET_KEY).
	SecretKey string
	// WebhookSecret is the signing secret of the webhook endpoint (POSTMILL_STRIPE_WEBHOOK_SECRET, whsec_…).
	WebhookSecret string
	// SuccessURL and CancelURL are where Stripe sends the customer after paying or giving up.
	SuccessURL string
	CancelURL  string
	// APIURL replaces Stripe's API address (https://api.stripe.com); tests point it at stripe-mock.
	APIURL string
	// HTTPClient makes the API calls; nil means one with a 30 second timeout.
	HTTPClient *http.Client
}

// Provider implements ports.PaymentProvider with Stripe Checkout.
type Provider struct {
	cfg    Config
	client *stripego.Client
}

var _ ports.PaymentProvider = (*Provider)(nil)

// New checks the configuration and builds the Stripe client.
func New(cfg Config) (*Provider, error) {
	if cfg.SecretKey == "" || cfg.WebhookSecret == "" {
		return nil, errors.New("stripe: the secret key and the webhook secret are both required")
	}
	for name, u := range map[string]string{"success URL": cfg.SuccessURL, "cancel URL": cfg.CancelURL} {
		if err := checkURL(u); err != nil {
			return nil, fmt.Errorf("stripe: %s: %w", name, err)
		}
	}
	if cfg.APIURL != "" {
		if err := checkURL(cfg.APIURL); err != nil {
			return nil, fmt.Errorf("stripe: API URL: %w", err)
		}
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: requestTimeout}
	}
	bc := &stripego.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripego.Int64(maxRetries),
		// stripe-go logs to stderr by default; Postmill reports errors through its own logs instead.
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if cfg.APIURL != "" {
		bc.URL = stripego.String(cfg.APIURL)
	}
	backends := &stripego.Backends{API: stripego.GetBackendWithConfig(stripego.APIBackend, bc)}
	return &Provider{cfg: cfg, client: stripego.NewClient(cfg.SecretKey, stripego.WithBackends(backends))}, nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http or https URL (got %q)", raw)
	}
	return nil
}

// Checkout implements ports.PaymentProvider: a Checkout session in subscription mode for one unit of the
// plan's price.
func (p *Provider) Checkout(ctx context.Context, orgID string, offer ports.PlanOffer) (ports.PaymentCheckout, error) {
	if offer.PriceID == "" {
		return ports.PaymentCheckout{}, fmt.Errorf("stripe: plan %q has no price", offer.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	meta := map[string]string{MetadataOrganization: orgID, MetadataPlan: offer.ID}
	params := &stripego.CheckoutSessionCreateParams{
		Mode:              stripego.String(string(stripego.CheckoutSessionModeSubscription)),
		ClientReferenceID: stripego.String(orgID),
		SuccessURL:        stripego.String(p.cfg.SuccessURL),
		CancelURL:         stripego.String(p.cfg.CancelURL),
		LineItems: []*stripego.CheckoutSessionCreateLineItemParams{
			{Price: stripego.String(offer.PriceID), Quantity: stripego.Int64(1)},
		},
		SubscriptionData: &stripego.CheckoutSessionCreateSubscriptionDataParams{Metadata: meta},
	}
	params.Metadata = meta
	s, err := p.client.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return ports.PaymentCheckout{}, fmt.Errorf("stripe: creating a checkout session: %w", p.describe(err))
	}
	if s.ID == "" || s.URL == "" {
		return ports.PaymentCheckout{}, errors.New("stripe: the checkout session came back without an id or URL")
	}
	return ports.PaymentCheckout{ID: s.ID, URL: s.URL}, nil
}

// Proration and payment of a plan change inside a subscription: the prorated difference is invoiced and
// charged at once (an upgrade) or credited to the customer's balance (a downgrade), and Stripe keeps the new
// price pending until that invoice is paid, so a payment that fails or needs the customer leaves the
// subscription, and the limits, on the plan already paid for.
const (
	changeProration = "always_invoice"
	changePayment   = "pending_if_incomplete"
)

// ChangePlan implements ports.PaymentProvider: the subscription's one item (Postmill's checkouts create
// subscriptions of one item) is moved to the offer's price. Parameters a pending update does not support
// (metadata among them) are not sent, so the subscription's postmill_plan_id keeps the plan of its
// checkout; Postmill never reads it.
func (p *Provider) ChangePlan(ctx context.Context, orgID, subscriptionID string, offer ports.PlanOffer) (ports.PaymentPlanChange, error) {
	if offer.PriceID == "" {
		return ports.PaymentPlanChange{}, fmt.Errorf("stripe: plan %q has no price", offer.ID)
	}
	if subscriptionID == "" {
		return ports.PaymentPlanChange{}, errors.New("stripe: no subscription to change")
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	sub, err := p.client.V1Subscriptions.Retrieve(ctx, subscriptionID, nil)
	if err != nil {
		return ports.PaymentPlanChange{}, fmt.Errorf("stripe: reading subscription %s: %w", subscriptionID, p.describe(err))
	}
	// Postmill's record links the subscription to the organization; Stripe's metadata, when set, must agree.
	if owner := sub.Metadata[MetadataOrganization]; owner != "" && owner != orgID {
		return ports.PaymentPlanChange{}, fmt.Errorf("stripe: subscription %s belongs to another organization", subscriptionID)
	}
	if sub.Status == stripego.SubscriptionStatusCanceled || sub.Status == stripego.SubscriptionStatusIncompleteExpired {
		return ports.PaymentPlanChange{}, fmt.Errorf("stripe: subscription %s has ended (%s)", subscriptionID, sub.Status)
	}
	if sub.Items == nil || len(sub.Items.Data) != 1 || sub.Items.Data[0].ID == "" {
		n := 0
		if sub.Items != nil {
			n = len(sub.Items.Data)
		}
		return ports.PaymentPlanChange{}, fmt.Errorf("stripe: subscription %s has %d items; a plan change needs exactly one", subscriptionID, n)
	}
	updated, err := p.client.V1Subscriptions.Update(ctx, subscriptionID, &stripego.SubscriptionUpdateParams{
		Items: []*stripego.SubscriptionUpdateItemParams{
			{ID: stripego.String(sub.Items.Data[0].ID), Price: stripego.String(offer.PriceID), Quantity: stripego.Int64(1)},
		},
		ProrationBehavior: stripego.String(changeProration),
		PaymentBehavior:   stripego.String(changePayment),
	})
	if err != nil {
		return ports.PaymentPlanChange{}, fmt.Errorf("stripe: changing subscription %s: %w", subscriptionID, p.describe(err))
	}
	return ports.PaymentPlanChange{Confirmed: onPrice(updated, offer.PriceID)}, nil
}

// onPrice reports whether Stripe shows the subscription live on price, with no update waiting on payment.
func onPrice(s *stripego.Subscription, price string) bool {
	if s == nil || s.PendingUpdate != nil || !live(string(s.Status)) || s.Items == nil || len(s.Items.Data) != 1 {
		return false
	}
	it := s.Items.Data[0]
	return it.Price != nil && it.Price.ID == price
}

// live is a subscription status in which the customer is on the subscription's price: paying or trialing.
func live(status string) bool {
	return status == string(stripego.SubscriptionStatusActive) || status == string(stripego.SubscriptionStatusTrialing)
}

// CancelSubscription implements ports.PaymentProvider: the subscription ends at once with a final invoice
// that credits the unused part of the period (prorate) and bills any pending proration (invoice_now), so
// the customer pays for the paid plan only for the time they were on it. A subscription Stripe no longer
// has is already ended.
func (p *Provider) CancelSubscription(ctx context.Context, orgID, subscriptionID string) error {
	if subscriptionID == "" {
		return errors.New("stripe: no subscription to cancel")
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := p.client.V1Subscriptions.Cancel(ctx, subscriptionID, &stripego.SubscriptionCancelParams{
		InvoiceNow: stripego.Bool(true), Prorate: stripego.Bool(true),
	})
	var se *stripego.Error
	if errors.As(err, &se) && se.Code == stripego.ErrorCodeResourceMissing {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stripe: cancelling subscription %s: %w", subscriptionID, p.describe(err))
	}
	return nil
}

// apiKeyPattern matches Stripe secret and restricted keys. Stripe's own error messages may quote the key
// that was sent ("Authorization was 'Bearer sk_test_…'"), so every message is cleaned of them.
var apiKeyPattern = regexp.MustCompile(`\b(sk|rk)_(test|live)_[0-9A-Za-z_]+`)

// describe keeps what helps an operator from a Stripe error (status, type, code, message, request id),
// with any API key in Stripe's message replaced, and nothing of the request.
func (p *Provider) describe(err error) error {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return errors.New(p.redact(err.Error()))
	}
	return fmt.Errorf("%d %s %s: %s (request %s)", se.HTTPStatusCode, se.Type, se.Code, p.redact(se.Msg), se.RequestID)
}

func (p *Provider) redact(s string) string {
	s = strings.ReplaceAll(s, p.cfg.SecretKey, "[redacted]")
	return apiKeyPattern.ReplaceAllString(s, "[redacted]")
}

// ParseEvent implements ports.PaymentProvider: the Stripe-Signature header is checked against the webhook
// secret (HMAC-SHA256 of "timestamp.body", timestamp within Tolerance) before anything of the body is read.
// Events of another API version than stripe-go's are accepted: only the few fields below are read, and they
// are the same in every version that has them.
func (p *Provider) ParseEvent(payload []byte, signature string) (ports.PaymentEvent, error) {
	if len(payload) > MaxEventBytes {
		return ports.PaymentEvent{}, ports.Errorf(ports.CodeInvalidArgument, "The notification is larger than %d bytes", MaxEventBytes)
	}
	ev, err := webhook.ConstructEventWithOptions(payload, signature, p.cfg.WebhookSecret, webhook.ConstructEventOptions{
		Tolerance: Tolerance, IgnoreAPIVersionMismatch: true,
	})
	if err != nil {
		return ports.PaymentEvent{}, signatureError(err)
	}
	if ev.ID == "" {
		return ports.PaymentEvent{}, ports.Errorf(ports.CodeInvalidArgument, "The notification has no event id")
	}
	out := ports.PaymentEvent{ID: ev.ID, Type: ports.PaymentEventOther}
	if ev.Data == nil {
		return out, nil
	}
	switch ev.Type {
	case stripego.EventTypeCheckoutSessionCompleted, stripego.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		var s struct {
			ID                string            `json:"id"`
			ClientReferenceID string            `json:"client_reference_id"`
			Metadata          map[string]string `json:"metadata"`
			PaymentStatus     string            `json:"payment_status"`
			Subscription      json.RawMessage   `json:"subscription"`
		}
		if err := json.Unmarshal(ev.Data.Raw, &s); err != nil {
			return ports.PaymentEvent{}, ports.Errorf(ports.CodeInvalidArgument, "The checkout session in the notification is unreadable")
		}
		// A session paid by a delayed method completes unpaid; its async_payment_succeeded follows.
		if s.PaymentStatus != "paid" && s.PaymentStatus != "no_payment_required" {
			return out, nil
		}
		out.Type = ports.PaymentCheckoutCompleted
		out.CheckoutID = s.ID
		out.OrganizationID = s.ClientReferenceID
		if out.OrganizationID == "" {
			out.OrganizationID = s.Metadata[MetadataOrganization]
		}
		out.SubscriptionID = objectID(s.Subscription)
	case stripego.EventTypeCustomerSubscriptionDeleted, stripego.EventTypeCustomerSubscriptionUpdated:
		var s struct {
			ID            string            `json:"id"`
			Status        string            `json:"status"`
			Metadata      map[string]string `json:"metadata"`
			PendingUpdate json.RawMessage   `json:"pending_update"`
			Items         struct {
				Data []struct {
					Price json.RawMessage `json:"price"`
				} `json:"data"`
			} `json:"items"`
		}
		if err := json.Unmarshal(ev.Data.Raw, &s); err != nil {
			return ports.PaymentEvent{}, ports.Errorf(ports.CodeInvalidArgument, "The subscription in the notification is unreadable")
		}
		out.SubscriptionID = s.ID
		out.OrganizationID = s.Metadata[MetadataOrganization]
		switch {
		case ev.Type == stripego.EventTypeCustomerSubscriptionDeleted || s.Status == "canceled" || s.Status == "incomplete_expired":
			out.Type = ports.PaymentSubscriptionEnded
		case live(s.Status) && (len(s.PendingUpdate) == 0 || string(s.PendingUpdate) == "null"):
			// A live subscription with nothing waiting on payment: the price it is on confirms a plan change
			// recorded for it. past_due and the like may recover, and a pending update is not made yet.
			out.Type = ports.PaymentSubscriptionUpdated
			if len(s.Items.Data) == 1 {
				out.PriceID = objectID(s.Items.Data[0].Price)
			}
		default:
			return ports.PaymentEvent{ID: ev.ID, Type: ports.PaymentEventOther}, nil
		}
	}
	return out, nil
}

// objectID reads an expandable reference: an id string, or an object with an id.
func objectID(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.ID
	}
	return ""
}

// signatureError says what was wrong with a notification without echoing any of it.
func signatureError(err error) error {
	msg := "The notification is not a readable Stripe event"
	switch {
	case errors.Is(err, webhook.ErrNotSigned):
		msg = "The Stripe-Signature header is missing"
	case errors.Is(err, webhook.ErrInvalidHeader):
		msg = "The Stripe-Signature header is malformed"
	case errors.Is(err, webhook.ErrNoValidSignature):
		msg = "The Stripe-Signature does not match the notification"
	case errors.Is(err, webhook.ErrTooOld):
		msg = "The Stripe-Signature timestamp is more than 5 minutes old"
	}
	return ports.Errorf(ports.CodeInvalidArgument, "%s", msg)
}
