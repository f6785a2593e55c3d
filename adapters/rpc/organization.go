package rpc

import (
	"github.com/postmill/postmill/ports"

	organizationv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/organization/v1"
)

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
