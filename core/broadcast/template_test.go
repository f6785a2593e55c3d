package broadcast

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/postmill/postmill/ports"
)

// fakeRenderer renders a "template" of orgA: the subject and HTML with the contact's first name, and counts
// its calls (concurrent ones too); any other template is a missing reference, as the template service
// answers.
type fakeRenderer struct{ calls atomic.Int64 }

const templateID = "00000000-0000-7000-8000-0000000000e1"

func (r *fakeRenderer) RenderTemplate(_ context.Context, orgID, id string, vars map[string]any) (ports.RenderedTemplate, error) {
	r.calls.Add(1)
	if orgID != orgA || id != templateID {
		return ports.RenderedTemplate{}, ports.MissingReference(ports.TemplatesConstraint)
	}
	name := ""
	if c, ok := vars["contact"].(map[string]any); ok {
		name, _ = c["firstName"].(string)
	}
	return ports.RenderedTemplate{Subject: "For " + name, HTML: "<p>" + name + "</p>"}, nil
}

func TestTemplateBroadcast_RendersPerContactAndRefusesForeignTemplates(t *testing.T) {
	f := newFixture(t, 3)
	r := &fakeRenderer{}
	f.svc.deps.Renderer = r
	ctx := context.Background()
	if _, err := f.svc.CreateBroadcast(ctx, orgA, ports.NewBroadcast{Name: "n", Subject: "s", From: "news@acme.test",
		TemplateID: "00000000-0000-7000-8000-0000000000e2", TopicID: topic}); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("unknown template: %v", err)
	}
	if _, err := f.svc.CreateBroadcast(ctx, orgA, ports.NewBroadcast{Name: "n", Subject: "s", From: "news@acme.test",
		TemplateID: templateID, HTML: "<p>x</p>", TopicID: topic}); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("template and html together: %v", err)
	}
	b, err := f.svc.CreateBroadcast(ctx, orgA, ports.NewBroadcast{Name: "n", Subject: "s", From: "news@acme.test",
		TemplateID: templateID, TopicID: topic})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.emails.requests) != 3 {
		t.Fatalf("%d messages", len(f.emails.requests))
	}
	for _, req := range f.emails.requests {
		if req.Subject != "For Ann" || req.HTML != "<p>Ann</p>" || req.Template != nil {
			t.Fatalf("request = %+v", req)
		}
	}
}

func TestDeletedAudienceFailsTheBroadcast(t *testing.T) {
	f := newFixture(t, 3)
	ctx := context.Background()
	b := f.create(t)
	if _, err := f.svc.SendBroadcast(ctx, orgA, b.ID); err != nil {
		t.Fatal(err)
	}
	f.audience.topic = "gone" // the topic was deleted after the broadcast started
	if err := f.svc.ExpandOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := f.store.GetBroadcast(ctx, orgA, b.ID)
	if got.Status != ports.BroadcastFailed || got.FailureReason == "" || len(f.emails.requests) != 0 {
		t.Fatalf("broadcast = %+v, %d messages", got, len(f.emails.requests))
	}
}
