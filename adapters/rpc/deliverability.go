package rpc

import (
	"github.com/postmill/postmill/ports"

	deliverabilityv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/deliverability/v1"
)

// Complaint.ArrivalDate and ComplaintReport.ArrivalDate travel as unset Timestamps when nil, so "the
// report did not say" survives the hop.

func suppressionToProto(s ports.Suppression) *deliverabilityv1.Suppression {
	return &deliverabilityv1.Suppression{
		Id:             s.ID,
		OrganizationId: s.OrganizationID,
		Address:        s.Address,
		Scope:          s.Scope,
		Reason:         s.Reason,
		CreatedAt:      timeToProto(s.CreatedAt),
	}
}

func suppressionFromProto(s *deliverabilityv1.Suppression) ports.Suppression {
	return ports.Suppression{
		ID:             s.GetId(),
		OrganizationID: s.GetOrganizationId(),
		Address:        s.GetAddress(),
		Scope:          s.GetScope(),
		Reason:         s.GetReason(),
		CreatedAt:      timeFromProto(s.GetCreatedAt()),
	}
}

func suppressionsToProto(suppressions []ports.Suppression) *deliverabilityv1.SuppressionList {
	if suppressions == nil {
		return nil
	}
	return &deliverabilityv1.SuppressionList{Items: mapItems(suppressions, suppressionToProto)}
}

func suppressionsFromProto(l *deliverabilityv1.SuppressionList) []ports.Suppression {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), suppressionFromProto)
}

func newSuppressionToProto(s ports.NewSuppression) *deliverabilityv1.NewSuppression {
	return &deliverabilityv1.NewSuppression{Address: s.Address, Scope: s.Scope, Reason: s.Reason}
}

func newSuppressionFromProto(s *deliverabilityv1.NewSuppression) ports.NewSuppression {
	return ports.NewSuppression{Address: s.GetAddress(), Scope: s.GetScope(), Reason: s.GetReason()}
}

func pageQueryToProto(q ports.PageQuery) *deliverabilityv1.PageQuery {
	return &deliverabilityv1.PageQuery{Limit: int64(q.Limit), Cursor: q.Cursor}
}

func pageQueryFromProto(q *deliverabilityv1.PageQuery) ports.PageQuery {
	return ports.PageQuery{Limit: int(q.GetLimit()), Cursor: q.GetCursor()}
}

func bounceToProto(b ports.Bounce) *deliverabilityv1.Bounce {
	return &deliverabilityv1.Bounce{
		Id:             b.ID,
		OrganizationId: b.OrganizationID,
		MessageId:      b.MessageID,
		RecipientId:    b.RecipientID,
		Address:        b.Address,
		Type:           b.Type,
		Status:         b.Status,
		Action:         b.Action,
		DiagnosticCode: b.DiagnosticCode,
		RemoteMta:      b.RemoteMTA,
		ReportingMta:   b.ReportingMTA,
		CreatedAt:      timeToProto(b.CreatedAt),
	}
}

func bounceFromProto(b *deliverabilityv1.Bounce) ports.Bounce {
	return ports.Bounce{
		ID:             b.GetId(),
		OrganizationID: b.GetOrganizationId(),
		MessageID:      b.GetMessageId(),
		RecipientID:    b.GetRecipientId(),
		Address:        b.GetAddress(),
		Type:           b.GetType(),
		Status:         b.GetStatus(),
		Action:         b.GetAction(),
		DiagnosticCode: b.GetDiagnosticCode(),
		RemoteMTA:      b.GetRemoteMta(),
		ReportingMTA:   b.GetReportingMta(),
		CreatedAt:      timeFromProto(b.GetCreatedAt()),
	}
}

func bouncesToProto(bounces []ports.Bounce) *deliverabilityv1.BounceList {
	if bounces == nil {
		return nil
	}
	return &deliverabilityv1.BounceList{Items: mapItems(bounces, bounceToProto)}
}

func bouncesFromProto(l *deliverabilityv1.BounceList) []ports.Bounce {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), bounceFromProto)
}

func complaintToProto(c ports.Complaint) *deliverabilityv1.Complaint {
	return &deliverabilityv1.Complaint{
		Id:             c.ID,
		OrganizationId: c.OrganizationID,
		MessageId:      c.MessageID,
		RecipientId:    c.RecipientID,
		Address:        c.Address,
		FeedbackType:   c.FeedbackType,
		UserAgent:      c.UserAgent,
		ReportedDomain: c.ReportedDomain,
		SourceIp:       c.SourceIP,
		ArrivalDate:    timePtrToProto(c.ArrivalDate),
		CreatedAt:      timeToProto(c.CreatedAt),
	}
}

func complaintFromProto(c *deliverabilityv1.Complaint) ports.Complaint {
	return ports.Complaint{
		ID:             c.GetId(),
		OrganizationID: c.GetOrganizationId(),
		MessageID:      c.GetMessageId(),
		RecipientID:    c.GetRecipientId(),
		Address:        c.GetAddress(),
		FeedbackType:   c.GetFeedbackType(),
		UserAgent:      c.GetUserAgent(),
		ReportedDomain: c.GetReportedDomain(),
		SourceIP:       c.GetSourceIp(),
		ArrivalDate:    timePtrFromProto(c.GetArrivalDate()),
		CreatedAt:      timeFromProto(c.GetCreatedAt()),
	}
}

func complaintsToProto(complaints []ports.Complaint) *deliverabilityv1.ComplaintList {
	if complaints == nil {
		return nil
	}
	return &deliverabilityv1.ComplaintList{Items: mapItems(complaints, complaintToProto)}
}

func complaintsFromProto(l *deliverabilityv1.ComplaintList) []ports.Complaint {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), complaintFromProto)
}

func dsnRecipientsToProto(recipients []ports.DSNRecipient) *deliverabilityv1.DSNRecipientList {
	if recipients == nil {
		return nil
	}
	l := &deliverabilityv1.DSNRecipientList{Items: make([]*deliverabilityv1.DSNRecipient, 0, len(recipients))}
	for _, r := range recipients {
		l.Items = append(l.Items, &deliverabilityv1.DSNRecipient{
			FinalRecipient:    r.FinalRecipient,
			OriginalRecipient: r.OriginalRecipient,
			Action:            r.Action,
			Status:            r.Status,
			DiagnosticCode:    r.DiagnosticCode,
			RemoteMta:         r.RemoteMTA,
		})
	}
	return l
}

func dsnRecipientsFromProto(l *deliverabilityv1.DSNRecipientList) []ports.DSNRecipient {
	if l == nil {
		return nil
	}
	recipients := make([]ports.DSNRecipient, 0, len(l.GetItems()))
	for _, r := range l.GetItems() {
		recipients = append(recipients, ports.DSNRecipient{
			FinalRecipient:    r.GetFinalRecipient(),
			OriginalRecipient: r.GetOriginalRecipient(),
			Action:            r.GetAction(),
			Status:            r.GetStatus(),
			DiagnosticCode:    r.GetDiagnosticCode(),
			RemoteMTA:         r.GetRemoteMta(),
		})
	}
	return recipients
}

func bounceReportToProto(r ports.BounceReport) *deliverabilityv1.BounceReport {
	return &deliverabilityv1.BounceReport{
		Rcpt:              r.Rcpt,
		ReportingMta:      r.ReportingMTA,
		OriginalMessageId: r.OriginalMessageID,
		Recipients:        dsnRecipientsToProto(r.Recipients),
		ArrivedAt:         timeToProto(r.ArrivedAt),
	}
}

func bounceReportFromProto(r *deliverabilityv1.BounceReport) ports.BounceReport {
	return ports.BounceReport{
		Rcpt:              r.GetRcpt(),
		ReportingMTA:      r.GetReportingMta(),
		OriginalMessageID: r.GetOriginalMessageId(),
		Recipients:        dsnRecipientsFromProto(r.GetRecipients()),
		ArrivedAt:         timeFromProto(r.GetArrivedAt()),
	}
}

func complaintReportToProto(r ports.ComplaintReport) *deliverabilityv1.ComplaintReport {
	return &deliverabilityv1.ComplaintReport{
		Rcpt:              r.Rcpt,
		FeedbackType:      r.FeedbackType,
		UserAgent:         r.UserAgent,
		OriginalMailFrom:  r.OriginalMailFrom,
		OriginalRcptTo:    stringListToProto(r.OriginalRcptTo),
		OriginalMessageId: r.OriginalMessageID,
		ReportedDomain:    r.ReportedDomain,
		SourceIp:          r.SourceIP,
		ArrivalDate:       timePtrToProto(r.ArrivalDate),
		ArrivedAt:         timeToProto(r.ArrivedAt),
	}
}

func complaintReportFromProto(r *deliverabilityv1.ComplaintReport) ports.ComplaintReport {
	return ports.ComplaintReport{
		Rcpt:              r.GetRcpt(),
		FeedbackType:      r.GetFeedbackType(),
		UserAgent:         r.GetUserAgent(),
		OriginalMailFrom:  r.GetOriginalMailFrom(),
		OriginalRcptTo:    stringListFromProto(r.GetOriginalRcptTo()),
		OriginalMessageID: r.GetOriginalMessageId(),
		ReportedDomain:    r.GetReportedDomain(),
		SourceIP:          r.GetSourceIp(),
		ArrivalDate:       timePtrFromProto(r.GetArrivalDate()),
		ArrivedAt:         timeFromProto(r.GetArrivedAt()),
	}
}
