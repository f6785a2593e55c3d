package edge

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

type dmarcInput struct {
	Days   int    `query:"days" minimum:"1" maximum:"365" default:"30" doc:"Reports whose period ended in the last days: 1-365 (SPEC §8); default 30" example:"30"`
	Domain string `query:"domain" maxLength:"253" doc:"Only reports of this domain" example:"acme.example"`
}

type dmarcRowResponse struct {
	Domain      string `json:"domain" doc:"The domain the reports are about (policy_published)" example:"acme.example"`
	Reporter    string `json:"reporter" doc:"The organization that sent the reports (org_name)" example:"google.com"`
	SourceIP    string `json:"sourceIp" doc:"The IP address the mail came from" example:"203.0.113.25"`
	Messages    int64  `json:"messages" doc:"Messages reported from the address"`
	DMARCPass   int64  `json:"dmarcPass" doc:"Messages that passed DMARC: DKIM or SPF aligned"`
	DKIMAligned int64  `json:"dkimAligned" doc:"Messages whose DKIM passed aligned with the From domain"`
	SPFAligned  int64  `json:"spfAligned" doc:"Messages whose SPF passed aligned with the From domain"`
	DKIMPass    int64  `json:"dkimPass" doc:"Messages with a passing DKIM signature, aligned or not"`
	SPFPass     int64  `json:"spfPass" doc:"Messages whose SPF passed, aligned or not"`
	None        int64  `json:"dispositionNone" doc:"Messages the receiver delivered normally"`
	Quarantine  int64  `json:"dispositionQuarantine" doc:"Messages the receiver quarantined (spam folder)"`
	Reject      int64  `json:"dispositionReject" doc:"Messages the receiver rejected"`
}

type dmarcResponse struct {
	Days    int                `json:"days" doc:"The window in days"`
	Sources []dmarcRowResponse `json:"sources" doc:"Per domain, reporter and source IP, most messages first"`
}

func (s *Server) registerDMARCRoutes() {
	if s.core.DMARC == nil {
		return
	}
	register(s, huma.Operation{
		OperationID: "get-dmarc-summary", Method: http.MethodGet, Path: "/v1/reputation/dmarc",
		Tags: []string{tagReputation}, Summary: "DMARC aggregate reports",
		Description: "A summary of the DMARC aggregate reports (RFC 7489) receivers mailed to the platform's report " +
			"address about the organization's domains: volume, SPF and DKIM pass and alignment, and disposition, by " +
			"reporter and source IP. Publish rua=mailto:<the address> in the domain's DMARC record to receive them.",
	}, access{kind: authSession}, s.getDMARCSummary, http.StatusBadRequest)
}

func (s *Server) getDMARCSummary(ctx context.Context, in *dmarcInput) (*body[dmarcResponse], error) {
	rows, err := s.core.DMARC.DMARCSummary(ctx, principalFrom(ctx).OrganizationID, in.Days, in.Domain)
	if err != nil {
		return nil, err
	}
	out := dmarcResponse{Days: in.Days, Sources: make([]dmarcRowResponse, 0, len(rows))}
	for _, r := range rows {
		out.Sources = append(out.Sources, dmarcRowResponse{Domain: r.Domain, Reporter: r.Reporter, SourceIP: r.SourceIP,
			Messages: r.Messages, DMARCPass: r.DMARCPass, DKIMAligned: r.DKIMAligned, SPFAligned: r.SPFAligned,
			DKIMPass: r.DKIMPass, SPFPass: r.SPFPass, None: r.None, Quarantine: r.Quarantine, Reject: r.Reject})
	}
	return &body[dmarcResponse]{out}, nil
}
