package rpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func fullSuppression() ports.Suppression {
	return ports.Suppression{
		ID: "s1", OrganizationID: "org1", Address: "ada@example.org", Scope: "recipient", Reason: "complaint", CreatedAt: t0,
	}
}

func fullNewSuppression() ports.NewSuppression {
	return ports.NewSuppression{Address: "Example.ORG", Scope: "domain", Reason: "manual"}
}

func fullBounce() ports.Bounce {
	return ports.Bounce{
		ID: "b1", OrganizationID: "org1", MessageID: "m1", RecipientID: "rc1", Address: "gone@example.org",
		Type: ports.BounceHard, Class: ports.BounceClassBadMailbox, Status: "5.1.1", Action: "failed",
		DiagnosticCode: "smtp; 550 5.1.1 <gone@example.org>: Recipient address rejected — ünknown",
		RemoteMTA:      "mx1.example.org", ReportingMTA: "mta.postmill.local", CreatedAt: t1,
	}
}

func fullComplaint() ports.Complaint {
	return ports.Complaint{
		ID: "c1", OrganizationID: "org1", MessageID: "m1", RecipientID: "rc2", Address: "angry@example.net",
		FeedbackType: "abuse", UserAgent: "SomeGenerator/1.0", ReportedDomain: "mail.example.com",
		SourceIP: "192.0.2.1", ArrivalDate: ptr(t0), CreatedAt: t1,
	}
}

func fullDSNRecipient() ports.DSNRecipient {
	return ports.DSNRecipient{
		FinalRecipient: "gone@example.org", OriginalRecipient: "Gone@Example.org", Action: "failed", Status: "5.1.1",
		DiagnosticCode: "smtp; 550 5.1.1 user unknown", RemoteMTA: "mx1.example.org",
	}
}

func fullBounceReport() ports.BounceReport {
	return ports.BounceReport{
		Rcpt: "b-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa01234567@bounce.mail.example.com", ReportingMTA: "mx1.example.org",
		OriginalMessageID: "m1@mail.example.com",
		Recipients: []ports.DSNRecipient{fullDSNRecipient(), {
			FinalRecipient: "late@example.org", OriginalRecipient: "late@example.org", Action: "delayed", Status: "4.2.2",
			DiagnosticCode: "smtp; 452 4.2.2 mailbox full", RemoteMTA: "mx2.example.org",
		}},
		ArrivedAt: t2,
	}
}

func fullComplaintReport() ports.ComplaintReport {
	return ports.ComplaintReport{
		Rcpt: "fbl@postmill.local", FeedbackType: "abuse", UserAgent: "SomeGenerator/1.0",
		OriginalMailFrom: "b-aaaa@bounce.mail.example.com", OriginalRcptTo: []string{"angry@example.net", "x@example.net"},
		OriginalMessageID: "m1@mail.example.com", ReportedDomain: "mail.example.com", SourceIP: "2001:db8::1",
		ArrivalDate: ptr(t0), ArrivedAt: t1,
	}
}

// TestDeliverabilityFixturesComplete fails when a ports type of the deliverability or feedback API grows
// a field that the full fixtures (and so the round trips that use them) leave unset.
func TestDeliverabilityFixturesComplete(t *testing.T) {
	t.Parallel()
	for _, v := range []any{
		fullSuppression(), fullNewSuppression(), fullBounce(), fullComplaint(), fullDSNRecipient(),
		fullBounceReport(), fullComplaintReport(), ports.PageQuery{Limit: 100, Cursor: "c"},
		ports.BouncePage{Data: []ports.Bounce{fullBounce()}, NextCursor: "n"},
		ports.ComplaintPage{Data: []ports.Complaint{fullComplaint()}, NextCursor: "n"},
	} {
		mustSetEveryField(t, v)
	}
}

func deliverabilityRoundTrips() []roundTrip {
	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }

	global := ports.Suppression{ID: "s2", Address: "spamtrap@example.com", Scope: "global", Reason: "manual", CreatedAt: t2}
	for name, suppressions := range map[string][]ports.Suppression{
		"set":   {fullSuppression(), global, {}},
		"empty": {},
		"nil":   nil,
	} {
		add(roundTrip{
			name:   "ListSuppressions/" + name,
			answer: func(f *fakeCore) { f.suppressions = suppressions },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Deliverability.ListSuppressions(ctx, "org1")
			},
			want:   suppressions,
			method: "ListSuppressions",
			args:   []any{"org1"},
		})
		page := ports.Page[ports.Suppression]{Data: suppressions, NextCursor: "n"}
		q := ports.PageQuery{Limit: 25, Cursor: "c"}
		add(roundTrip{
			name:   "ListSuppressionsPage/" + name,
			answer: func(f *fakeCore) { f.suppressionPage = page },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Deliverability.ListSuppressionsPage(ctx, "org1", q)
			},
			want:   page,
			method: "ListSuppressionsPage",
			args:   []any{"org1", q},
		})
		add(roundTrip{
			name:   "ListGlobalSuppressions/" + name,
			answer: func(f *fakeCore) { f.suppressions = suppressions },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Deliverability.ListGlobalSuppressions(ctx)
			},
			want:   suppressions,
			method: "ListGlobalSuppressions",
			args:   nil,
		})
	}
	// The core applies the defaults (tenant, manual): an empty scope and reason must reach it empty.
	for name, in := range map[string]ports.NewSuppression{"full": fullNewSuppression(), "zero": {}} {
		for answerName, answer := range map[string]ports.Suppression{"full": fullSuppression(), "global": global, "zero": {}} {
			add(roundTrip{
				name:   "CreateSuppression/" + name + " request, " + answerName + " answer",
				answer: func(f *fakeCore) { f.suppression = answer },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					return c.Deliverability.CreateSuppression(ctx, "org1", in)
				},
				want:   answer,
				method: "CreateSuppression",
				args:   []any{"org1", in},
			})
			add(roundTrip{
				name:   "CreateGlobalSuppression/" + name + " request, " + answerName + " answer",
				answer: func(f *fakeCore) { f.suppression = answer },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					return c.Deliverability.CreateGlobalSuppression(ctx, in)
				},
				want:   answer,
				method: "CreateGlobalSuppression",
				args:   []any{in},
			})
		}
	}
	for _, deleted := range []bool{true, false} {
		add(roundTrip{
			name:   fmt.Sprintf("DeleteSuppression/%v", deleted),
			answer: func(f *fakeCore) { f.deleted = deleted },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Deliverability.DeleteSuppression(ctx, "org1", "s1")
			},
			want:   deleted,
			method: "DeleteSuppression",
			args:   []any{"org1", "s1"},
		})
		add(roundTrip{
			name:   fmt.Sprintf("DeleteGlobalSuppression/%v", deleted),
			answer: func(f *fakeCore) { f.deleted = deleted },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Deliverability.DeleteGlobalSuppression(ctx, "s2")
			},
			want:   deleted,
			method: "DeleteGlobalSuppression",
			args:   []any{"s2"},
		})
	}

	// Pages: every field; an empty page; a page whose data is nil; and the query as given, zero included
	// (the core applies the default limit and validates the cursor).
	for queryName, q := range map[string]ports.PageQuery{"query": {Limit: 100, Cursor: "opaque=="}, "zero query": {}, "negative": {Limit: -1}} {
		for name, page := range map[string]ports.BouncePage{
			"set":   {Data: []ports.Bounce{fullBounce(), {ID: "b2", Type: ports.BounceSoft}, {}}, NextCursor: "next=="},
			"empty": {Data: []ports.Bounce{}},
			"nil":   {},
		} {
			add(roundTrip{
				name:   "ListBounces/" + queryName + ", " + name,
				answer: func(f *fakeCore) { f.bouncePage = page },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					return c.Deliverability.ListBounces(ctx, "org1", q)
				},
				want:   page,
				method: "ListBounces",
				args:   []any{"org1", q},
			})
		}
		// An arrival date the report gave and one it did not must come back as they left.
		noArrival := fullComplaint()
		noArrival.ID, noArrival.ArrivalDate = "c2", nil
		for name, page := range map[string]ports.ComplaintPage{
			"set":   {Data: []ports.Complaint{fullComplaint(), noArrival, {}}, NextCursor: "next=="},
			"empty": {Data: []ports.Complaint{}},
			"nil":   {},
		} {
			add(roundTrip{
				name:   "ListComplaints/" + queryName + ", " + name,
				answer: func(f *fakeCore) { f.complaintPage = page },
				call: func(ctx context.Context, c ports.Core) (any, error) {
					return c.Deliverability.ListComplaints(ctx, "org1", q)
				},
				want:   page,
				method: "ListComplaints",
				args:   []any{"org1", q},
			})
		}
	}

	// Feedback. An address that is not UTF-8 reaches the core byte for byte, for the core to refuse.
	for _, tc := range []struct {
		rcpt     string
		accepted bool
	}{
		{fullBounceReport().Rcpt, true},
		{"stranger@example.org", false},
		{"", false},
		{"caf\xe9@mx.postmill.local", false},
	} {
		add(roundTrip{
			name:   fmt.Sprintf("AcceptsRecipient/%q", tc.rcpt),
			answer: func(f *fakeCore) { f.accepted = tc.accepted },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Feedback.AcceptsRecipient(ctx, tc.rcpt)
			},
			want:   tc.accepted,
			method: "AcceptsRecipient",
			args:   []any{tc.rcpt},
		})
	}
	emptyBounce := ports.BounceReport{Rcpt: "b-x@bounce.example.com", Recipients: []ports.DSNRecipient{}}
	sparse := ports.BounceReport{Rcpt: "b-y@bounce.example.com", Recipients: []ports.DSNRecipient{{FinalRecipient: "a@example.org"}, {}}}
	for name, r := range map[string]ports.BounceReport{
		"full": fullBounceReport(), "zero": {}, "empty": emptyBounce, "sparse recipients": sparse,
	} {
		add(roundTrip{
			name:   "RecordBounce/" + name,
			answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return nil, c.Feedback.RecordBounce(ctx, r)
			},
			want:   nil,
			method: "RecordBounce",
			args:   []any{r},
		})
	}
	noDate := fullComplaintReport()
	noDate.ArrivalDate = nil
	emptyComplaint := ports.ComplaintReport{Rcpt: "fbl@postmill.local", OriginalRcptTo: []string{}}
	for name, r := range map[string]ports.ComplaintReport{
		"full": fullComplaintReport(), "no arrival date": noDate, "zero": {}, "empty": emptyComplaint,
	} {
		add(roundTrip{
			name:   "RecordComplaint/" + name,
			answer: func(*fakeCore) {},
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return nil, c.Feedback.RecordComplaint(ctx, r)
			},
			want:   nil,
			method: "RecordComplaint",
			args:   []any{r},
		})
	}
	return trips
}

// TestFeedbackErrors checks the errors the inbound tier turns into SMTP replies: each comes back with
// its code, message, details and constraint, so a permanent refusal stays permanent across the hop.
func TestFeedbackErrors(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]*ports.Error{
		"not ours":     ports.ValidationError(ports.FieldViolation{Path: "rcpt", Message: "is not a return path Postmill made"}),
		"no recipient": ports.Errorf(ports.CodeInvalidArgument, "return path names no recipient"),
		"gone":         ports.NotFound("message not found"),
		"missing ref":  ports.MissingReference("messages_pkey"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &fakeCore{err: fmt.Errorf("feedback: %w", want)})
			ctx := context.Background()
			assertSameError(t, b.client.Core().Feedback.RecordBounce(ctx, fullBounceReport()), want)
			assertSameError(t, b.client.Core().Feedback.RecordComplaint(ctx, fullComplaintReport()), want)
			ok, err := b.client.Core().Feedback.AcceptsRecipient(ctx, "x@example.org")
			assertSameError(t, err, want)
			if ok {
				t.Error("AcceptsRecipient with an error answered true")
			}
		})
	}
}

// TestFeedbackReportNotUTF8 checks what happens to a report whose strings are not UTF-8, which proto3
// strings cannot carry: the call fails as an internal error naming the field and the core never runs
// the method on an empty report. The inbound tier cleans every value it parses, so this is the guard's
// last word, not a path real mail takes.
func TestFeedbackReportNotUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	r := fullBounceReport()
	r.Recipients = []ports.DSNRecipient{{FinalRecipient: "a@example.org", DiagnosticCode: "smtp; 550 utilisateur inconnu \xe9"}}
	err := b.client.Core().Feedback.RecordBounce(ctx, r)
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "diagnostic_code") {
		t.Errorf("RecordBounce: err = %v, want internal naming diagnostic_code", err)
	}
	c := fullComplaintReport()
	c.OriginalRcptTo = []string{"ok@example.net", "\xff@example.net"}
	err = b.client.Core().Feedback.RecordComplaint(ctx, c)
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "values") {
		t.Errorf("RecordComplaint: err = %v, want internal naming the list", err)
	}
	if calls := b.fake.recorded(); len(calls) != 0 {
		t.Errorf("implementation reached: %+v", calls)
	}
}
