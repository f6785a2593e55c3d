package deliverability

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// TestReportIDs: the same report gets the same id, any difference in what it says gets another, and the
// field encoding cannot be shifted from one field into the next.
func TestReportIDs(t *testing.T) {
	t.Parallel()
	dsn := ports.BounceReport{Rcpt: "B-x@bounce.example.com", ReportingMTA: "mx.example.net", OriginalMessageID: "m@x",
		Recipients: []ports.DSNRecipient{{FinalRecipient: "a@example.com", Action: "failed", Status: "5.1.1", DiagnosticCode: "smtp; 550"}}}
	again := dsn
	again.Rcpt = "b-x@bounce.example.com" // receivers may change the case of the local part
	again.ArrivedAt = time.Now()
	if bounceReportID(dsn) != bounceReportID(again) {
		t.Fatal("one report, two ids")
	}
	if _, err := uuid.Parse(bounceReportID(dsn)); err != nil {
		t.Fatalf("report id %q is not a UUID", bounceReportID(dsn))
	}
	delayed := dsn
	delayed.Recipients = []ports.DSNRecipient{{FinalRecipient: "a@example.com", Action: "delayed", Status: "4.4.1", DiagnosticCode: "smtp; 550"}}
	if bounceReportID(dsn) == bounceReportID(delayed) {
		t.Fatal("a delayed report and a failed one share an id")
	}
	shifted := dsn
	shifted.ReportingMTA, shifted.OriginalMessageID = "mx.example.netm", "@x"
	if bounceReportID(dsn) == bounceReportID(shifted) {
		t.Fatal("moving characters between fields kept the id")
	}

	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	arf := ports.ComplaintReport{Rcpt: "fbl@bounces.example", FeedbackType: "abuse", OriginalMailFrom: "b-x@bounce.example.com", OriginalRcptTo: []string{"a@example.com"}, ArrivalDate: &at}
	later := at.Add(time.Hour)
	other := arf
	other.ArrivalDate = &later
	if complaintReportID(arf) == complaintReportID(other) || complaintReportID(arf) != complaintReportID(arf) {
		t.Fatal("complaint ids do not follow the report's content")
	}
	if complaintReportID(arf) == bounceReportID(dsn) {
		t.Fatal("a complaint and a bounce share an id")
	}
}
