package marketing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// The rule language of SPEC §4.9, compiled to a ports.PlanNode. Compile checks everything (fields, kinds,
// comparators, values, depth, node count) so that the store only ever sees a plan it can turn into SQL.

// columnFields maps the contact fields a rule may name to their column and kind.
var columnFields = map[string]struct{ column, kind string }{
	"email":         {"email", ports.FieldText},
	"firstName":     {"first_name", ports.FieldText},
	"lastName":      {"last_name", ports.FieldText},
	"locale":        {"locale", ports.FieldText},
	"timezone":      {"timezone", ports.FieldText},
	"source":        {"source", ports.FieldText},
	"consentStatus": {"consent_status", ports.FieldText},
	"bounced":       {"bounced", ports.FieldBool},
	"lastActiveAt":  {"last_active_at", ports.FieldTimestamp},
	"lastSentAt":    {"last_sent_at", ports.FieldTimestamp},
	"createdAt":     {"created_at", ports.FieldTimestamp},
}

var (
	propertyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	ruleTopicKey       = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
)

// comparators allowed per kind.
var comparators = map[string]map[string]bool{
	ports.FieldText:      set("eq", "neq", "contains", "in", "gt", "gte", "lt", "lte", "exists"),
	ports.FieldBool:      set("eq", "neq", "exists"),
	ports.FieldTimestamp: set("eq", "neq", "gt", "gte", "lt", "lte", "exists"),
	ports.FieldProperty:  set("eq", "neq", "contains", "in", "gt", "gte", "lt", "lte", "exists"),
	ports.FieldTopic:     set("eq", "neq", "in", "exists"),
}

func set(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

// ruleError is a 400 naming the path of the offending part of the rule.
func ruleError(path, msg string) error {
	return ports.ValidationError(ports.FieldViolation{Path: path, Message: msg})
}

// Compile parses and checks a rule (JSON) and returns its plan. Errors are 400s with a details path under
// "rule".
func Compile(rule json.RawMessage) (ports.PlanNode, error) {
	if len(bytes.TrimSpace(rule)) == 0 {
		return ports.PlanNode{}, ruleError("rule", msgRequired)
	}
	dec := json.NewDecoder(bytes.NewReader(rule))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return ports.PlanNode{}, ruleError("rule", "must be a JSON rule")
	}
	c := compiler{}
	return c.node(v, "rule", 1)
}

type compiler struct{ nodes int }

func (c *compiler) node(v any, path string, depth int) (ports.PlanNode, error) {
	c.nodes++
	if c.nodes > ports.MaxRuleNodes {
		return ports.PlanNode{}, ruleError("rule", fmt.Sprintf("must have at most %d nodes", ports.MaxRuleNodes))
	}
	if depth > ports.MaxRuleDepth {
		return ports.PlanNode{}, ruleError(path, fmt.Sprintf("nests deeper than %d levels", ports.MaxRuleDepth))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return ports.PlanNode{}, ruleError(path, "must be a condition {field, cmp, value} or a group {op, rules}")
	}
	if _, group := obj["op"]; group {
		return c.group(obj, path, depth)
	}
	return c.condition(obj, path)
}

func (c *compiler) group(obj map[string]any, path string, depth int) (ports.PlanNode, error) {
	for k := range obj {
		if k != "op" && k != "rules" {
			return ports.PlanNode{}, ruleError(path+"."+k, "is not a field of a group")
		}
	}
	op, _ := obj["op"].(string)
	if op != "and" && op != "or" {
		return ports.PlanNode{}, ruleError(path+".op", "must be and or or")
	}
	rules, ok := obj["rules"].([]any)
	if !ok || len(rules) == 0 {
		return ports.PlanNode{}, ruleError(path+".rules", "must be a non-empty array of rules")
	}
	n := ports.PlanNode{Op: ports.RuleOp(op), Children: make([]ports.PlanNode, 0, len(rules))}
	for i, r := range rules {
		child, err := c.node(r, fmt.Sprintf("%s.rules.%d", path, i), depth+1)
		if err != nil {
			return ports.PlanNode{}, err
		}
		n.Children = append(n.Children, child)
	}
	return n, nil
}

func (c *compiler) condition(obj map[string]any, path string) (ports.PlanNode, error) {
	for k := range obj {
		if k != "field" && k != "cmp" && k != "value" {
			return ports.PlanNode{}, ruleError(path+"."+k, "is not a field of a condition")
		}
	}
	field, _ := obj["field"].(string)
	n := ports.PlanNode{Op: ports.PlanCond}
	switch {
	case columnFields[field].kind != "":
		n.Kind, n.Column = columnFields[field].kind, columnFields[field].column
	case strings.HasPrefix(field, "properties."):
		n.Kind, n.Key = ports.FieldProperty, strings.TrimPrefix(field, "properties.")
		if !propertyKeyPattern.MatchString(n.Key) {
			return ports.PlanNode{}, ruleError(path+".field", "property keys must match [A-Za-z0-9_-]{1,64}")
		}
	case strings.HasPrefix(field, "topic."):
		n.Kind, n.Key = ports.FieldTopic, strings.TrimPrefix(field, "topic.")
		if !ruleTopicKey.MatchString(n.Key) {
			return ports.PlanNode{}, ruleError(path+".field", "topic keys must match [a-z0-9][a-z0-9_-]{0,63}")
		}
	default:
		return ports.PlanNode{}, ruleError(path+".field", "is not a field a rule may name")
	}
	n.Cmp, _ = obj["cmp"].(string)
	if !comparators[n.Kind][n.Cmp] {
		return ports.PlanNode{}, ruleError(path+".cmp", "is not a comparator of this field")
	}
	val, hasVal := obj["value"]
	vpath := path + ".value"
	switch n.Cmp {
	case "exists":
		// SPEC §4.9: exists takes no value (present, non-null) or false (absent).
		if hasVal {
			if b, ok := val.(bool); !ok || b {
				return ports.PlanNode{}, ruleError(vpath, "must be omitted or false")
			}
			n.Negate = true
		}
		return n, nil
	case "in":
		return n, c.inValues(&n, val, vpath)
	}
	if n.Kind == ports.FieldTopic {
		if !hasVal {
			val = ports.ConsentSubscribed
		}
		s, ok := val.(string)
		if !ok || !validConsent(s) {
			return ports.PlanNode{}, ruleError(vpath, "must be pending, subscribed or unsubscribed")
		}
		n.ValKind, n.Text = "string", s
		return n, nil
	}
	if !hasVal {
		return ports.PlanNode{}, ruleError(vpath, msgRequired)
	}
	return n, c.scalar(&n, val, vpath)
}

// scalar types the value of eq, neq, contains and the orderings.
func (c *compiler) scalar(n *ports.PlanNode, val any, path string) error {
	ordering := n.Cmp == "gt" || n.Cmp == "gte" || n.Cmp == "lt" || n.Cmp == "lte"
	switch x := val.(type) {
	case nil:
		if n.Cmp != "eq" && n.Cmp != "neq" {
			return ruleError(path, "null only compares with eq or neq")
		}
		n.IsNull = true
		return nil
	case string:
		if utf8.RuneCountInString(x) > ports.MaxRuleStringLen || !storable(x) {
			return ruleError(path, "must be at most 1024 characters")
		}
		if n.Column == "email" {
			x = strings.ToLower(x)
		}
		switch n.Kind {
		case ports.FieldBool:
			return ruleError(path, "must be a boolean")
		case ports.FieldTimestamp:
			t, ok := parseTime(x)
			if !ok && ordering {
				return ruleError(path, "must be an ISO-8601 date-time, a date or {daysAgo}")
			}
			if !ok {
				return ruleError(path, "must be an ISO-8601 date-time or a date")
			}
			n.ValKind, n.Time = "time", t
			return nil
		}
		n.ValKind, n.Text = "string", x
		return nil
	case json.Number:
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return ruleError(path, "must be a finite number")
		}
		if n.Kind == ports.FieldBool || n.Kind == ports.FieldTimestamp || n.Cmp == "contains" {
			return ruleError(path, "must not be a number here")
		}
		n.ValKind, n.Number = "number", f
		return nil
	case bool:
		if ordering || n.Cmp == "contains" || n.Kind == ports.FieldText || n.Kind == ports.FieldTimestamp {
			return ruleError(path, "must not be a boolean here")
		}
		n.ValKind, n.Bool = "bool", x
		return nil
	case map[string]any:
		raw, ok := x["daysAgo"]
		if !ok || len(x) != 1 || !ordering {
			return ruleError(path, "objects must be {daysAgo} with gt, gte, lt or lte")
		}
		if n.Kind != ports.FieldTimestamp && n.Kind != ports.FieldProperty {
			return ruleError(path, "{daysAgo} applies to timestamps and properties")
		}
		num, ok := raw.(json.Number)
		d, err := num.Int64()
		if !ok || err != nil || d < 0 || d > ports.MaxRuleDaysAgo {
			return ruleError(path+".daysAgo", fmt.Sprintf("must be an integer from 0 to %d", ports.MaxRuleDaysAgo))
		}
		n.ValKind, n.DaysAgo = "days", int(d)
		return nil
	}
	return ruleError(path, "must be a string, number, boolean, null or {daysAgo}")
}

// inValues types the array of an in comparison: at most 200 strings or numbers.
func (c *compiler) inValues(n *ports.PlanNode, val any, path string) error {
	arr, ok := val.([]any)
	if !ok {
		return ruleError(path, "must be an array")
	}
	if len(arr) > ports.MaxRuleInEntries {
		return ruleError(path, fmt.Sprintf("must have at most %d entries", ports.MaxRuleInEntries))
	}
	n.Texts, n.Numbers = []string{}, []float64{}
	for i, e := range arr {
		ep := fmt.Sprintf("%s.%d", path, i)
		switch x := e.(type) {
		case string:
			if utf8.RuneCountInString(x) > ports.MaxRuleStringLen || !storable(x) {
				return ruleError(ep, "must be at most 1024 characters")
			}
			if n.Kind == ports.FieldTopic && !validConsent(x) {
				return ruleError(ep, "must be pending, subscribed or unsubscribed")
			}
			if n.Column == "email" {
				x = strings.ToLower(x)
			}
			n.Texts = append(n.Texts, x)
		case json.Number:
			f, err := x.Float64()
			if err != nil || math.IsInf(f, 0) || n.Kind == ports.FieldTopic {
				return ruleError(ep, "must be a string or a finite number")
			}
			n.Numbers = append(n.Numbers, f)
		default:
			return ruleError(ep, "must be a string or a number")
		}
	}
	return nil
}

// parseTime reads an ISO-8601 date-time with an offset, or a date (midnight UTC).
func parseTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), true
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}
