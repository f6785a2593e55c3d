package rpc_test

import (
	"context"
	"sync"

	"github.com/postmill/postmill/ports"
)

// dmarcAnswers are what the fake core answers for the DMARC service, kept beside fakeCore so that the
// DMARC area adds a file rather than growing the fake.
type dmarcAnswers struct {
	stored int
	rows   []ports.DMARCSourceSummary
}

var dmarcByFake sync.Map // *fakeCore -> *dmarcAnswers

func (f *fakeCore) dmarc() *dmarcAnswers {
	a, _ := dmarcByFake.LoadOrStore(f, &dmarcAnswers{})
	return a.(*dmarcAnswers)
}

func (f *fakeCore) IngestDMARCReport(ctx context.Context, raw []byte) (int, error) {
	return f.dmarc().stored, f.record(ctx, "IngestDMARCReport", raw)
}

func (f *fakeCore) DMARCSummary(ctx context.Context, orgID string, days int, domain string) ([]ports.DMARCSourceSummary, error) {
	return f.dmarc().rows, f.record(ctx, "DMARCSummary", orgID, days, domain)
}

func dmarcRoundTrips() []roundTrip {
	// The mail crosses byte for byte, bytes that are not UTF-8 included (a gzip attachment sent as 8bit).
	raw := []byte("From: noreply-dmarc-support@google.com\r\n\r\n\x1f\x8b\x08\x00\xff\xfe")
	rows := []ports.DMARCSourceSummary{{Domain: "acme.test", Reporter: "google.com", SourceIP: "203.0.113.25", Messages: 120,
		DKIMAligned: 120, SPFAligned: 110, DMARCPass: 120, DKIMPass: 120, SPFPass: 118, None: 117, Quarantine: 2, Reject: 1}}
	return []roundTrip{
		{
			name: "IngestDMARCReport", answer: func(f *fakeCore) { f.dmarc().stored = 2 },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.DMARC.IngestDMARCReport(ctx, raw)
			},
			want: 2, method: "IngestDMARCReport", args: []any{raw},
		},
		{
			name: "DMARCSummary", answer: func(f *fakeCore) { f.dmarc().rows = rows },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.DMARC.DMARCSummary(ctx, "org1", 30, "acme.test")
			},
			want: rows, method: "DMARCSummary", args: []any{"org1", 30, "acme.test"},
		},
		{
			name: "DMARCSummary/empty", answer: func(f *fakeCore) { f.dmarc().rows = []ports.DMARCSourceSummary{} },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.DMARC.DMARCSummary(ctx, "org1", 1, "")
			},
			want: []ports.DMARCSourceSummary{}, method: "DMARCSummary", args: []any{"org1", 1, ""},
		},
	}
}
