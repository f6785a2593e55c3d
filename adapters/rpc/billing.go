package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	billingv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/billing/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/billing/v1/billingv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.BillingService { return &c.Billing },
		billingv1connect.NewBillingServiceHandler, newBillingServer,
		billingv1connect.NewBillingServiceClient, newBillingClient).
		calledBy(billingv1connect.BillingServiceName, TierEdge))
}

// billingServer serves postmill.billing.v1.BillingService from a ports.BillingService.
type billingServer struct {
	svc ports.BillingService
	log *slog.Logger
}

func newBillingServer(svc ports.BillingService, log *slog.Logger) billingv1connect.BillingServiceHandler {
	return &billingServer{svc: svc, log: log}
}

func (s *billingServer) BillingSubscription(ctx context.Context, req *connect.Request[billingv1.BillingSubscriptionRequest]) (*connect.Response[billingv1.BillingSubscriptionResponse], error) {
	sub, err := s.svc.BillingSubscription(ctx, req.Msg.GetOrganizationId())
	return respond(ctx, s.log, req, err, func() *billingv1.BillingSubscriptionResponse {
		return &billingv1.BillingSubscriptionResponse{Subscription: billingSubscriptionToProto(sub)}
	})
}

func (s *billingServer) Subscribe(ctx context.Context, req *connect.Request[billingv1.SubscribeRequest]) (*connect.Response[billingv1.SubscribeResponse], error) {
	sub, err := s.svc.Subscribe(ctx, req.Msg.GetOrganizationId(), req.Msg.GetPlanId())
	return respond(ctx, s.log, req, err, func() *billingv1.SubscribeResponse {
		return &billingv1.SubscribeResponse{Subscription: billingSubscriptionToProto(sub)}
	})
}

func (s *billingServer) Plans(ctx context.Context, req *connect.Request[billingv1.PlansRequest]) (*connect.Response[billingv1.PlansResponse], error) {
	plans, err := s.svc.Plans(ctx)
	return respond(ctx, s.log, req, err, func() *billingv1.PlansResponse {
		if plans == nil {
			return &billingv1.PlansResponse{}
		}
		return &billingv1.PlansResponse{Plans: &billingv1.PlanOfferList{Items: mapItems(plans, planOfferToProto)}}
	})
}

func (s *billingServer) PaymentWebhook(ctx context.Context, req *connect.Request[billingv1.PaymentWebhookRequest]) (*connect.Response[billingv1.PaymentWebhookResponse], error) {
	res, err := s.svc.PaymentWebhook(ctx, req.Msg.GetPayload(), req.Msg.GetSignature())
	return respond(ctx, s.log, req, err, func() *billingv1.PaymentWebhookResponse {
		return &billingv1.PaymentWebhookResponse{EventId: res.EventID, Outcome: string(res.Outcome)}
	})
}

// billingClient implements ports.BillingService over postmill.billing.v1.BillingService.
type billingClient struct {
	conn billingv1connect.BillingServiceClient
}

func newBillingClient(conn billingv1connect.BillingServiceClient) ports.BillingService {
	return &billingClient{conn: conn}
}

func (c *billingClient) BillingSubscription(ctx context.Context, orgID string) (ports.BillingSubscription, error) {
	return call(ctx, billingv1connect.BillingServiceBillingSubscriptionProcedure, c.conn.BillingSubscription,
		&billingv1.BillingSubscriptionRequest{OrganizationId: orgID},
		pick((*billingv1.BillingSubscriptionResponse).GetSubscription, billingSubscriptionFromProto))
}

func (c *billingClient) Subscribe(ctx context.Context, orgID, planID string) (ports.BillingSubscription, error) {
	return call(ctx, billingv1connect.BillingServiceSubscribeProcedure, c.conn.Subscribe,
		&billingv1.SubscribeRequest{OrganizationId: orgID, PlanId: planID},
		pick((*billingv1.SubscribeResponse).GetSubscription, billingSubscriptionFromProto))
}

func (c *billingClient) Plans(ctx context.Context) ([]ports.PlanOffer, error) {
	return call(ctx, billingv1connect.BillingServicePlansProcedure, c.conn.Plans, &billingv1.PlansRequest{},
		pick((*billingv1.PlansResponse).GetPlans, func(l *billingv1.PlanOfferList) []ports.PlanOffer {
			if l == nil {
				return nil
			}
			return mapItems(l.GetItems(), planOfferFromProto)
		}))
}

func (c *billingClient) PaymentWebhook(ctx context.Context, payload []byte, signature string) (ports.PaymentWebhookResult, error) {
	return call(ctx, billingv1connect.BillingServicePaymentWebhookProcedure, c.conn.PaymentWebhook,
		&billingv1.PaymentWebhookRequest{Payload: payload, Signature: signature},
		func(r *billingv1.PaymentWebhookResponse) ports.PaymentWebhookResult {
			return ports.PaymentWebhookResult{EventID: r.GetEventId(), Outcome: ports.PaymentOutcome(r.GetOutcome())}
		})
}

func planOfferToProto(p ports.PlanOffer) *billingv1.PlanOffer {
	return &billingv1.PlanOffer{Id: p.ID, Name: p.Name, Plan: planToProto(p.Plan), PriceId: p.PriceID}
}

func planOfferFromProto(p *billingv1.PlanOffer) ports.PlanOffer {
	return ports.PlanOffer{ID: p.GetId(), Name: p.GetName(), Plan: planFromProto(p.GetPlan()), PriceID: p.GetPriceId()}
}

func billingSubscriptionToProto(s ports.BillingSubscription) *billingv1.Subscription {
	return &billingv1.Subscription{
		OrganizationId: s.OrganizationID,
		PlanId:         s.PlanID,
		PlanName:       s.PlanName,
		Plan:           planToProto(s.Plan),
		PeriodStart:    timeToProto(s.PeriodStart),
		PeriodEnd:      timeToProto(s.PeriodEnd),
		EmailsSent:     s.EmailsSent,
		CheckoutUrl:    s.CheckoutURL,
		PendingPlanId:  s.PendingPlanID,
	}
}

func billingSubscriptionFromProto(s *billingv1.Subscription) ports.BillingSubscription {
	return ports.BillingSubscription{
		OrganizationID: s.GetOrganizationId(),
		PlanID:         s.GetPlanId(),
		PlanName:       s.GetPlanName(),
		Plan:           planFromProto(s.GetPlan()),
		PeriodStart:    timeFromProto(s.GetPeriodStart()),
		PeriodEnd:      timeFromProto(s.GetPeriodEnd()),
		EmailsSent:     s.GetEmailsSent(),
		CheckoutURL:    s.GetCheckoutUrl(),
		PendingPlanID:  s.GetPendingPlanId(),
	}
}
