package ports

import (
	"context"
	"time"
)

// DMARCRecord is one <record> of an RFC 7489 appendix C aggregate report: a source IP's messages with one
// outcome.
type DMARCRecord struct {
	SourceIP    string
	Count       int64
	Disposition string // none, quarantine, reject
	DKIMAligned bool   // policy_evaluated dkim = pass
	SPFAligned  bool   // policy_evaluated spf = pass
	HeaderFrom  string
	DKIMResult  string // the first auth_results dkim result (pass, fail, none, ...)
	SPFResult   string // the auth_results spf result
}

// DMARCReport is one aggregate report.
type DMARCReport struct {
	ID             string // Postmill's id
	OrganizationID string
	ReporterOrg    string // report_metadata org_name (google.com, Yahoo, Outlook.com)
	ReporterEmail  string
	ReportID       string // report_metadata report_id, unique per reporter
	Domain         string // policy_published domain
	Policy         string // policy_published p
	Begin, End     time.Time
	Records        []DMARCRecord
	ReceivedAt     time.Time
}

// DMARCSourceSummary is GET /v1/reputation/dmarc's row: one reporter's view of one source IP.
type DMARCSourceSummary struct {
	Domain      string
	Reporter    string
	SourceIP    string
	Messages    int64
	DKIMAligned int64 // messages whose DKIM passed aligned
	SPFAligned  int64 // messages whose SPF passed aligned
	DMARCPass   int64 // messages with either aligned
	DKIMPass    int64 // messages whose DKIM authenticated (aligned or not)
	SPFPass     int64
	None        int64 // by disposition
	Quarantine  int64
	Reject      int64
}

// DMARCService takes aggregate reports mailed to the report address and summarises them.
type DMARCService interface {
	// IngestDMARCReport parses the mail (an XML, gzip or zip attachment, or the XML as the body) and stores
	// each report for every organization owning its domain. It returns how many reports it stored; a
	// report already stored counts and changes nothing. Errors: invalid_argument (not a report).
	IngestDMARCReport(ctx context.Context, raw []byte) (int, error)
	// DMARCSummary summarises the organization's reports whose period ended in the last days days (1-365),
	// optionally for one domain. Errors: invalid_argument (days, path "days").
	DMARCSummary(ctx context.Context, orgID string, days int, domain string) ([]DMARCSourceSummary, error)
}

// DMARCStore persists reports.
type DMARCStore interface {
	// OrganizationsOwningDomain returns the organizations with a sending domain of this name.
	OrganizationsOwningDomain(ctx context.Context, domain string) ([]string, error)
	// InsertDMARCReport stores the report with its records unless the organization holds one with the
	// same reporter and report id; inserted says whether it did.
	InsertDMARCReport(ctx context.Context, r DMARCReport) (inserted bool, err error)
	// DMARCSummary sums the organization's records of reports ending at or after since.
	DMARCSummary(ctx context.Context, orgID string, since time.Time, domain string) ([]DMARCSourceSummary, error)
}
