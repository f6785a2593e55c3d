package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// bodyExample is one request body shown in the API reference, written as the JSON a client sends.
type bodyExample struct {
	name, summary, json string
}

// requestExamples holds the request bodies of every operation that takes one, by operation id. A route
// added with a body and no entry here fails TestOpenAPIDocumentsEveryBody, and every example must pass the
// operation's own validation (the same test sends each one).
var requestExamples = map[string][]bodyExample{
	"signup": {{"signup", "", `{"email":"ada@example.com","password":"correct horse battery","organizationName":"Acme"}`}},
	"login": {
		{"password", "Email and password", `{"email":"ada@example.com","password":"correct horse battery"}`},
		{"two-factor", "With a TOTP code and a chosen organization",
			`{"email":"ada@example.com","password":"correct horse battery","totp":"492039","orgId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17"}`},
	},
	"refresh-token":          {{"refresh", "", `{"refreshToken":"rt_YW4gZXhhbXBsZSByZWZyZXNoIHRva2VuLCBub3QgYSB"}`}},
	"logout":                 {{"logout", "", `{"refreshToken":"rt_YW4gZXhhbXBsZSByZWZyZXNoIHRva2VuLCBub3QgYSB"}`}},
	"enroll-2fa":             {{"password", "", `{"password":"correct horse battery"}`}},
	"verify-2fa":             {{"code", "", `{"code":"492039"}`}},
	"create-api-key":         {{"key", "", `{"name":"backend","scopes":["emails:send","emails:read"]}`}},
	"create-smtp-credential": {{"credential", "", `{"name":"billing relay"}`}},
	"admin-set-organization-limits": {{"limits", "50,000 a month, no warm-up cap",
		`{"monthlyLimit":50000,"warmupCap":null}`}},
	"admin-create-suppression": {{"domain", "Suppress a whole domain for every organization",
		`{"address":"spamtrap.example","scope":"global","reason":"manual"}`}},
	"create-domain":         {{"domain", "", `{"domain":"mail.acme.example"}`}},
	"create-inbound-domain": {{"domain", "", `{"domain":"inbound.acme.example"}`}},
	"create-inbound-route": {
		{"exact", "One address to a webhook", `{"inboundDomainId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17","matchType":"exact","matchValue":"support@inbound.acme.example","action":"webhook","destination":"https://hooks.acme.example/inbound"}`},
		{"catch-all", "Keep everything else for the API", `{"inboundDomainId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17","matchType":"catch_all","action":"store","priority":500}`},
	},
	"update-inbound-route": {{"disable", "", `{"enabled":false}`}},
	"update-domain":        {{"tracking", "Track opens, not clicks", `{"openTracking":true,"clickTracking":false}`}},
	"send-email": {
		{"html", "HTML and text to two recipients",
			`{"from":"Acme Billing <billing@mail.acme.example>","to":["ada@example.com","grace@example.org"],` +
				`"subject":"Your invoice for November","html":"<p>Your invoice is attached.</p>","text":"Your invoice is attached.",` +
				`"replyTo":"support@acme.example","tags":{"category":"invoice"},"metadata":{"invoiceId":4711}}`},
		{"template", "The published version of a template",
			`{"from":"hello@mail.acme.example","to":"ada@example.com","template":{"id":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d18","variables":{"firstName":"Ada","plan":"Pro"}}}`},
		{"attachment", "An attachment and a custom header",
			`{"from":"reports@mail.acme.example","to":"ada@example.com","subject":"Weekly report","text":"The report is attached.",` +
				`"attachments":[{"filename":"report.txt","contentType":"text/plain","content":"SGVsbG8sIFBvc3RtaWxsIQ=="}],` +
				`"headers":{"X-Report-Week":"2026-47"}}`},
		{"scheduled", "Scheduled for later", `{"from":"hello@mail.acme.example","to":"ada@example.com","subject":"Reminder","text":"Your trial ends tomorrow.","scheduledAt":"2026-12-01T09:00:00Z"}`},
		{"sandbox", "Every check, no delivery", `{"from":"hello@mail.acme.example","to":"ada@example.com","subject":"Test","text":"Hello","sandbox":true}`},
	},
	"send-email-batch": {{"batch", "Two messages in one request",
		`{"emails":[{"from":"hello@mail.acme.example","to":"ada@example.com","subject":"Hello Ada","text":"Hi Ada"},` +
			`{"from":"hello@mail.acme.example","to":"grace@example.org","subject":"Hello Grace","text":"Hi Grace"}]}`}},
	"create-suppression": {{"address", "", `{"address":"ada@example.com","scope":"tenant","reason":"manual"}`}},
	"create-template":    {{"template", "", `{"name":"Welcome"}`}},
	"create-template-version": {
		{"html", "HTML and text with variables",
			`{"subject":"Welcome, {{ firstName }}","html":"<h1>Welcome, {{ firstName }}</h1><p>Your plan: {{ plan }}</p>","text":"Welcome, {{ firstName }}. Your plan: {{ plan }}"}`},
		{"react", "React Email source, rendered at creation",
			`{"subject":"Welcome, {{ name }}","reactSource":"import { Html, Text } from \"@react-email/components\";\n\nexport default function Welcome(props) {\n  return (<Html lang=\"en\"><Text>Welcome, {props.name}</Text></Html>);\n}\n"}`},
	},
	"publish-template": {{"publish", "", `{"version":2}`}},
	"create-webhook": {{"endpoint", "",
		`{"url":"https://hooks.acme.example/postmill","eventTypes":["email.delivered","email.bounced","email.complained"]}`}},
}

// errorExample is one SPEC §7 body.
func errorExample(status int, name, message string, extra ...any) map[string]any {
	body := map[string]any{"statusCode": status, "error": name, "message": message}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return body
}

// validationExample is the 400 every body and parameter can give.
var validationExample = errorExample(http.StatusBadRequest, "Bad Request", "Validation failed",
	"details", []any{
		map[string]any{"path": "to.1", "message": "expected string to be RFC 5322 email: mail: missing '@' or angle-addr"},
		map[string]any{"path": "subject", "message": "expected length >= 1"},
	})

// documentExamples adds the request bodies of requestExamples and a SPEC §7 body for every documented error
// status, so the reference shows what to send and what comes back when it goes wrong.
func documentExamples(doc *huma.OpenAPI) error {
	if s, ok := doc.Components.Schemas.Map()["ErrorBody"]; ok {
		s.Examples = []any{validationExample}
	}
	for _, item := range doc.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if op == nil {
				continue
			}
			if err := documentRequestExample(op); err != nil {
				return err
			}
			for code, resp := range op.Responses {
				status, err := strconv.Atoi(code)
				if err != nil || status < 400 {
					continue
				}
				if mt := resp.Content["application/json"]; mt != nil {
					mt.Examples = errorExamples(op, status)
				}
			}
		}
	}
	return nil
}

func documentRequestExample(op *huma.Operation) error {
	if op.RequestBody == nil {
		return nil
	}
	mt := op.RequestBody.Content["application/json"]
	examples := requestExamples[op.OperationID]
	if mt == nil || len(examples) == 0 {
		// TestOpenAPIDocumentsEveryBody names the operation.
		return nil
	}
	mt.Examples = make(map[string]*huma.Example, len(examples))
	for _, e := range examples {
		var v any
		if err := json.Unmarshal([]byte(e.json), &v); err != nil {
			return fmt.Errorf("edge: request example %s of %s: %w", e.name, op.OperationID, err)
		}
		mt.Examples[e.name] = &huma.Example{Summary: e.summary, Value: v}
	}
	return nil
}

// errorExamples returns the bodies an operation answers with at status, named by cause.
func errorExamples(op *huma.Operation, status int) map[string]*huma.Example {
	one := func(name, summary string, body map[string]any) map[string]*huma.Example {
		return map[string]*huma.Example{name: {Summary: summary, Value: body}}
	}
	text := http.StatusText(status)
	switch status {
	case http.StatusBadRequest:
		out := one("validation", "Schema violation", validationExample)
		if op.OperationID == "send-email" {
			out["unverified-domain"] = &huma.Example{Summary: "From domain not verified",
				Value: errorExample(status, text, "domain mail.acme.example is not verified")}
			out["suppressed"] = &huma.Example{Summary: "Suppressed recipient",
				Value: errorExample(status, text, "recipient suppressed: ada@example.com")}
		}
		return out
	case http.StatusUnauthorized:
		return one("unauthenticated", "No usable credential",
			errorExample(status, text, "Missing or malformed Authorization bearer token"))
	case http.StatusPaymentRequired:
		return one("plan-limit", "Monthly allowance used", errorExample(status, "plan_limit_exceeded",
			"Plan limit reached for emails_sent", "metric", "emails_sent", "limit", 50000))
	case http.StatusForbidden:
		out := map[string]*huma.Example{}
		if scopes := apiKeyScopes(op); len(scopes) > 0 {
			out["insufficient-scope"] = &huma.Example{Summary: "API key lacks the scope", Value: errorExample(status,
				"insufficient_scope", "API key lacks the scope required for this route", "requiredScopes", scopes)}
		}
		if slices.Contains(op.Tags, tagAdmin) {
			out["not-admin"] = &huma.Example{Summary: "Not a platform admin", Value: errorExample(status, text, "Platform admin required")}
		}
		if op.OperationID == "send-email" || op.OperationID == "send-email-batch" {
			out["org-suspended"] = &huma.Example{Summary: "Organization paused",
				Value: errorExample(status, "org_suspended", "organization sending is paused")}
		}
		if r, ok := resourceLimits[op.OperationID]; ok {
			out["resource-limit"] = &huma.Example{Summary: "The organization holds as many as allowed",
				Value: errorExample(status, ports.ReasonResourceLimit, fmt.Sprintf("organization has reached its limit "+
					"of %d %s; delete one, or ask the platform operator to raise %s", r.limit, r.noun, r.setting),
					"resource", r.resource, "limit", r.limit)}
		}
		if len(out) == 0 {
			out["forbidden"] = &huma.Example{Value: errorExample(status, text, text)}
		}
		return out
	case http.StatusNotFound:
		return one("not-found", "No such resource in the organization", errorExample(status, text, "record not found"))
	case http.StatusConflict:
		if op.OperationID == "cancel-email" {
			return one("not-scheduled", "Only a scheduled message can be cancelled",
				errorExample(status, text, "message is queued; only a scheduled message can be cancelled"))
		}
		if slices.Contains(op.Tags, tagAuth) && op.OperationID != "signup" {
			return one("state", "Not allowed in the current state",
				errorExample(status, text, "two-factor authentication is already enabled"))
		}
		constraint := "domains_org_name_key"
		if op.OperationID == "signup" {
			constraint = "users_email_key"
		}
		return one("exists", "Resource already exists",
			errorExample(status, text, "Resource already exists", "constraint", constraint))
	case http.StatusRequestEntityTooLarge:
		return one("too-large", "Body over the route's bound", errorExample(status, text, "Request body is too large"))
	case http.StatusTooManyRequests:
		if op.OperationID == "send-email" {
			return one("warm-up", "Today's warm-up allowance used",
				errorExample(status, "warmup_cap_reached", "warm-up daily send cap reached"))
		}
		return one("rate-limit", "Request-rate limit", errorExample(status, text,
			"Rate limit exceeded. Try again later.", "retryAfterSeconds", 42))
	case http.StatusInternalServerError:
		return one("internal", "Unhandled server error; the body carries no detail", errorExample(status, text, text))
	}
	return one("error", "", errorExample(status, text, text))
}

// resourceLimits are the creations refused past a per-organization count, with the default bounds.
var resourceLimits = map[string]struct {
	resource, noun, setting string
	limit                   int
}{
	"create-domain":  {ports.ResourceDomains, "domains", "POSTMILL_MAX_DOMAINS_PER_ORG", 100},
	"create-webhook": {ports.ResourceWebhooks, "webhook endpoints", "POSTMILL_MAX_WEBHOOKS_PER_ORG", 20},
	"create-api-key": {ports.ResourceAPIKeys, "active API keys", "POSTMILL_MAX_API_KEYS_PER_ORG", 100},
}

// apiKeyScopes returns the scopes, any one of which an API key route accepts.
func apiKeyScopes(op *huma.Operation) []string {
	for _, req := range op.Security {
		if scopes, ok := req[securityAPIKey]; ok && len(scopes) > 0 {
			return scopes
		}
	}
	return nil
}
