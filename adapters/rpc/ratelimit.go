package rpc

import (
	"github.com/postmill/postmill/ports"

	ratelimitv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/ratelimit/v1"
)

func rateDecisionToProto(d ports.RateDecision) *ratelimitv1.RateDecision {
	return &ratelimitv1.RateDecision{
		Allowed:    d.Allowed,
		Count:      int64(d.Count),
		Limit:      int64(d.Limit),
		RetryAfter: durationToProto(d.RetryAfter),
	}
}

func rateDecisionFromProto(d *ratelimitv1.RateDecision) ports.RateDecision {
	return ports.RateDecision{
		Allowed:    d.GetAllowed(),
		Count:      int(d.GetCount()),
		Limit:      int(d.GetLimit()),
		RetryAfter: durationFromProto(d.GetRetryAfter()),
	}
}
