package deliverability

import (
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// reportNamespace is the name space of report ids (RFC 9562 §5.5 name-based UUIDs).
var reportNamespace = uuid.MustParse("6f0c2d1e-3b7a-5c41-9d2e-8a4b1c7f5e90")

// bounceReportID names a bounce report by its content: the same DSN delivered again — the sender retrying
// after a reply it lost, or a 451 for another recipient of the same transaction — gets the same id, and the
// store applies an id once. Two different reports (another arrival, another status) get different ids.
func bounceReportID(r ports.BounceReport) string {
	var b reportKey
	b.add("bounce", strings.ToLower(bareAddress(r.Rcpt)), r.ReportingMTA, r.OriginalMessageID)
	for _, p := range r.Recipients {
		b.add(p.FinalRecipient, p.OriginalRecipient, p.Action, p.Status, p.DiagnosticCode, p.RemoteMTA)
	}
	return b.id()
}

// complaintReportID names a feedback report by its content, like bounceReportID.
func complaintReportID(r ports.ComplaintReport) string {
	var b reportKey
	b.add("complaint", strings.ToLower(bareAddress(r.Rcpt)), r.FeedbackType, r.UserAgent, r.OriginalMailFrom,
		r.OriginalMessageID, r.ReportedDomain, r.SourceIP)
	b.add(r.OriginalRcptTo...)
	if r.ArrivalDate != nil {
		b.add(strconv.FormatInt(r.ArrivalDate.Unix(), 10))
	}
	return b.id()
}

// reportKey is an unambiguous encoding of a report's fields: each is length-prefixed, so no two field lists
// encode alike.
type reportKey struct{ b []byte }

func (k *reportKey) add(fields ...string) {
	for _, f := range fields {
		k.b = strconv.AppendInt(k.b, int64(len(f)), 10)
		k.b = append(k.b, ':')
		k.b = append(k.b, f...)
	}
}

func (k *reportKey) id() string { return uuid.NewSHA1(reportNamespace, k.b).String() }
