package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/ports"
)

// fullTemplateVersion sets every field of a version, a React one whose HTML is what it rendered to.
func fullTemplateVersion(n int) ports.TemplateVersion {
	return ports.TemplateVersion{
		ID: fmt.Sprintf("tv%d", n), TemplateID: "tmpl1", Version: n, Subject: "Welcome, {{ name }} ✓",
		HTML: "<html><body><p>Hi {{ name }}</p></body></html>", Text: "Hi {{ name }}",
		ReactSource: "export default function Email() { return <p>Hi {'{{ name }}'}</p> }", CreatedAt: t1,
	}
}

// fullTemplate sets every field of a template, as GetTemplate answers it: published, with its versions.
func fullTemplate() ports.Template {
	return ports.Template{
		ID: "tmpl1", OrganizationID: "org1", Name: "Welcome — ünïcödé", CurrentVersion: ptr(2),
		CreatedAt: t0, UpdatedAt: t2, Versions: []ports.TemplateVersion{fullTemplateVersion(1), fullTemplateVersion(2)},
		VersionsTruncated: true,
	}
}

func fullNewTemplateVersion() ports.NewTemplateVersion {
	return ports.NewTemplateVersion{
		Subject: "Hi {{ name }}", HTML: "<p>{{ body }}</p>", Text: "{{ body }}",
		ReactSource: "import { Html } from '@react-email/components'; export default () => <Html />",
	}
}

func fullRendered() ports.RenderedTemplate {
	return ports.RenderedTemplate{Subject: "Welcome, Ada ✓", HTML: "<p>Hi Ada &amp; co</p>", Text: "Hi Ada & co"}
}

// TestTemplateFixturesComplete fails when a ports type of the template API grows a field that the full
// fixtures (and so the round trips that use them) leave unset.
func TestTemplateFixturesComplete(t *testing.T) {
	t.Parallel()
	for _, v := range []any{fullTemplateVersion(1), fullTemplate(), fullNewTemplateVersion(), fullRendered()} {
		mustSetEveryField(t, v)
	}
}

func templateRoundTrips() []roundTrip {
	var trips []roundTrip
	add := func(r roundTrip) { trips = append(trips, r) }

	// A template never published (CurrentVersion nil) and read without versions (nil); one whose
	// CurrentVersion points at 0, which must not come back as nil; one with an empty version list.
	unpublished := ports.Template{ID: "tmpl2", OrganizationID: "org1", Name: "draft", CreatedAt: t0, UpdatedAt: t0}
	zeroVersion := ports.Template{ID: "tmpl3", CurrentVersion: ptr(0)}
	noVersions := ports.Template{ID: "tmpl4", CurrentVersion: ptr(1 << 40), Versions: []ports.TemplateVersion{}}
	for name, tmpl := range map[string]ports.Template{
		"full": fullTemplate(), "unpublished": unpublished, "current version 0": zeroVersion,
		"empty versions": noVersions, "zero": {},
	} {
		add(roundTrip{
			name:   "CreateTemplate/" + name,
			answer: func(f *fakeCore) { f.template = tmpl },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.CreateTemplate(ctx, "org1", " Welcome ")
			},
			want:   tmpl,
			method: "CreateTemplate",
			args:   []any{"org1", " Welcome "},
		})
		add(roundTrip{
			name:   "GetTemplate/" + name,
			answer: func(f *fakeCore) { f.template = tmpl },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.GetTemplate(ctx, "org1", "tmpl1")
			},
			want:   tmpl,
			method: "GetTemplate",
			args:   []any{"org1", "tmpl1"},
		})
	}
	for name, v := range map[string]ports.NewTemplateVersion{
		"full": fullNewTemplateVersion(), "zero": {}, "react only": {Subject: "s", ReactSource: "<Html/>"},
	} {
		add(roundTrip{
			name:   "CreateTemplateVersion/" + name,
			answer: func(f *fakeCore) { f.version = fullTemplateVersion(3) },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.CreateTemplateVersion(ctx, "org1", "tmpl1", v)
			},
			want:   fullTemplateVersion(3),
			method: "CreateTemplateVersion",
			args:   []any{"org1", "tmpl1", v},
		})
	}
	add(roundTrip{
		name:   "CreateTemplateVersion/zero answer",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Templates.CreateTemplateVersion(ctx, "", "", ports.NewTemplateVersion{})
		},
		want:   ports.TemplateVersion{},
		method: "CreateTemplateVersion",
		args:   []any{"", "", ports.NewTemplateVersion{}},
	})
	// The core validates the version (invalid_argument below 1); the hop passes every int as it is.
	for _, version := range []int{1, 0, -1, 1 << 40} {
		add(roundTrip{
			name:   fmt.Sprintf("PublishTemplate/%d", version),
			answer: func(f *fakeCore) { f.template = fullTemplate() },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.PublishTemplate(ctx, "org1", "tmpl1", version)
			},
			want:   fullTemplate(),
			method: "PublishTemplate",
			args:   []any{"org1", "tmpl1", version},
		})
	}
	for name, templates := range map[string][]ports.Template{
		"set":   {fullTemplate(), unpublished, zeroVersion, noVersions, {}},
		"empty": {},
		"nil":   nil,
	} {
		add(roundTrip{
			name:   "ListTemplates/" + name,
			answer: func(f *fakeCore) { f.templates = templates },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.ListTemplates(ctx, "org1")
			},
			want:   templates,
			method: "ListTemplates",
			args:   []any{"org1"},
		})
	}
	for name, page := range map[string]ports.Page[ports.Template]{
		"set":   {Data: []ports.Template{fullTemplate(), unpublished, {}}, NextCursor: "djI"},
		"empty": {Data: []ports.Template{}},
		"nil":   {},
	} {
		q := ports.PageQuery{Limit: 2, Cursor: "c1"}
		add(roundTrip{
			name:   "ListTemplatesPage/" + name,
			answer: func(f *fakeCore) { f.templatePage = page },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.ListTemplatesPage(ctx, "org1", q)
			},
			want:   page,
			method: "ListTemplatesPage",
			args:   []any{"org1", q},
		})
	}
	for name, page := range map[string]ports.Page[ports.TemplateVersion]{
		"set":   {Data: []ports.TemplateVersion{fullTemplateVersion(2), {}}, NextCursor: "djI"},
		"empty": {Data: []ports.TemplateVersion{}},
		"nil":   {},
	} {
		add(roundTrip{
			name:   "ListTemplateVersions/" + name,
			answer: func(f *fakeCore) { f.versionPage = page },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Templates.ListTemplateVersions(ctx, "org1", "tmpl1", ports.PageQuery{})
			},
			want:   page,
			method: "ListTemplateVersions",
			args:   []any{"org1", "tmpl1", ports.PageQuery{}},
		})
	}
	// Variables hold only what a JSON decoder produces with UseNumber, so that the implementation
	// receives exactly this value; nil and empty stay apart.
	for name, vars := range map[string]map[string]any{
		"full": {
			"name": "Ada", "big": json.Number("18446744073709551617"), "ratio": json.Number("0.5"), "vip": false,
			"items": []any{"a", nil, map[string]any{"k": "v"}}, "nested": map[string]any{"deep": []any{}},
		},
		"empty": {},
		"nil":   nil,
	} {
		add(roundTrip{
			name:   "RenderTemplate/" + name,
			answer: func(f *fakeCore) { f.rendered = fullRendered() },
			call: func(ctx context.Context, c ports.Core) (any, error) {
				return c.Renderer.RenderTemplate(ctx, "org1", "tmpl1", vars)
			},
			want:   fullRendered(),
			method: "RenderTemplate",
			args:   []any{"org1", "tmpl1", vars},
		})
	}
	add(roundTrip{
		name:   "RenderTemplate/zero answer",
		answer: func(*fakeCore) {},
		call: func(ctx context.Context, c ports.Core) (any, error) {
			return c.Renderer.RenderTemplate(ctx, "", "", nil)
		},
		want:   ports.RenderedTemplate{},
		method: "RenderTemplate",
		args:   []any{"", "", map[string]any(nil)},
	})
	return trips
}

// TestTemplateCurrentVersion checks the optional CurrentVersion on its own: nil stays nil, and a set
// pointer comes back set to the same number (0 included), never aliased to the implementation's int.
func TestTemplateCurrentVersion(t *testing.T) {
	t.Parallel()
	for name, current := range map[string]*int{"nil": nil, "zero": ptr(0), "two": ptr(2), "negative": ptr(-7)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &fakeCore{template: ports.Template{ID: "tmpl1", CurrentVersion: current}})
			got, err := b.client.Core().Templates.PublishTemplate(context.Background(), "org1", "tmpl1", 2)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case current == nil && got.CurrentVersion != nil:
				t.Errorf("CurrentVersion = %d, want nil", *got.CurrentVersion)
			case current != nil && got.CurrentVersion == nil:
				t.Errorf("CurrentVersion = nil, want %d", *current)
			case current != nil && *got.CurrentVersion != *current:
				t.Errorf("CurrentVersion = %d, want %d", *got.CurrentVersion, *current)
			case current != nil && got.CurrentVersion == current:
				t.Error("CurrentVersion points at the implementation's int")
			}
		})
	}
}

// TestRenderTemplateVariablesExact checks that numbers reach the renderer exactly, as json.Number, as a
// send's template variables do: an integer beyond 2^53 would not survive a float64.
func TestRenderTemplateVariablesExact(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	vars := map[string]any{"big": int64(1<<60 + 1), "ratio": 0.1, "count": 3, "list": []int{1, 2}, "s": "ü"}
	if _, err := b.client.Core().Renderer.RenderTemplate(context.Background(), "org1", "tmpl1", vars); err != nil {
		t.Fatal(err)
	}
	got := b.fake.recorded()[0].args[2]
	want := map[string]any{
		"big": json.Number("1152921504606846977"), "ratio": json.Number("0.1"), "count": json.Number("3"),
		"list": []any{json.Number("1"), json.Number("2")}, "s": "ü",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("variables = %#v, want %#v", got, want)
	}
}

// TestRenderTemplateUnencodable checks that variables that are not JSON fail before the wire as an
// internal error that names them, and never reach the core.
func TestRenderTemplateUnencodable(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.client.Core().Renderer.RenderTemplate(context.Background(), "org1", "tmpl1", map[string]any{"f": func() {}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "template variables") {
		t.Errorf("err = %v, want internal naming the variables", err)
	}
	if calls := b.fake.recorded(); len(calls) != 0 {
		t.Errorf("implementation reached: %+v", calls)
	}
}

// TestRenderTemplateMissingReference checks the error the send path turns into SPEC §7's 400
// "Referenced resource does not exist": it must come back with its code, message and constraint.
func TestRenderTemplateMissingReference(t *testing.T) {
	t.Parallel()
	b := setup(t, &fakeCore{err: fmt.Errorf("render: %w", ports.MissingReference(ports.TemplatesConstraint))})
	_, err := b.client.Core().Renderer.RenderTemplate(context.Background(), "org1", "tmpl-gone", map[string]any{"a": "b"})
	assertSameError(t, err, ports.MissingReference(ports.TemplatesConstraint))
}

// templateServiceOnly is a template service that does not render: embedding the interface hides every
// other method of the value it wraps.
type templateServiceOnly struct {
	ports.TemplateService
}

// TestRenderTemplateWithoutRenderer checks that a core whose template service does not also render
// serves the template routes and answers RenderTemplate as unimplemented, which the caller sees as an
// internal error (a deployment's fault, not the caller's).
func TestRenderTemplateWithoutRenderer(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{template: fullTemplate()}
	srv := mustServe(t, ports.Core{Templates: templateServiceOnly{fake}}, testToken)
	c := rpc.NewClient(srv.URL, testToken, nil).Core()
	ctx := context.Background()
	got, err := c.Templates.GetTemplate(ctx, "org1", "tmpl1")
	if err != nil || !reflect.DeepEqual(got, fullTemplate()) {
		t.Errorf("GetTemplate = %+v, %v; want the template", got, err)
	}
	_, err = c.Renderer.RenderTemplate(ctx, "org1", "tmpl1", nil)
	if ports.ErrorCode(err) != ports.CodeInternal || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("RenderTemplate: err = %v, want internal caused by unimplemented", err)
	}
	if calls := fake.recorded(); len(calls) != 1 || calls[0].method != "GetTemplate" {
		t.Errorf("implementation calls = %+v, want only GetTemplate", calls)
	}
}

// TestRenderTemplateServedFromRenderer checks that RenderTemplate is served from ports.Core.Renderer and
// from nothing else: a template service that happens to render too is never asked, and a core with a
// renderer but no template service serves RenderTemplate alone.
func TestRenderTemplateServedFromRenderer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	unimplemented := func(t *testing.T, name string, err error) {
		t.Helper()
		if ports.ErrorCode(err) != ports.CodeInternal || connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("%s: err = %v, want internal caused by unimplemented", name, err)
		}
	}

	t.Run("template service that renders, no renderer", func(t *testing.T) {
		t.Parallel()
		fake := &fakeCore{template: fullTemplate(), rendered: fullRendered()}
		c := rpc.NewClient(mustServe(t, ports.Core{Templates: fake}, testToken).URL, testToken, nil).Core()
		_, err := c.Renderer.RenderTemplate(ctx, "org1", "tmpl1", nil)
		unimplemented(t, "RenderTemplate", err)
		if got, err := c.Templates.GetTemplate(ctx, "org1", "tmpl1"); err != nil || !reflect.DeepEqual(got, fullTemplate()) {
			t.Errorf("GetTemplate = %+v, %v; want the template", got, err)
		}
		if calls := fake.recorded(); len(calls) != 1 || calls[0].method != "GetTemplate" {
			t.Errorf("implementation calls = %+v, want only GetTemplate", calls)
		}
	})

	t.Run("renderer only", func(t *testing.T) {
		t.Parallel()
		fake := &fakeCore{template: fullTemplate(), rendered: fullRendered()}
		c := rpc.NewClient(mustServe(t, ports.Core{Renderer: fake}, testToken).URL, testToken, nil).Core()
		if got, err := c.Renderer.RenderTemplate(ctx, "org1", "tmpl1", nil); err != nil || !reflect.DeepEqual(got, fullRendered()) {
			t.Errorf("RenderTemplate = %+v, %v; want the rendered template", got, err)
		}
		_, err := c.Templates.GetTemplate(ctx, "org1", "tmpl1")
		unimplemented(t, "GetTemplate", err)
		if calls := fake.recorded(); len(calls) != 1 || calls[0].method != "RenderTemplate" {
			t.Errorf("implementation calls = %+v, want only RenderTemplate", calls)
		}
	})
}
