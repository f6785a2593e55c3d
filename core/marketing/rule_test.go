package marketing

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestCompileAcceptsTheLanguage(t *testing.T) {
	good := []string{
		`{"field":"email","cmp":"contains","value":"@Example.test"}`,
		`{"field":"bounced","cmp":"eq","value":false}`,
		`{"field":"lastActiveAt","cmp":"gte","value":{"daysAgo":30}}`,
		`{"field":"createdAt","cmp":"lt","value":"2026-01-01T00:00:00Z"}`,
		`{"field":"lastSentAt","cmp":"eq","value":null}`,
		`{"field":"lastSentAt","cmp":"exists","value":false}`,
		`{"field":"lastSentAt","cmp":"lte","value":{"daysAgo":0}}`,
		`{"field":"properties.since","cmp":"lt","value":{"daysAgo":7}}`,
		`{"field":"properties.seats","cmp":"gt","value":10}`,
		`{"field":"properties.plan","cmp":"in","value":["pro",3]}`,
		`{"field":"topic.news","cmp":"eq"}`,
		`{"field":"topic.news","cmp":"in","value":["pending","subscribed"]}`,
		`{"op":"and","rules":[{"field":"locale","cmp":"eq","value":"fr"},{"op":"or","rules":[{"field":"source","cmp":"exists"}]}]}`,
	}
	for _, r := range good {
		if _, err := Compile(json.RawMessage(r)); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	p, _ := Compile(json.RawMessage(`{"field":"topic.news","cmp":"eq"}`))
	if p.Text != "subscribed" || p.Key != "news" {
		t.Fatalf("topic default = %+v", p)
	}
	p, _ = Compile(json.RawMessage(`{"field":"email","cmp":"eq","value":"ANN@X.TEST"}`))
	if p.Text != "ann@x.test" || p.Column != "email" {
		t.Fatalf("email value = %+v", p)
	}
	if p, _ = Compile(json.RawMessage(`{"field":"source","cmp":"exists","value":false}`)); !p.Negate {
		t.Fatalf("exists false = %+v", p)
	}
	if p, _ = Compile(json.RawMessage(`{"field":"source","cmp":"exists"}`)); p.Negate {
		t.Fatalf("exists = %+v", p)
	}
}

func nest(depth int) string {
	r := `{"field":"email","cmp":"exists"}`
	for i := 1; i < depth; i++ {
		r = `{"op":"and","rules":[` + r + `]}`
	}
	return r
}

func TestCompileRejectsEverythingElse(t *testing.T) {
	many := make([]string, 50)
	for i := range many {
		many[i] = `{"field":"email","cmp":"exists"}`
	}
	bad := map[string]string{
		`{"field":"password","cmp":"eq","value":"x"}`:                                   "rule.field",
		`{"field":"organizationId","cmp":"eq","value":"x"}`:                             "rule.field",
		`{"field":"properties.a b","cmp":"eq","value":"x"}`:                             "rule.field",
		`{"field":"topic.News","cmp":"eq"}`:                                             "rule.field",
		`{"field":"bounced","cmp":"gt","value":true}`:                                   "rule.cmp",
		`{"field":"topic.news","cmp":"contains","value":"x"}`:                           "rule.cmp",
		`{"field":"email","cmp":"like","value":"x"}`:                                    "rule.cmp",
		`{"field":"email","cmp":"eq"}`:                                                  "rule.value",
		`{"field":"email","cmp":"eq","value":[1]}`:                                      "rule.value",
		`{"field":"createdAt","cmp":"gt","value":"yesterday"}`:                          "rule.value",
		`{"field":"createdAt","cmp":"gt","value":{"daysAgo":36501}}`:                    "rule.value.daysAgo",
		`{"field":"createdAt","cmp":"gt","value":{"daysAgo":1.5}}`:                      "rule.value.daysAgo",
		`{"field":"email","cmp":"gt","value":{"daysAgo":1}}`:                            "rule.value",
		`{"field":"topic.news","cmp":"eq","value":"maybe"}`:                             "rule.value",
		`{"field":"email","cmp":"exists","value":"yes"}`:                                "rule.value",
		`{"field":"firstName","cmp":"exists","value":true}`:                             "rule.value",
		`{"op":"or","rules":[{"field":"topic.news","cmp":"exists","value":true}]}`:      "rule.rules.0.value",
		`{"field":"createdAt","cmp":"eq","value":{"daysAgo":1}}`:                        "rule.value",
		`{"field":"lastSentAt","cmp":"neq","value":{"daysAgo":0}}`:                      "rule.value",
		`{"field":"properties.since","cmp":"eq","value":{"daysAgo":1}}`:                 "rule.value",
		`{"field":"email","cmp":"eq","value":"` + strings.Repeat("a", 1025) + `"}`:      "rule.value",
		`{"field":"email","cmp":"in","value":[` + strings.Repeat(`"a",`, 200) + `"a"]}`: "rule.value",
		`{"field":"email","cmp":"in","value":[true]}`:                                   "rule.value.0",
		`{"field":"email","cmp":"eq","value":"x","extra":1}`:                            "rule.extra",
		`{"op":"xor","rules":[]}`:                                                       "rule.op",
		`{"op":"and","rules":[]}`:                                                       "rule.rules",
		`{"op":"and","rules":[` + strings.Join(many, ",") + `]}`:                        "rule",
		nest(6): "rule.rules.0.rules.0.rules.0.rules.0.rules.0",
		`[]`:    "rule",
		`"x"`:   "rule",
		`{} {}`: "rule",
		``:      "rule",
	}
	for r, path := range bad {
		_, err := Compile(json.RawMessage(r))
		e, ok := ports.AsError(err)
		if !ok || e.Code != ports.CodeInvalidArgument || len(e.Details) != 1 || e.Details[0].Path != path {
			t.Errorf("%.80s: err = %v %+v, want a 400 at %s", r, err, e, path)
		}
	}
	if _, err := Compile(json.RawMessage(nest(5))); err != nil {
		t.Fatalf("depth 5: %v", err)
	}
}

func FuzzCompile(f *testing.F) {
	f.Add(`{"op":"and","rules":[{"field":"properties.x","cmp":"in","value":[1,"a"]}]}`)
	f.Add(`{"field":"topic.a","cmp":"neq","value":"pending"}`)
	f.Add(nest(5))
	f.Add(`{"field":"firstName","cmp":"exists","value":true}`)
	f.Add(`{"field":"createdAt","cmp":"eq","value":{"daysAgo":1}}`)
	f.Fuzz(func(t *testing.T, rule string) {
		plan, err := Compile(json.RawMessage(rule))
		if err != nil {
			if ports.ErrorCode(err) != ports.CodeInvalidArgument {
				t.Fatalf("%q: %v", rule, err)
			}
			return
		}
		if n := countNodes(plan); n > ports.MaxRuleNodes {
			t.Fatalf("%d nodes", n)
		}
		_ = fmt.Sprint(plan)
	})
}

func countNodes(n ports.PlanNode) int {
	c := 1
	for _, ch := range n.Children {
		c += countNodes(ch)
	}
	return c
}
