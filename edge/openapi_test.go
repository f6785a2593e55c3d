package edge_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/ports"
)

// openAPIDoc is the part of the served OpenAPI document these tests read.
type openAPIDoc struct {
	Servers []struct {
		URL string `json:"url"`
	} `json:"servers"`
	Paths      map[string]map[string]openAPIOperation `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
			Examples []map[string]any `json:"examples"`
		} `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string                `json:"operationId"`
	Tags        []string              `json:"tags"`
	Security    []map[string][]string `json:"security"`
	Parameters  []struct {
		Name        string `json:"name"`
		In          string `json:"in"`
		Description string `json:"description"`
	} `json:"parameters"`
	RequestBody *struct {
		Content map[string]openAPIMedia `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]openAPIMedia `json:"content"`
	} `json:"responses"`
}

type openAPIMedia struct {
	Example  any `json:"example"`
	Examples map[string]struct {
		Value any `json:"value"`
	} `json:"examples"`
}

// values returns every example of a media type.
func (m openAPIMedia) values() []any {
	var out []any
	if m.Example != nil {
		out = append(out, m.Example)
	}
	names := make([]string, 0, len(m.Examples))
	for n := range m.Examples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, m.Examples[n].Value)
	}
	return out
}

func mustOpenAPI(tb testing.TB, b *testBundle) openAPIDoc {
	tb.Helper()
	r := mustStatus(tb, b.do(tb, "GET", "/v1/openapi.json", "", nil), 200)
	var doc openAPIDoc
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		tb.Fatalf("decoding the OpenAPI document: %v", err)
	}
	if len(doc.Paths) == 0 {
		tb.Fatal("the OpenAPI document has no paths")
	}
	return doc
}

// eachOperation calls fn for every operation in a stable order.
func (d openAPIDoc) eachOperation(fn func(method, path string, op openAPIOperation)) {
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		methods := make([]string, 0, len(d.Paths[p]))
		for m := range d.Paths[p] {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			fn(strings.ToUpper(m), p, d.Paths[p][m])
		}
	}
}

func TestOpenAPIServersAreTheBaseURL(t *testing.T) {
	t.Parallel()
	b := MustStartEdge(t, newFakeCore(), func(c *edge.Config) { c.BaseURL = "https://mail.acme.example/" })
	doc := mustOpenAPI(t, b)
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "https://mail.acme.example" {
		t.Errorf("servers %+v, want the base URL without its trailing slash", doc.Servers)
	}

	if doc := mustOpenAPI(t, MustStartEdge(t, newFakeCore(), nil)); len(doc.Servers) != 0 {
		t.Errorf("servers %+v without a base URL, want none (the document's own origin)", doc.Servers)
	}

	for _, bad := range []string{"mail.acme.example", "ftp://mail.acme.example", "https://", "https://a.example/?x=1", "https://a.example/#top"} {
		if _, err := edge.New(edge.Config{BaseURL: bad}, newFakeCore().core()); err == nil {
			t.Errorf("BaseURL %q accepted", bad)
		}
	}
}

// credentialFor picks, from the fake core's tokens, one the operation accepts.
func credentialFor(op openAPIOperation) string {
	for _, req := range op.Security {
		if _, ok := req["apiKey"]; ok {
			return starKey
		}
		if _, ok := req["session"]; ok {
			if slices.Contains(op.Tags, "Admin") {
				return adminToken
			}
			return userToken
		}
	}
	return ""
}

// startEveryAreaEdge serves the fake core with every optional area added (broadcasts, marketing, billing,
// reputation, DMARC, logs), so that a test of the whole document sees every route.
func startEveryAreaEdge(t *testing.T) *testBundle {
	t.Helper()
	fake, fb, mk := newFakeCore(), &fakeBroadcasts{}, &fakeMarketing{}
	core := fake.core()
	core.Broadcasts, core.Unsubscribe = fb, fb
	core.Contacts, core.Topics, core.Segments, core.Preferences = mk, mk, mk, mk
	core.Billing, core.Reputation, core.DMARC = fakeAnalysis{}, fakeAnalysis{}, fakeAnalysis{}
	core.Logs, core.Analytics = fakeLogs{}, fakeLogs{}
	s, err := edge.New(edge.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()}, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &testBundle{fake: fake, srv: srv, logs: &syncBuffer{}, reg: prometheus.NewRegistry()}
}

// TestOpenAPIDocumentsEveryBody checks, over the routes of every area, that every media type of every
// request body shows at least one example, and that each example is a body the route accepts: sent to the
// edge with that Content-Type, none fails validation. A media type the document offers without an example
// (such as the application/octet-stream huma adds for a RawBody field) fails.
func TestOpenAPIDocumentsEveryBody(t *testing.T) {
	t.Parallel()
	b := startEveryAreaEdge(t)
	doc := mustOpenAPI(t, b)
	bodies := 0
	doc.eachOperation(func(method, path string, op openAPIOperation) {
		if op.RequestBody == nil {
			return
		}
		bodies++
		if _, ok := op.RequestBody.Content["application/json"]; !ok {
			t.Errorf("%s %s: request body is not application/json", method, path)
		}
		types := make([]string, 0, len(op.RequestBody.Content))
		for mt := range op.RequestBody.Content {
			types = append(types, mt)
		}
		sort.Strings(types)
		target := strings.NewReplacer("{id}", "0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d19", "{deliveryId}",
			"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d1a").Replace(path)
		for _, mt := range types {
			examples := op.RequestBody.Content[mt].values()
			if len(examples) == 0 {
				t.Errorf("%s %s (%s): the %s request body has no example; add one to requestExamples "+
					"(application/json), or do not offer %[4]s", method, path, op.OperationID, mt)
				continue
			}
			for i, ex := range examples {
				r := b.do(t, method, target, credentialFor(op), ex, "Content-Type", mt)
				msg, _ := r.body["message"].(string)
				switch {
				case r.status == http.StatusBadRequest && (msg == ports.MessageValidationFailed ||
					strings.HasPrefix(msg, "Malformed JSON") || strings.HasPrefix(msg, "Request body")),
					r.status == http.StatusRequestEntityTooLarge, r.status == http.StatusUnsupportedMediaType,
					r.status == http.StatusUnprocessableEntity, r.status == http.StatusUnauthorized:
					t.Errorf("%s %s: %s example %d is refused: %d %s", method, path, mt, i, r.status, r.raw)
				}
			}
		}
	})
	if bodies < 30 {
		t.Errorf("only %d operations take a body; the document lost routes", bodies)
	}
}

// TestOpenAPIDocumentsErrorBodies checks the SPEC §7 body: the schema carries an example and every error
// response of every operation shows bodies of its own status.
func TestOpenAPIDocumentsErrorBodies(t *testing.T) {
	t.Parallel()
	doc := mustOpenAPI(t, MustStartEdge(t, newFakeCore(), nil))
	errSchema := doc.Components.Schemas["ErrorBody"]
	if len(errSchema.Examples) == 0 {
		t.Error("ErrorBody has no example")
	}
	for _, ex := range errSchema.Examples {
		checkErrorExample(t, "ErrorBody", 0, ex)
	}
	responses := 0
	doc.eachOperation(func(method, path string, op openAPIOperation) {
		for code, resp := range op.Responses {
			status, err := strconv.Atoi(code)
			if err != nil || status < 400 {
				continue
			}
			responses++
			where := fmt.Sprintf("%s %s %d", method, path, status)
			media, ok := resp.Content["application/json"]
			if !ok {
				t.Errorf("%s: no application/json body", where)
				continue
			}
			examples := media.values()
			if len(examples) == 0 {
				t.Errorf("%s: no example", where)
			}
			for _, ex := range examples {
				m, _ := ex.(map[string]any)
				checkErrorExample(t, where, status, m)
			}
		}
	})
	if responses == 0 {
		t.Fatal("no error responses documented")
	}
	// The coded errors of SPEC §7 are shown where they happen.
	send := doc.Paths["/v1/emails"]["post"]
	for status, word := range map[string]string{"402": "plan_limit_exceeded", "403": "org_suspended", "429": "warmup_cap_reached"} {
		found := false
		for _, ex := range send.Responses[status].Content["application/json"].values() {
			if m, _ := ex.(map[string]any); m["error"] == word {
				found = true
			}
		}
		if !found {
			t.Errorf("POST /v1/emails %s shows no %s body", status, word)
		}
	}
}

func checkErrorExample(t *testing.T, where string, status int, ex map[string]any) {
	t.Helper()
	code, _ := ex["statusCode"].(float64)
	name, _ := ex["error"].(string)
	msg, _ := ex["message"].(string)
	if (status != 0 && int(code) != status) || code < 400 || name == "" || msg == "" {
		t.Errorf("%s: example is not a SPEC §7 body of its status: %v", where, ex)
	}
}

// TestOpenAPIDescribesEveryField checks that every property of every schema, and every parameter, says
// what it is.
func TestOpenAPIDescribesEveryField(t *testing.T) {
	t.Parallel()
	doc := mustOpenAPI(t, MustStartEdge(t, newFakeCore(), nil))
	var missing []string
	for name, s := range doc.Components.Schemas {
		for prop, p := range s.Properties {
			if strings.TrimSpace(p.Description) == "" {
				missing = append(missing, name+"."+prop)
			}
		}
	}
	doc.eachOperation(func(method, path string, op openAPIOperation) {
		for _, p := range op.Parameters {
			if strings.TrimSpace(p.Description) == "" {
				missing = append(missing, fmt.Sprintf("%s %s %s parameter %s", method, path, p.In, p.Name))
			}
		}
	})
	for _, main := range []string{"SendEmailRequest", "MessageResponse", "DomainWithRecordsResponse", "ErrorBody", "ApiKeyResponse"} {
		if len(doc.Components.Schemas[main].Properties) == 0 {
			t.Errorf("schema %s is missing or has no properties", main)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s has no description (add a doc tag)", m)
	}
}
