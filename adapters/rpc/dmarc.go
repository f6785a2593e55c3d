package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	dmarcv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/dmarc/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/dmarc/v1/dmarcv1connect"
)

// The edge reads the summaries; the inbound tier alone ingests the reports its MX listener receives.
func init() {
	register(portService(func(c *ports.Core) *ports.DMARCService { return &c.DMARC },
		dmarcv1connect.NewDMARCServiceHandler, newDMARCServer,
		dmarcv1connect.NewDMARCServiceClient, newDMARCClient).
		calledBy(dmarcv1connect.DMARCServiceName, TierEdge).
		procedureCalledBy(dmarcv1connect.DMARCServiceIngestDMARCReportProcedure, TierInbound))
}

// dmarcServer serves postmill.dmarc.v1.DMARCService from a ports.DMARCService.
type dmarcServer struct {
	svc ports.DMARCService
	log *slog.Logger
}

func newDMARCServer(svc ports.DMARCService, log *slog.Logger) dmarcv1connect.DMARCServiceHandler {
	return &dmarcServer{svc: svc, log: log}
}

func (s *dmarcServer) IngestDMARCReport(ctx context.Context, req *connect.Request[dmarcv1.IngestDMARCReportRequest]) (*connect.Response[dmarcv1.IngestDMARCReportResponse], error) {
	n, err := s.svc.IngestDMARCReport(ctx, req.Msg.GetRaw())
	return respond(ctx, s.log, req, err, func() *dmarcv1.IngestDMARCReportResponse {
		return &dmarcv1.IngestDMARCReportResponse{Stored: int64(n)}
	})
}

func (s *dmarcServer) DMARCSummary(ctx context.Context, req *connect.Request[dmarcv1.DMARCSummaryRequest]) (*connect.Response[dmarcv1.DMARCSummaryResponse], error) {
	rows, err := s.svc.DMARCSummary(ctx, req.Msg.GetOrganizationId(), int(req.Msg.GetDays()), req.Msg.GetDomain())
	return respond(ctx, s.log, req, err, func() *dmarcv1.DMARCSummaryResponse {
		if rows == nil {
			return &dmarcv1.DMARCSummaryResponse{}
		}
		return &dmarcv1.DMARCSummaryResponse{Rows: &dmarcv1.SourceSummaryList{Items: mapItems(rows, dmarcRowToProto)}}
	})
}

// dmarcClient implements ports.DMARCService over postmill.dmarc.v1.DMARCService.
type dmarcClient struct {
	conn dmarcv1connect.DMARCServiceClient
}

func newDMARCClient(conn dmarcv1connect.DMARCServiceClient) ports.DMARCService {
	return &dmarcClient{conn: conn}
}

func (c *dmarcClient) IngestDMARCReport(ctx context.Context, raw []byte) (int, error) {
	return call(ctx, dmarcv1connect.DMARCServiceIngestDMARCReportProcedure, c.conn.IngestDMARCReport,
		&dmarcv1.IngestDMARCReportRequest{Raw: raw},
		func(r *dmarcv1.IngestDMARCReportResponse) int { return int(r.GetStored()) })
}

func (c *dmarcClient) DMARCSummary(ctx context.Context, orgID string, days int, domain string) ([]ports.DMARCSourceSummary, error) {
	return call(ctx, dmarcv1connect.DMARCServiceDMARCSummaryProcedure, c.conn.DMARCSummary,
		&dmarcv1.DMARCSummaryRequest{OrganizationId: orgID, Days: int64(days), Domain: domain},
		pick((*dmarcv1.DMARCSummaryResponse).GetRows, func(l *dmarcv1.SourceSummaryList) []ports.DMARCSourceSummary {
			if l == nil {
				return nil
			}
			return mapItems(l.GetItems(), dmarcRowFromProto)
		}))
}

func dmarcRowToProto(r ports.DMARCSourceSummary) *dmarcv1.SourceSummary {
	return &dmarcv1.SourceSummary{Domain: r.Domain, Reporter: r.Reporter, SourceIp: r.SourceIP, Messages: r.Messages,
		DkimAligned: r.DKIMAligned, SpfAligned: r.SPFAligned, DmarcPass: r.DMARCPass, DkimPass: r.DKIMPass, SpfPass: r.SPFPass,
		None: r.None, Quarantine: r.Quarantine, Reject: r.Reject}
}

func dmarcRowFromProto(r *dmarcv1.SourceSummary) ports.DMARCSourceSummary {
	return ports.DMARCSourceSummary{Domain: r.GetDomain(), Reporter: r.GetReporter(), SourceIP: r.GetSourceIp(),
		Messages: r.GetMessages(), DKIMAligned: r.GetDkimAligned(), SPFAligned: r.GetSpfAligned(), DMARCPass: r.GetDmarcPass(),
		DKIMPass: r.GetDkimPass(), SPFPass: r.GetSpfPass(), None: r.GetNone(), Quarantine: r.GetQuarantine(), Reject: r.GetReject()}
}
