package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// MustStartEdge serves an edge over fake on a loopback httptest server; edit mutates the config first.
func MustStartEdge(tb testing.TB, fake *fakeCore, edit func(*edge.Config)) *testBundle {
	tb.Helper()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	cfg := edge.Config{
		Logger:     slog.New(slog.NewJSONHandler(logs, nil)),
		Registerer: reg,
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := edge.New(cfg, fake.core())
	if err != nil {
		tb.Fatalf("edge.New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return &testBundle{fake: fake, srv: srv, logs: logs, reg: reg}
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
	list   []any
}

func (b *testBundle) do(tb testing.TB, method, path, token string, body any, headers ...string) response {
	tb.Helper()
	var rdr io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		rdr = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rdr)
	if err != nil {
		tb.Fatal(err)
	}
	if rdr != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.srv.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	_ = json.Unmarshal(raw, &r.list)
	return r
}

// mustStatus fails unless r has the status.
func mustStatus(tb testing.TB, r response, status int) response {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// mustError checks the SPEC §7 shape and returns the body; empty errWord or message are not checked.
func mustError(tb testing.TB, r response, status int, errWord, message string) map[string]any {
	tb.Helper()
	mustStatus(tb, r, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("content-type %q, want application/json", ct)
	}
	if got, _ := r.body["statusCode"].(float64); int(got) != status {
		tb.Errorf("statusCode %v, want %d: %s", r.body["statusCode"], status, r.raw)
	}
	if e, _ := r.body["error"].(string); e == "" || (errWord != "" && e != errWord) {
		tb.Errorf("error %q, want %q: %s", e, errWord, r.raw)
	}
	if m, _ := r.body["message"].(string); m == "" || (message != "" && m != message) {
		tb.Errorf("message %q, want %q: %s", m, message, r.raw)
	}
	return r.body
}

// detailPaths lists the paths of a validation body's details.
func detailPaths(tb testing.TB, body map[string]any) []string {
	tb.Helper()
	details, _ := body["details"].([]any)
	var out []string
	for _, d := range details {
		m, _ := d.(map[string]any)
		p, _ := m["path"].(string)
		if msg, _ := m["message"].(string); msg == "" {
			tb.Errorf("detail without message: %v", m)
		}
		out = append(out, p)
	}
	return out
}

// DomainService.

func (f *fakeCore) domainFor(call, orgID string) (ports.Domain, error) {
	f.record(call, orgID)
	if f.domainErr != nil {
		return ports.Domain{}, f.domainErr
	}
	d := f.domain
	d.OrganizationID = orgID
	d.Records = slices.Clone(f.domain.Records)
	for i := range d.Records {
		d.Records[i].DomainID = d.ID
	}
	return d, nil
}

func (f *fakeCore) CreateDomain(ctx context.Context, orgID, name string) (ports.Domain, error) {
	d, err := f.domainFor("CreateDomain:"+name, orgID)
	if err == nil {
		d.Name = strings.ToLower(strings.TrimSpace(name))
	}
	return d, err
}

func (f *fakeCore) ListDomains(_ context.Context, orgID string) ([]ports.Domain, error) {
	d, err := f.domainFor("ListDomains", orgID)
	if err != nil {
		return nil, err
	}
	d.Records = nil
	return []ports.Domain{d}, nil
}

func (f *fakeCore) GetDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	return f.domainFor("GetDomain:"+id, orgID)
}

func (f *fakeCore) VerifyDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	d, err := f.domainFor("VerifyDomain:"+id, orgID)
	if err == nil {
		now := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
		d.Status, d.VerifiedAt = ports.DomainVerified, &now
	}
	return d, err
}

func (f *fakeCore) UpdateDomainTracking(_ context.Context, orgID, id string, t ports.TrackingSettings) (ports.Domain, error) {
	d, err := f.domainFor("UpdateDomainTracking:"+id, orgID)
	if err != nil {
		return d, err
	}
	f.mu.Lock()
	f.trackingUpdates = append(f.trackingUpdates, t)
	f.mu.Unlock()
	if t.OpenTracking != nil {
		d.OpenTracking = *t.OpenTracking
	}
	if t.ClickTracking != nil {
		d.ClickTracking = *t.ClickTracking
	}
	return d, nil
}

func (f *fakeCore) SuspendDomain(_ context.Context, orgID, id string) (ports.Domain, error) {
	d, err := f.domainFor("SuspendDomain:"+id, orgID)
	d.Status = ports.DomainSuspended
	return d, err
}

// EmailService.

func (f *fakeCore) Send(_ context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error) {
	f.record("Send", orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, req)
	if f.sendErr != nil {
		return ports.SendResult{}, f.sendErr
	}
	if id, ok := f.idem[req.IdempotencyKey]; ok && req.IdempotencyKey != "" {
		return ports.SendResult{ID: id, Status: ports.StatusQueued, Deduped: true}, nil
	}
	id := fmt.Sprintf("0190a0b0-0000-7000-8000-%012d", len(f.sends))
	if f.idem == nil {
		f.idem = map[string]string{}
	}
	f.idem[req.IdempotencyKey] = id
	status := ports.StatusQueued
	if req.ScheduledAt != nil {
		status = ports.StatusScheduled
	}
	return ports.SendResult{ID: id, Status: status}, nil
}

// SendBatch answers in reverse order so that tests see the edge align results by index.
func (f *fakeCore) SendBatch(_ context.Context, orgID string, reqs []ports.SendRequest) ([]ports.BatchItemResult, error) {
	f.record("SendBatch", orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, reqs)
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	out := make([]ports.BatchItemResult, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		if err := f.batchErrs[i]; err != nil {
			out = append(out, ports.BatchItemResult{Index: i, Err: err})
			continue
		}
		out = append(out, ports.BatchItemResult{Index: i, Result: ports.SendResult{
			ID: fmt.Sprintf("0190a0b0-0000-7000-8000-0000000b%04d", i), Status: ports.StatusQueued}})
	}
	return out, nil
}

func (f *fakeCore) GetEmail(_ context.Context, orgID, id string) (ports.Message, error) {
	f.record("GetEmail:"+id, orgID)
	if f.emailErr != nil {
		return ports.Message{}, f.emailErr
	}
	m := f.email
	m.OrganizationID = orgID
	return m, nil
}

func (f *fakeCore) CancelEmail(_ context.Context, orgID, id string) (ports.Message, error) {
	f.record("CancelEmail:"+id, orgID)
	if f.emailErr != nil {
		return ports.Message{}, f.emailErr
	}
	m := f.email
	m.OrganizationID, m.Status = orgID, ports.StatusCancelled
	return m, nil
}

func (f *fakeCore) ListEmails(_ context.Context, orgID string, q ports.ListEmailsQuery) (ports.EmailPage, error) {
	f.record("ListEmails", orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	if f.emailErr != nil {
		return ports.EmailPage{}, f.emailErr
	}
	return f.page, nil
}

func (f *fakeCore) sendsSnapshot() []ports.SendRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sends)
}

func ptr[T any](v T) *T { return &v }

// WebhookService.

func (f *fakeCore) webhookFor(call, orgID string) error {
	f.record(call, orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.webhookErr
}

func (f *fakeCore) CreateEndpoint(_ context.Context, orgID, url string, eventTypes []string) (ports.CreatedWebhookEndpoint, error) {
	if err := f.webhookFor("CreateEndpoint", orgID); err != nil {
		return ports.CreatedWebhookEndpoint{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hookCreates = append(f.hookCreates, webhookCreate{url: url, eventTypes: eventTypes})
	e := f.endpoints[0]
	e.URL, e.EventTypes = url, eventTypes
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: e, PlainSecret: plainWebhookSecret}, nil
}

func (f *fakeCore) ListEndpoints(_ context.Context, orgID string) ([]ports.WebhookEndpoint, error) {
	if err := f.webhookFor("ListEndpoints", orgID); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.endpoints), nil
}

func (f *fakeCore) DeleteEndpoint(_ context.Context, orgID, id string) error {
	return f.webhookFor("DeleteEndpoint:"+id, orgID)
}

func (f *fakeCore) TestEndpoint(_ context.Context, orgID, id string) (ports.WebhookDelivery, error) {
	if err := f.webhookFor("TestEndpoint:"+id, orgID); err != nil {
		return ports.WebhookDelivery{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliveries[0], nil
}

func (f *fakeCore) RotateSecret(_ context.Context, orgID, id string) (ports.CreatedWebhookEndpoint, error) {
	if err := f.webhookFor("RotateSecret:"+id, orgID); err != nil {
		return ports.CreatedWebhookEndpoint{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return ports.CreatedWebhookEndpoint{WebhookEndpoint: f.endpoints[0], PlainSecret: plainWebhookSecret}, nil
}

func (f *fakeCore) Replay(_ context.Context, orgID, endpointID, deliveryID string) (ports.WebhookDelivery, error) {
	if err := f.webhookFor("Replay:"+endpointID+"/"+deliveryID, orgID); err != nil {
		return ports.WebhookDelivery{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliveries[0], nil
}

func (f *fakeCore) ListDeliveries(_ context.Context, orgID string) ([]ports.WebhookDelivery, error) {
	if err := f.webhookFor("ListDeliveries", orgID); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deliveries), nil
}

// TemplateService.

func (f *fakeCore) templateFor(call, orgID string) (ports.Template, error) {
	f.record(call, orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.templateErr != nil {
		return ports.Template{}, f.templateErr
	}
	t := f.template
	t.OrganizationID = orgID
	t.Versions = slices.Clone(f.template.Versions)
	return t, nil
}

func (f *fakeCore) CreateTemplate(_ context.Context, orgID, name string) (ports.Template, error) {
	t, err := f.templateFor("CreateTemplate", orgID)
	if err != nil {
		return t, err
	}
	f.mu.Lock()
	f.tplNames = append(f.tplNames, name)
	f.mu.Unlock()
	t.Name, t.CurrentVersion, t.Versions, t.UpdatedAt = name, nil, nil, t.CreatedAt
	return t, nil
}

func (f *fakeCore) CreateTemplateVersion(_ context.Context, orgID, templateID string, v ports.NewTemplateVersion) (ports.TemplateVersion, error) {
	t, err := f.templateFor("CreateTemplateVersion:"+templateID, orgID)
	if err != nil {
		return ports.TemplateVersion{}, err
	}
	f.mu.Lock()
	f.newVersions = append(f.newVersions, v)
	f.mu.Unlock()
	out := ports.TemplateVersion{ID: versionID2, TemplateID: templateID, Version: len(t.Versions) + 1,
		Subject: v.Subject, HTML: v.HTML, Text: v.Text, ReactSource: v.ReactSource,
		CreatedAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("CET", 3600))}
	if v.ReactSource != "" {
		out.HTML = "<html><body>rendered</body></html>"
	}
	return out, nil
}

func (f *fakeCore) PublishTemplate(_ context.Context, orgID, templateID string, version int) (ports.Template, error) {
	t, err := f.templateFor("PublishTemplate:"+templateID, orgID)
	if err != nil {
		return t, err
	}
	f.mu.Lock()
	f.publishes = append(f.publishes, version)
	f.mu.Unlock()
	t.CurrentVersion, t.Versions = &version, nil
	return t, nil
}

func (f *fakeCore) ListTemplates(_ context.Context, orgID string) ([]ports.Template, error) {
	t, err := f.templateFor("ListTemplates", orgID)
	if err != nil {
		return nil, err
	}
	t.Versions = nil
	older := t
	older.ID, older.Name, older.CurrentVersion = versionID1, "older", nil
	return []ports.Template{t, older}, nil
}

func (f *fakeCore) GetTemplate(_ context.Context, orgID, id string) (ports.Template, error) {
	return f.templateFor("GetTemplate:"+id, orgID)
}

// DeliverabilityService.

func (f *fakeCore) deliverabilityFor(call, orgID string) error {
	f.record(call, orgID)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliverabilityErr
}

func (f *fakeCore) ListSuppressions(_ context.Context, orgID string) ([]ports.Suppression, error) {
	if err := f.deliverabilityFor("ListSuppressions", orgID); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.suppressions), nil
}

func (f *fakeCore) CreateSuppression(_ context.Context, orgID string, in ports.NewSuppression) (ports.Suppression, error) {
	if err := f.deliverabilityFor("CreateSuppression", orgID); err != nil {
		return ports.Suppression{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.suppressionCreates = append(f.suppressionCreates, in)
	if in.Scope == ports.SuppressionScopeGlobal {
		return ports.Suppression{}, ports.Errorf(ports.CodePermissionDenied, "global suppressions are managed by platform admins")
	}
	return ports.Suppression{ID: suppressionID, OrganizationID: orgID, Address: strings.ToLower(strings.TrimSpace(in.Address)),
		Scope: in.Scope, Reason: in.Reason, CreatedAt: time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("CET", 3600))}, nil
}

func (f *fakeCore) DeleteSuppression(_ context.Context, orgID, id string) (bool, error) {
	if err := f.deliverabilityFor("DeleteSuppression", orgID); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, id)
	return f.deleteFound, nil
}

func (f *fakeCore) ListGlobalSuppressions(context.Context) ([]ports.Suppression, error) {
	if err := f.deliverabilityFor("ListGlobalSuppressions", ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.globalSupps), nil
}

func (f *fakeCore) CreateGlobalSuppression(_ context.Context, in ports.NewSuppression) (ports.Suppression, error) {
	if err := f.deliverabilityFor("CreateGlobalSuppression", ""); err != nil {
		return ports.Suppression{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.globalCreates = append(f.globalCreates, in)
	return ports.Suppression{ID: globalSuppID, Address: strings.ToLower(strings.TrimSpace(in.Address)),
		Scope: ports.SuppressionScopeGlobal, Reason: in.Reason, CreatedAt: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}, nil
}

func (f *fakeCore) DeleteGlobalSuppression(_ context.Context, id string) (bool, error) {
	if err := f.deliverabilityFor("DeleteGlobalSuppression", ""); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, "global:"+id)
	return f.deleteFound, nil
}

func (f *fakeCore) ListBounces(_ context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	if err := f.deliverabilityFor("ListBounces", orgID); err != nil {
		return ports.BouncePage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageQueries = append(f.pageQueries, q)
	return f.bouncePage, nil
}

func (f *fakeCore) ListComplaints(_ context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	if err := f.deliverabilityFor("ListComplaints", orgID); err != nil {
		return ports.ComplaintPage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageQueries = append(f.pageQueries, q)
	return f.complaintPage, nil
}

// mustSchema returns one component schema of the served OpenAPI document, decoded.
func mustSchema(tb testing.TB, b *testBundle, name string) map[string]any {
	tb.Helper()
	r := mustStatus(tb, b.do(tb, "GET", "/v1/openapi.json", "", nil), 200)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		tb.Fatal(err)
	}
	s, ok := doc.Components.Schemas[name]
	if !ok {
		tb.Fatalf("OpenAPI has no schema %s", name)
	}
	return s
}

// property returns a property of a decoded object schema.
func property(tb testing.TB, schema map[string]any, name string) map[string]any {
	tb.Helper()
	props, _ := schema["properties"].(map[string]any)
	p, ok := props[name].(map[string]any)
	if !ok {
		tb.Fatalf("schema has no property %s: %v", name, schema)
	}
	return p
}

// calledWith counts the calls whose name starts with prefix.
func (f *fakeCore) calledWith(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}
