package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagReputation is the OpenAPI tag of GET /v1/reputation.
const tagReputation = "Reputation"

type reputationInput struct {
	Days int `query:"days" minimum:"1" maximum:"90" default:"30" doc:"Window in UTC days, today included: 1-90 (SPEC §8); default 30" example:"30"`
}

type reputationDayResponse struct {
	Date        string  `json:"date" doc:"UTC day, YYYY-MM-DD" example:"2026-11-26"`
	Sent        int64   `json:"sent" doc:"Emails handed to receiving servers that day"`
	Delivered   int64   `json:"delivered" doc:"Emails the receiving servers accepted that day"`
	HardBounced int64   `json:"hardBounced" doc:"Permanent bounces recorded that day"`
	SoftBounced int64   `json:"softBounced" doc:"Temporary bounces recorded that day"`
	Complained  int64   `json:"complained" doc:"Spam complaints (feedback reports) recorded that day"`
	BounceRate  float64 `json:"bounceRate" doc:"hardBounced / sent, a fraction (0.02 is 2%)"`
	SpamRate    float64 `json:"complaintRate" doc:"complained / delivered (sent when nothing was delivered), a fraction"`
}

type bounceClassResponse struct {
	Class string `json:"class" doc:"Bounce class (bad_mailbox, spam_block, mailbox_full, ...; hard or soft for bounces recorded before classes)" example:"bad_mailbox"`
	Count int64  `json:"count" doc:"Bounces of the class in the window"`
}

type domainReputationResponse struct {
	Domain        string                  `json:"domain" doc:"Sending domain" example:"mail.acme.example"`
	Status        string                  `json:"status" enum:"good,warning,at_risk" doc:"good, warning or at_risk against the thresholds over the window; good below the minimum volume"`
	Total         reputationDayResponse   `json:"total" doc:"The window's totals and rates (date is its first day)"`
	Days          []reputationDayResponse `json:"days" doc:"Days with traffic, oldest first"`
	BounceClasses []bounceClassResponse   `json:"bounceClasses" doc:"The window's bounces by class, most frequent first"`
}

type thresholdsResponse struct {
	ComplaintWarning float64 `json:"complaintWarning" doc:"Complaint rate at which a domain is in warning (Gmail and Yahoo advise staying under 0.1%)"`
	ComplaintAtRisk  float64 `json:"complaintAtRisk" doc:"Complaint rate at which a domain is at risk (Gmail and Yahoo require staying under 0.3%)"`
	BounceWarning    float64 `json:"bounceWarning" doc:"Hard-bounce rate at which a domain is in warning"`
	BounceAtRisk     float64 `json:"bounceAtRisk" doc:"Hard-bounce rate at which a domain is at risk"`
	MinVolume        int64   `json:"minVolume" doc:"Emails sent in the window below which no status other than good is given"`
}

type protectionResponse struct {
	BroadcastsPaused bool       `json:"broadcastsPaused" doc:"Automatic protection paused the organization's broadcasts; transactional sending continues"`
	Reason           *string    `json:"broadcastsPausedReason" doc:"Why broadcasts were paused; null when they are not"`
	PausedAt         *time.Time `json:"broadcastsPausedAt" doc:"When broadcasts were paused; null when they are not"`
}

type reputationResponse struct {
	Days       int                        `json:"days" doc:"The window in days"`
	Since      string                     `json:"since" doc:"First UTC day of the window, YYYY-MM-DD"`
	Thresholds thresholdsResponse         `json:"thresholds" doc:"The limits statuses are judged against, as fractions"`
	Protection protectionResponse         `json:"protection" doc:"Automatic protection's state"`
	Domains    []domainReputationResponse `json:"domains" doc:"Sending domains with traffic in the window, by name"`
}

func (s *Server) registerReputationRoutes() {
	if s.core.Reputation == nil {
		return
	}
	register(s, huma.Operation{
		OperationID: "get-reputation", Method: http.MethodGet, Path: "/v1/reputation",
		Tags: []string{tagReputation}, Summary: "Sending reputation",
		Description: "Per sending domain, daily bounce and complaint rates over the last days, a status against the " +
			"thresholds bulk senders must meet, and the recent bounce classes; and whether automatic protection " +
			"paused the organization's broadcasts.",
	}, access{kind: authSession}, s.getReputation, http.StatusBadRequest)

	register(s, huma.Operation{
		OperationID: "admin-resume-broadcasts", Method: http.MethodPost, Path: "/v1/admin/organizations/{id}/broadcasts/resume",
		Tags: []string{tagAdmin}, Summary: "Lift automatic protection's broadcast pause",
		Description: "Broadcasts resume; protection pauses them again at its next check if the rates still cross the limits.",
	}, access{kind: authAdmin}, s.resumeBroadcasts, http.StatusBadRequest, http.StatusNotFound)
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func toReputationDay(d ports.ReputationDay, bounce, complaint float64) reputationDayResponse {
	return reputationDayResponse{Date: day(d.Date), Sent: d.Sent, Delivered: d.Delivered, HardBounced: d.HardBounced,
		SoftBounced: d.SoftBounced, Complained: d.Complained, BounceRate: bounce, SpamRate: complaint}
}

// rates is core/reputation.Rates, which the edge may not import.
func rates(d ports.ReputationDay) (bounce, complaint float64) {
	if d.Sent > 0 {
		bounce = float64(d.HardBounced) / float64(d.Sent)
	}
	base := d.Delivered
	if base == 0 {
		base = d.Sent
	}
	if base > 0 {
		complaint = float64(d.Complained) / float64(base)
	}
	return bounce, complaint
}

func toProtection(p ports.Protection) protectionResponse {
	out := protectionResponse{BroadcastsPaused: p.BroadcastsPaused}
	if p.BroadcastsPaused {
		out.Reason = &p.Reason
		if p.PausedAt != nil {
			t := utc(*p.PausedAt)
			out.PausedAt = &t
		}
	}
	return out
}

func (s *Server) getReputation(ctx context.Context, in *reputationInput) (*body[reputationResponse], error) {
	r, err := s.core.Reputation.Reputation(ctx, principalFrom(ctx).OrganizationID, in.Days)
	if err != nil {
		return nil, err
	}
	t := r.Thresholds
	out := reputationResponse{
		Days: r.Days, Since: day(r.Since), Protection: toProtection(r.Protection),
		Thresholds: thresholdsResponse{ComplaintWarning: t.ComplaintWarning, ComplaintAtRisk: t.ComplaintAtRisk,
			BounceWarning: t.BounceWarning, BounceAtRisk: t.BounceAtRisk, MinVolume: t.MinVolume},
		Domains: make([]domainReputationResponse, 0, len(r.Domains)),
	}
	for _, d := range r.Domains {
		dr := domainReputationResponse{Domain: d.Domain, Status: d.Status,
			Total:         toReputationDay(d.Total, d.BounceRate, d.ComplaintRate),
			Days:          make([]reputationDayResponse, 0, len(d.Days)),
			BounceClasses: make([]bounceClassResponse, 0, len(d.BounceClasses))}
		for _, x := range d.Days {
			b, c := rates(x)
			dr.Days = append(dr.Days, toReputationDay(x, b, c))
		}
		for _, c := range d.BounceClasses {
			dr.BounceClasses = append(dr.BounceClasses, bounceClassResponse{Class: c.Class, Count: c.Count})
		}
		out.Domains = append(out.Domains, dr)
	}
	return &body[reputationResponse]{out}, nil
}

func (s *Server) resumeBroadcasts(ctx context.Context, in *idPath) (*body[protectionResponse], error) {
	p, err := s.core.Reputation.ResumeBroadcasts(ctx, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[protectionResponse]{toProtection(p)}, nil
}

// organizationProtection is the protection part of GET /v1/organization and the admin list; without a
// reputation service every organization's broadcasts are running.
func (s *Server) organizationProtection(ctx context.Context, orgID string) (protectionResponse, error) {
	if s.core.Reputation == nil {
		return protectionResponse{}, nil
	}
	p, err := s.core.Reputation.Protection(ctx, orgID)
	if err != nil {
		return protectionResponse{}, err
	}
	return toProtection(p), nil
}
