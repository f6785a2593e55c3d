package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

type adminOrganizationResponse struct {
	ID            string             `json:"id" format:"uuid" doc:"Organization id"`
	Name          string             `json:"name" doc:"Display name"`
	Sent          int64              `json:"sent" doc:"Emails sent in the window"`
	Delivered     int64              `json:"delivered" doc:"Emails delivered in the window"`
	HardBounced   int64              `json:"hardBounced" doc:"Hard bounces in the window"`
	Complained    int64              `json:"complained" doc:"Complaints in the window"`
	BounceRate    float64            `json:"bounceRate" doc:"hardBounced / sent"`
	ComplaintRate float64            `json:"complaintRate" doc:"complained / delivered (sent when nothing was delivered)"`
	Status        string             `json:"status" enum:"good,warning,at_risk" doc:"Judged like a domain on GET /v1/reputation"`
	WarmupCap     *int64             `json:"warmupCap" doc:"Current daily warm-up cap; null means none"`
	Protection    protectionResponse `json:"protection" doc:"Automatic protection's state"`
}

type queueDepthResponse struct {
	Domain         string     `json:"domain" doc:"Destination site: the recipient domain" example:"gmail.com"`
	Queued         int64      `json:"queued" doc:"Delivery jobs in the queue"`
	Leased         int64      `json:"leased" doc:"Of those, jobs an MTA holds right now"`
	Outbox         int64      `json:"outbox" doc:"Jobs still in the outbox (not yet due, or waiting for a retry)"`
	OldestQueuedAt *time.Time `json:"oldestQueuedAt" doc:"When the oldest waiting job was first queued"`
}

type platformViewResponse struct {
	WindowSeconds int64                       `json:"windowSeconds" doc:"The window the organizations' traffic is counted over"`
	Organizations []adminOrganizationResponse `json:"organizations" doc:"Organizations with traffic in the window or a warm-up cap, highest complaint rate first"`
	Queues        []queueDepthResponse        `json:"queues" doc:"The 100 deepest destination sites of the delivery queue (the PostgreSQL queue; with Kafka only the outbox counts)"`
}

func (s *Server) registerPlatformRoutes() {
	if s.core.Reputation == nil {
		return
	}
	register(s, huma.Operation{
		OperationID: "admin-platform-view", Method: http.MethodGet, Path: "/v1/admin/platform",
		Tags: []string{tagAdmin}, Summary: "The platform at a glance",
		Description: "Every organization with traffic: volume, bounce and complaint rates, reputation status, warm-up " +
			"cap and automatic protection; and the delivery queue's depth per destination site.",
	}, access{kind: authAdmin}, s.platformView)
}

func (s *Server) platformView(ctx context.Context, _ *struct{}) (*body[platformViewResponse], error) {
	v, err := s.core.Reputation.PlatformView(ctx)
	if err != nil {
		return nil, err
	}
	out := platformViewResponse{WindowSeconds: int64(v.Window / time.Second),
		Organizations: make([]adminOrganizationResponse, 0, len(v.Organizations)),
		Queues:        make([]queueDepthResponse, 0, len(v.Queues))}
	for _, o := range v.Organizations {
		out.Organizations = append(out.Organizations, adminOrganizationResponse{
			ID: o.OrganizationID, Name: o.Name, Sent: o.Sent, Delivered: o.Delivered, HardBounced: o.HardBounced,
			Complained: o.Complained, BounceRate: o.BounceRate, ComplaintRate: o.ComplaintRate, Status: o.Status,
			WarmupCap: noneIfZero(o.WarmupCap), Protection: toProtection(o.Protection),
		})
	}
	for _, q := range v.Queues {
		r := queueDepthResponse{Domain: q.Domain, Queued: q.Queued, Leased: q.Leased, Outbox: q.Outbox}
		if q.OldestQueuedAt != nil {
			t := utc(*q.OldestQueuedAt)
			r.OldestQueuedAt = &t
		}
		out.Queues = append(out.Queues, r)
	}
	return &body[platformViewResponse]{out}, nil
}
