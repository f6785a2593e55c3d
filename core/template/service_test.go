package template

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// These tests cover the rules the Service decides before or around the store. What the store does (version
// numbering under concurrency, publish, listing) is tested against PostgreSQL with the postgres adapter.

const testOrg = "0190a0a0-0000-7000-8000-000000000001"

var testNow = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

type fixedClock struct{}

func (fixedClock) Now() time.Time { return testNow }

// storeSpy records what the Service hands to the store and answers with canned results. It keeps nothing
// between calls; a method without an answer fails the test, so the validation tests also prove the store was
// never reached.
type storeSpy struct {
	tb testing.TB

	insertedTemplate ports.Template
	insertedVersion  ports.TemplateVersion
	versionErr       error
	publishedAt      time.Time
	publishedVersion int
	published        ports.TemplateVersion
	publishedErr     error
	publishedCalls   int
	idCalls          int
	// lists allows the list and get methods; they record what they were asked.
	lists         bool
	listQuery     ports.PageQuery
	versionsShown int
}

func (s *storeSpy) InsertTemplate(_ context.Context, t ports.Template) error {
	s.insertedTemplate = t
	return nil
}

func (s *storeSpy) InsertTemplateVersion(_ context.Context, orgID string, v ports.TemplateVersion) (ports.TemplateVersion, error) {
	if s.versionErr == nil {
		s.tb.Errorf("InsertTemplateVersion(%s, %+v) was not expected", orgID, v)
		return ports.TemplateVersion{}, errors.New("unexpected")
	}
	s.insertedVersion = v
	return ports.TemplateVersion{}, s.versionErr
}

func (s *storeSpy) PublishTemplateVersion(_ context.Context, _, _ string, version int, now time.Time) (ports.Template, error) {
	s.publishedVersion, s.publishedAt = version, now
	return ports.Template{CurrentVersion: &version}, nil
}

func (s *storeSpy) ListTemplates(_ context.Context, _ string, q ports.PageQuery) (ports.Page[ports.Template], error) {
	if !s.lists {
		s.tb.Error("ListTemplates was not expected")
		return ports.Page[ports.Template]{}, errors.New("unexpected")
	}
	s.listQuery = q
	return ports.Page[ports.Template]{Data: []ports.Template{}}, nil
}

func (s *storeSpy) GetTemplate(_ context.Context, _, _ string, versions int) (ports.Template, error) {
	if !s.lists {
		s.tb.Error("GetTemplate was not expected")
		return ports.Template{}, errors.New("unexpected")
	}
	s.versionsShown = versions
	return ports.Template{}, nil
}

func (s *storeSpy) ListTemplateVersions(_ context.Context, _, _ string, q ports.PageQuery) (ports.Page[ports.TemplateVersion], error) {
	if !s.lists {
		s.tb.Error("ListTemplateVersions was not expected")
		return ports.Page[ports.TemplateVersion]{}, errors.New("unexpected")
	}
	s.listQuery = q
	return ports.Page[ports.TemplateVersion]{}, nil
}

func (s *storeSpy) PublishedTemplateVersion(context.Context, string, string) (ports.TemplateVersion, error) {
	s.publishedCalls++
	if s.publishedErr == nil && s.published.ID == "" {
		s.tb.Error("PublishedTemplateVersion was not expected")
		return ports.TemplateVersion{}, errors.New("unexpected")
	}
	return s.published, s.publishedErr
}

func (s *storeSpy) PublishedTemplateVersionID(context.Context, string, string) (string, error) {
	s.idCalls++
	if s.publishedErr == nil && s.published.ID == "" {
		s.tb.Error("PublishedTemplateVersionID was not expected")
		return "", errors.New("unexpected")
	}
	return s.published.ID, s.publishedErr
}

// fakeReact stands in for the React renderer service: it returns html or err for any source.
type fakeReact struct {
	html   string
	err    error
	source string
}

func (f *fakeReact) RenderReact(_ context.Context, source string) (string, error) {
	f.source = source
	return f.html, f.err
}

type testBundle struct {
	svc   *Service
	store *storeSpy
}

func setup(tb testing.TB, react ports.ReactRenderer) testBundle {
	tb.Helper()
	store := &storeSpy{tb: tb}
	svc, err := New(Deps{Store: store, React: react, Clock: fixedClock{}, CacheSize: 4})
	if err != nil {
		tb.Fatal(err)
	}
	return testBundle{svc: svc, store: store}
}

// requireViolations checks that err is the SPEC §7 validation error with exactly the given path: message
// pairs, in order.
func requireViolations(tb testing.TB, err error, want ...ports.FieldViolation) {
	tb.Helper()
	e, ok := ports.AsError(err)
	if !ok || e.Code != ports.CodeInvalidArgument || e.Message != ports.MessageValidationFailed {
		tb.Fatalf("error %v, want a validation error", err)
	}
	if len(e.Details) != len(want) {
		tb.Fatalf("details %+v, want %+v", e.Details, want)
	}
	for i := range want {
		if e.Details[i] != want[i] {
			tb.Errorf("detail %d = %+v, want %+v", i, e.Details[i], want[i])
		}
	}
}

func TestNewRequiresStore(t *testing.T) {
	t.Parallel()
	if _, err := New(Deps{}); err == nil {
		t.Error("New without a store succeeded")
	}
}

func TestCreateTemplateName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "   ", strings.Repeat("n", 121), "tab\tinside", "bad \xff utf8"} {
		b := setup(t, nil)
		_, err := b.svc.CreateTemplate(context.Background(), testOrg, name)
		requireViolations(t, err, ports.FieldViolation{Path: "name", Message: msgName})
	}

	b := setup(t, nil)
	name := strings.Repeat("é", 120)
	got, err := b.svc.CreateTemplate(context.Background(), testOrg, "  "+name+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != name || b.store.insertedTemplate.Name != name {
		t.Errorf("name %q stored %q, want the trimmed 120-character name", got.Name, b.store.insertedTemplate.Name)
	}
	id, err := uuid.Parse(got.ID)
	if err != nil || id.Version() != 7 {
		t.Errorf("id %q is not a UUIDv7", got.ID)
	}
	if got.CurrentVersion != nil || got.OrganizationID != testOrg {
		t.Errorf("new template %+v: want no current version, organization %s", got, testOrg)
	}
	if want := testNow.Truncate(time.Microsecond); !got.CreatedAt.Equal(want) || !got.UpdatedAt.Equal(want) {
		t.Errorf("timestamps %v %v, want %v", got.CreatedAt, got.UpdatedAt, want)
	}
	if b.store.insertedTemplate.ID != got.ID {
		t.Error("the stored template is not the returned one")
	}
}

func TestCreateTemplateVersionValidation(t *testing.T) {
	t.Parallel()
	tid := uuid.NewString()
	for _, tc := range []struct {
		name  string
		react bool
		v     ports.NewTemplateVersion
		want  []ports.FieldViolation
	}{
		{"no subject", false, ports.NewTemplateVersion{Text: "t"},
			[]ports.FieldViolation{{Path: "subject", Message: msgSubjectRequired}}},
		{"subject with LF", false, ports.NewTemplateVersion{Subject: "a\nb", Text: "t"},
			[]ports.FieldViolation{{Path: "subject", Message: msgNoCRLF}}},
		{"subject with CR", false, ports.NewTemplateVersion{Subject: "a\rb", Text: "t"},
			[]ports.FieldViolation{{Path: "subject", Message: msgNoCRLF}}},
		{"subject with NUL", false, ports.NewTemplateVersion{Subject: "a\x00", Text: "t"},
			[]ports.FieldViolation{{Path: "subject", Message: msgStorable}}},
		{"subject over 998 characters", false, ports.NewTemplateVersion{Subject: strings.Repeat("é", 999), Text: "t"},
			[]ports.FieldViolation{{Path: "subject", Message: msgSubjectLen}}},
		{"no content", false, ports.NewTemplateVersion{Subject: "s"},
			[]ports.FieldViolation{{Path: "", Message: msgContentRequired}}},
		{"react unavailable", false, ports.NewTemplateVersion{Subject: "s", ReactSource: "x"},
			[]ports.FieldViolation{{Path: "reactSource", Message: msgReactMissing}}},
		{"everything wrong at once", false, ports.NewTemplateVersion{Text: "\xff"},
			[]ports.FieldViolation{
				{Path: "subject", Message: msgSubjectRequired},
				{Path: "text", Message: msgStorable},
			}},
		{"nothing at all", false, ports.NewTemplateVersion{},
			[]ports.FieldViolation{
				{Path: "subject", Message: msgSubjectRequired},
				{Path: "", Message: msgContentRequired},
			}},
		{"html that does not compile", false, ports.NewTemplateVersion{Subject: "s", HTML: "<svg><style><b></style>"},
			[]ports.FieldViolation{{Path: "html", Message: `the content of <style> must not contain "<" after an ` +
				`<svg>, <math>, <select> or <frameset> tag: a browser may read it as markup or as text (line 1, column 13)`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var react ports.ReactRenderer
			if tc.react {
				react = &fakeReact{html: "<p>x</p>"}
			}
			b := setup(t, react)
			_, err := b.svc.CreateTemplateVersion(context.Background(), testOrg, tid, tc.v)
			requireViolations(t, err, tc.want...)
		})
	}
}

// TestCreateTemplateVersionReactWinsOverHTML: with both html and reactSource, the React output is what the
// version stores as its HTML.
func TestCreateTemplateVersionReactWinsOverHTML(t *testing.T) {
	t.Parallel()
	b := setup(t, &fakeReact{html: "<p>from react</p>"})
	stored := errors.New("stored")
	b.store.versionErr = stored // the spy records the version it was given and answers this error
	_, err := b.svc.CreateTemplateVersion(context.Background(), testOrg, uuid.NewString(),
		ports.NewTemplateVersion{Subject: "s", HTML: "<p>given html</p>", ReactSource: "x"})
	if !errors.Is(err, stored) {
		t.Fatalf("error %v, want the store's", err)
	}
	if b.store.insertedVersion.HTML != "<p>from react</p>" || b.store.insertedVersion.ReactSource != "x" {
		t.Fatalf("stored version %+v, want the React output as its HTML", b.store.insertedVersion)
	}
}

func TestCreateTemplateVersionUnknownTemplate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.svc.CreateTemplateVersion(context.Background(), testOrg, "not-a-uuid",
		ports.NewTemplateVersion{Subject: "s", Text: "t"})
	if ports.ErrorCode(err) != ports.CodeNotFound {
		t.Errorf("non-UUID template id: %v, want not_found", err)
	}

	b = setup(t, nil)
	b.store.versionErr = ports.NotFound("template not found")
	_, err = b.svc.CreateTemplateVersion(context.Background(), testOrg, uuid.NewString(),
		ports.NewTemplateVersion{Subject: "s", Text: "t"})
	if !errors.Is(err, b.store.versionErr) {
		t.Errorf("store's not_found: got %v, want it passed through", err)
	}
}

func TestCreateTemplateVersionHandsOverFields(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.store.versionErr = ports.NotFound("stop here")
	tid := uuid.NewString()
	v := ports.NewTemplateVersion{Subject: "Hi {{ name }}", HTML: "<p>{{ name }}</p>", Text: "{{ name }}"}
	if _, err := b.svc.CreateTemplateVersion(context.Background(), testOrg, tid, v); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("got %v", err)
	}
	got := b.store.insertedVersion
	if got.TemplateID != tid || got.Subject != v.Subject || got.HTML != v.HTML || got.Text != v.Text || got.ReactSource != "" {
		t.Errorf("stored %+v, want the submitted fields", got)
	}
	if _, err := uuid.Parse(got.ID); err != nil || !got.CreatedAt.Equal(testNow.Truncate(time.Microsecond)) {
		t.Errorf("stored id %q at %v", got.ID, got.CreatedAt)
	}
}

func TestCreateTemplateVersionReact(t *testing.T) {
	t.Parallel()
	const source = `export default function Email() { return <p>{"{{ name }}"}</p> }`

	react := &fakeReact{html: `<!DOCTYPE html><html><body><p>{{ name }}</p></body></html>`}
	b := setup(t, react)
	b.store.versionErr = ports.NotFound("stop here")
	_, _ = b.svc.CreateTemplateVersion(context.Background(), testOrg, uuid.NewString(),
		ports.NewTemplateVersion{Subject: "s", ReactSource: source, Text: "t"})
	if react.source != source {
		t.Errorf("renderer got %q", react.source)
	}
	if got := b.store.insertedVersion; got.HTML != react.html || got.ReactSource != source {
		t.Errorf("stored html %q and source %q, want the rendered HTML and the source", got.HTML, got.ReactSource)
	}

	renderErr := ports.Errorf(ports.CodeInvalidArgument, "SyntaxError: Unexpected token (1:10)")
	b = setup(t, &fakeReact{err: renderErr})
	_, err := b.svc.CreateTemplateVersion(context.Background(), testOrg, uuid.NewString(),
		ports.NewTemplateVersion{Subject: "s", ReactSource: source})
	if !errors.Is(err, renderErr) {
		t.Errorf("render error: got %v, want it passed through", err)
	}

	b = setup(t, &fakeReact{html: "<svg><title>a<b</title></svg>"})
	_, err = b.svc.CreateTemplateVersion(context.Background(), testOrg, uuid.NewString(),
		ports.NewTemplateVersion{Subject: "s", ReactSource: source})
	if e, ok := ports.AsError(err); !ok || len(e.Details) != 1 || e.Details[0].Path != "reactSource" {
		t.Errorf("rendered HTML that does not compile: %v, want a violation on reactSource", err)
	}

	b = setup(t, &fakeReact{html: "<p>\x00</p>"})
	_, err = b.svc.CreateTemplateVersion(context.Background(), testOrg, uuid.NewString(),
		ports.NewTemplateVersion{Subject: "s", ReactSource: source})
	requireViolations(t, err, ports.FieldViolation{Path: "reactSource", Message: msgReactOutput})
}

func TestPublishTemplate(t *testing.T) {
	t.Parallel()
	for _, version := range []int{0, -1} {
		b := setup(t, nil)
		_, err := b.svc.PublishTemplate(context.Background(), testOrg, uuid.NewString(), version)
		requireViolations(t, err, ports.FieldViolation{Path: "version", Message: msgVersion})
	}
	b := setup(t, nil)
	if _, err := b.svc.PublishTemplate(context.Background(), testOrg, "x", 1); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Errorf("non-UUID id: %v, want not_found", err)
	}
	got, err := b.svc.PublishTemplate(context.Background(), testOrg, uuid.NewString(), 3)
	if err != nil || got.CurrentVersion == nil || *got.CurrentVersion != 3 {
		t.Fatalf("publish: %+v, %v", got, err)
	}
	if b.store.publishedVersion != 3 || !b.store.publishedAt.Equal(testNow.Truncate(time.Microsecond)) {
		t.Errorf("store got version %d at %v", b.store.publishedVersion, b.store.publishedAt)
	}
}

func TestGetTemplateNonUUID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if _, err := b.svc.GetTemplate(context.Background(), testOrg, "../etc"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Errorf("got %v, want not_found", err)
	}
}

func TestRenderTemplateMissing(t *testing.T) {
	t.Parallel()
	requireMissing := func(tb testing.TB, err error) {
		tb.Helper()
		e, ok := ports.AsError(err)
		if !ok || e.Code != ports.CodeInvalidArgument || e.Message != ports.MessageMissingReference ||
			e.Constraint != ports.TemplatesConstraint {
			tb.Errorf("got %v, want the missing-reference error on %s", err, ports.TemplatesConstraint)
		}
	}
	b := setup(t, nil)
	_, err := b.svc.RenderTemplate(context.Background(), testOrg, "nope", nil)
	requireMissing(t, err)
	if b.store.publishedCalls != 0 || b.store.idCalls != 0 {
		t.Error("the store was asked about a non-UUID id")
	}

	b = setup(t, nil)
	b.store.publishedErr = ports.NotFound("no published version")
	_, err = b.svc.RenderTemplate(context.Background(), testOrg, uuid.NewString(), nil)
	requireMissing(t, err)

	b = setup(t, nil)
	b.store.publishedErr = errors.New("connection reset")
	_, err = b.svc.RenderTemplate(context.Background(), testOrg, uuid.NewString(), nil)
	if !errors.Is(err, b.store.publishedErr) {
		t.Errorf("store failure: got %v, want it passed through", err)
	}
}

func TestRenderTemplate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.store.published = ports.TemplateVersion{
		ID: uuid.NewString(), Version: 2,
		Subject: "Welcome, {{ user.name }}",
		HTML:    `<p>Hi {{ user.name }}</p><a href="{{ link }}">go</a>`,
		Text:    "Hi {{ user.name }}: {{ link }}",
	}
	vars := map[string]any{"user": map[string]any{"name": "Ada & Bob"}, "link": "javascript:alert(1)"}
	tid := uuid.NewString()
	for range 2 {
		got, err := b.svc.RenderTemplate(context.Background(), testOrg, tid, vars)
		if err != nil {
			t.Fatal(err)
		}
		want := ports.RenderedTemplate{
			Subject: "Welcome, Ada &amp; Bob",
			HTML:    `<p>Hi Ada &amp; Bob</p><a href="">go</a>`,
			Text:    "Hi Ada &amp; Bob: javascript:alert(1)",
		}
		if got != want {
			t.Errorf("rendered %+v\nwant %+v", got, want)
		}
	}
	if b.store.idCalls != 2 || b.store.publishedCalls != 1 || b.svc.cache.Len() != 1 {
		t.Errorf("store asked for the id %d times and the version %d times, cache holds %d; want 2, 1 and 1 "+
			"(the published version may change, so its id is read on every send; its bodies only until "+
			"it is compiled)", b.store.idCalls, b.store.publishedCalls, b.svc.cache.Len())
	}

	b.store.published = ports.TemplateVersion{ID: uuid.NewString(), Version: 3, Subject: "bad\nsubject", Text: "t"}
	_, err := b.svc.RenderTemplate(context.Background(), testOrg, tid, vars)
	if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeInvalidArgument ||
		e.Message != "template version 3 does not compile: subject must not contain CR or LF (line 1, column 4)" {
		t.Errorf("stored version that does not compile: %v", err)
	}
}

// TestListsAndVersionWindow checks what the Service asks the store for: the unpaged form of a list takes
// ports.MaxUnpagedListRows, a page the client's limit (default 25, at most 100), a template its newest
// ports.TemplateVersionsShown versions; a limit out of range or an id that is no UUID never reaches it.
func TestListsAndVersionWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	b.store.lists = true
	if _, err := b.svc.ListTemplates(ctx, testOrg); err != nil || b.store.listQuery != ports.Unpaged() {
		t.Fatalf("ListTemplates asked %+v (%v)", b.store.listQuery, err)
	}
	if _, err := b.svc.ListTemplatesPage(ctx, testOrg, ports.PageQuery{Cursor: "c"}); err != nil || b.store.listQuery != (ports.PageQuery{Limit: 25, Cursor: "c"}) {
		t.Fatalf("ListTemplatesPage asked %+v (%v)", b.store.listQuery, err)
	}
	if _, err := b.svc.GetTemplate(ctx, testOrg, uuid.NewString()); err != nil || b.store.versionsShown != ports.TemplateVersionsShown {
		t.Fatalf("GetTemplate asked for %d versions (%v)", b.store.versionsShown, err)
	}
	if _, err := b.svc.ListTemplateVersions(ctx, testOrg, uuid.NewString(), ports.PageQuery{Limit: 100}); err != nil || b.store.listQuery.Limit != 100 {
		t.Fatalf("ListTemplateVersions asked %+v (%v)", b.store.listQuery, err)
	}

	b.store.lists = false // nothing below may reach the store
	for _, limit := range []int{-1, 101} {
		requireViolations(t, firstErr(b.svc.ListTemplatesPage(ctx, testOrg, ports.PageQuery{Limit: limit})),
			ports.FieldViolation{Path: "limit", Message: "must be between 1 and 100"})
		requireViolations(t, firstErr(b.svc.ListTemplateVersions(ctx, testOrg, uuid.NewString(), ports.PageQuery{Limit: limit})),
			ports.FieldViolation{Path: "limit", Message: "must be between 1 and 100"})
	}
	if _, err := b.svc.ListTemplateVersions(ctx, testOrg, "nope", ports.PageQuery{}); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Fatalf("versions of a non-UUID template: %v", err)
	}
}

func firstErr[T any](_ T, err error) error { return err }

// A version renders each part only to just past what a send may carry: a short template with a large
// variable repeated in it is cut there instead of building hundreds of MiB, and the cut part is longer than
// the bound, so the send path refuses it.
func TestRenderStopsPastTheSendBounds(t *testing.T) {
	t.Parallel()
	cv, err := CompileVersion(ports.TemplateVersion{Subject: strings.Repeat("{{ a }}", 100),
		HTML: "<p>" + strings.Repeat("{{ a }}", 2000) + "</p>", Text: strings.Repeat("{{ a }}", 2000)})
	if err != nil {
		t.Fatal(err)
	}
	r := cv.Render(map[string]any{"a": strings.Repeat("x", 100_000)})
	if len(r.Subject) != 4*ports.MaxSubjectChars+1 {
		t.Errorf("subject of %d bytes, want %d", len(r.Subject), 4*ports.MaxSubjectChars+1)
	}
	if len(r.HTML) != ports.MaxBodyPartBytes+1 || len(r.Text) != ports.MaxBodyPartBytes+1 {
		t.Errorf("html of %d and text of %d bytes, want %d each", len(r.HTML), len(r.Text), ports.MaxBodyPartBytes+1)
	}
	small := cv.Render(map[string]any{"a": "y"})
	if small.Text != strings.Repeat("y", 2000) || small.Subject != strings.Repeat("y", 100) {
		t.Errorf("a render within the bounds changed: subject %q", small.Subject)
	}
}
