package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

// segmentColumns are the contact columns a plan may name, by kind. A plan naming anything else is refused:
// the column name is the only identifier that reaches the SQL text, and it comes from this table, never
// from the plan.
var segmentColumns = map[string]struct{ sql, kind string }{
	"email":          {"c.email", ports.FieldText},
	"first_name":     {"c.first_name", ports.FieldText},
	"last_name":      {"c.last_name", ports.FieldText},
	"locale":         {"c.locale", ports.FieldText},
	"timezone":       {"c.timezone", ports.FieldText},
	"source":         {"c.source", ports.FieldText},
	"consent_status": {"c.consent_status", ports.FieldText},
	"bounced":        {"c.bounced", ports.FieldBool},
	"last_active_at": {"c.last_active_at", ports.FieldTimestamp},
	"last_sent_at":   {"c.last_sent_at", ports.FieldTimestamp},
	"created_at":     {"c.created_at", ports.FieldTimestamp},
}

// numericText is what a stored string property must look like to be compared as a number; it is bounded so
// the cast can never overflow PostgreSQL's numeric.
const numericText = `^-?[0-9]{1,30}(\.[0-9]{1,30})?$`

// sqlBuilder turns a plan into a WHERE clause over contacts c. Every value becomes a parameter; $1 is the
// organization id.
type sqlBuilder struct {
	args []any
	now  time.Time
	// topics are the organization's topic ids by key, for the keys the plan names (resolveTopics). A key
	// that is not the organization's has no entry and names no topic.
	topics map[string]string
}

// planTopicKeys lists the topic keys a plan names.
func planTopicKeys(n ports.PlanNode, into []string) []string {
	if n.Op == ports.PlanCond && n.Kind == ports.FieldTopic {
		return append(into, n.Key)
	}
	for _, c := range n.Children {
		into = planTopicKeys(c, into)
	}
	return into
}

// resolveTopics looks up the organization's topics the plan names, so that the SQL can probe
// subscriptions by topic id (the topic_subscriptions_topic_status_idx index) rather than join topics.
func resolveTopics(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, orgID string, plan ports.PlanNode) (map[string]string, error) {
	out := map[string]string{}
	keys := planTopicKeys(plan, nil)
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT key, id FROM topics WHERE organization_id = $1 AND key = ANY($2::text[])`, orgID, keys)
	if err != nil {
		return nil, listError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, id string
		if err := rows.Scan(&k, &id); err != nil {
			return nil, err
		}
		out[k] = id
	}
	return out, listError(rows.Err())
}

func itoa(n int) string { return strconv.Itoa(n) }

// arg adds a parameter and returns its placeholder.
func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + itoa(len(b.args))
}

var errBadPlan = ports.ValidationError(ports.FieldViolation{Path: "rule", Message: "unsupported rule"})

// node renders one plan node.
func (b *sqlBuilder) node(n ports.PlanNode, depth int) (string, error) {
	if depth > ports.MaxRuleDepth+1 {
		return "", errBadPlan
	}
	switch n.Op {
	case ports.PlanAnd, ports.PlanOr:
		if len(n.Children) == 0 {
			if n.Op == ports.PlanAnd {
				return "TRUE", nil
			}
			return "FALSE", nil
		}
		parts := make([]string, 0, len(n.Children))
		for _, c := range n.Children {
			p, err := b.node(c, depth+1)
			if err != nil {
				return "", err
			}
			parts = append(parts, "("+p+")")
		}
		return strings.Join(parts, " "+strings.ToUpper(string(n.Op))+" "), nil
	case ports.PlanCond:
		switch n.Kind {
		case ports.FieldText, ports.FieldBool, ports.FieldTimestamp:
			return b.column(n)
		case ports.FieldProperty:
			return b.property(n)
		case ports.FieldTopic:
			return b.topic(n)
		}
	}
	return "", errBadPlan
}

// scalar is the parameter of a scalar comparison value, typed for PostgreSQL.
func (b *sqlBuilder) scalar(n ports.PlanNode) (string, error) {
	switch n.ValKind {
	case "string":
		return b.arg(n.Text) + "::text", nil
	case "number":
		return b.arg(n.Number) + "::float8", nil
	case "bool":
		return b.arg(n.Bool) + "::boolean", nil
	case "time":
		return b.arg(n.Time) + "::timestamptz", nil
	case "days":
		return b.arg(b.now.Add(-time.Duration(n.DaysAgo)*24*time.Hour)) + "::timestamptz", nil
	}
	return "", errBadPlan
}

var orderOps = map[string]string{"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

// column renders a condition on a contact column. Empty text columns count as null.
func (b *sqlBuilder) column(n ports.PlanNode) (string, error) {
	col, ok := segmentColumns[n.Column]
	if !ok || col.kind != n.Kind {
		return "", errBadPlan
	}
	val := col.sql
	if col.kind == ports.FieldText {
		val = "NULLIF(" + col.sql + ", '')"
	}
	switch n.Cmp {
	case "exists":
		if n.Negate {
			return val + " IS NULL", nil
		}
		return val + " IS NOT NULL", nil
	case "eq", "neq":
		if n.IsNull {
			if n.Cmp == "eq" {
				return val + " IS NULL", nil
			}
			return val + " IS NOT NULL", nil
		}
		p, err := b.typedFor(col.kind, n)
		if err != nil {
			return "", err
		}
		// Comparing a text column with a non-empty value needs no NULLIF (an empty column differs from it
		// either way), which leaves the column bare for its indexes.
		if col.kind == ports.FieldText && n.ValKind == "string" && n.Text != "" {
			val = col.sql
		}
		if n.Cmp == "eq" {
			return val + " = " + p, nil
		}
		return val + " IS DISTINCT FROM " + p, nil
	case "contains":
		if col.kind != ports.FieldText || n.ValKind != "string" {
			return "", errBadPlan
		}
		return col.sql + ` ILIKE ` + b.arg(likePattern(n.Text)) + ` ESCAPE '\'`, nil
	case "in":
		if col.kind != ports.FieldText {
			return "", errBadPlan
		}
		vals := append([]string{}, n.Texts...)
		for _, f := range n.Numbers {
			vals = append(vals, strconv.FormatFloat(f, 'f', -1, 64))
		}
		if len(vals) == 0 {
			return "FALSE", nil
		}
		return col.sql + " = ANY(" + b.arg(vals) + "::text[])", nil
	case "gt", "gte", "lt", "lte":
		if col.kind == ports.FieldBool {
			return "", errBadPlan
		}
		p, err := b.typedFor(col.kind, n)
		if err != nil {
			return "", err
		}
		if col.kind == ports.FieldText {
			return val + ` COLLATE "C" ` + orderOps[n.Cmp] + " " + p, nil
		}
		return val + " " + orderOps[n.Cmp] + " " + p, nil
	}
	return "", errBadPlan
}

// typedFor is the parameter of a column comparison, which must be of the column's kind.
func (b *sqlBuilder) typedFor(kind string, n ports.PlanNode) (string, error) {
	switch {
	case kind == ports.FieldText && n.ValKind == "string",
		kind == ports.FieldBool && n.ValKind == "bool",
		kind == ports.FieldTimestamp && (n.ValKind == "time" || n.ValKind == "days"):
		return b.scalar(n)
	case kind == ports.FieldText && n.ValKind == "number":
		return b.arg(strconv.FormatFloat(n.Number, 'f', -1, 64)) + "::text", nil
	}
	return "", errBadPlan
}

// likePattern is a contains pattern with LIKE's metacharacters escaped.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// property renders a condition on properties.<key>.
func (b *sqlBuilder) property(n ports.PlanNode) (string, error) {
	if n.Key == "" || len(n.Key) > ports.MaxContactPropertyKey {
		return "", errBadPlan
	}
	// The key becomes a parameter only when the SQL names it: PostgreSQL refuses a parameter it cannot type.
	var k, typ string
	useKey := func() {
		k = b.arg(n.Key) + "::text"
		typ = "jsonb_typeof(c.properties -> " + k + ")"
	}
	if n.Cmp != "eq" && n.Cmp != "neq" || n.IsNull {
		useKey()
	}
	switch n.Cmp {
	case "exists":
		if n.Negate {
			return "coalesce(" + typ + ", 'null') = 'null'", nil
		}
		return "coalesce(" + typ + ", 'null') <> 'null'", nil
	case "eq", "neq":
		var cond string
		if n.IsNull {
			cond = "coalesce(" + typ + ", 'null') = 'null'"
		} else {
			var val any
			switch n.ValKind {
			case "string":
				val = n.Text
			case "number":
				val = n.Number
			case "bool":
				val = n.Bool
			case "time":
				val = n.Time.UTC().Format(time.RFC3339)
			default:
				return "", errBadPlan
			}
			doc, err := json.Marshal(map[string]any{n.Key: val})
			if err != nil {
				return "", errBadPlan
			}
			cond = "c.properties @> " + b.arg(string(doc)) + "::jsonb"
		}
		if n.Cmp == "neq" {
			return "NOT (" + cond + ")", nil
		}
		return cond, nil
	case "contains":
		if n.ValKind != "string" {
			return "", errBadPlan
		}
		return typ + " = 'string' AND (c.properties ->> " + k + `) ILIKE ` + b.arg(likePattern(n.Text)) + ` ESCAPE '\'`, nil
	case "in":
		var parts []string
		if len(n.Texts) > 0 {
			parts = append(parts, "("+typ+" = 'string' AND (c.properties ->> "+k+") = ANY("+b.arg(n.Texts)+"::text[]))")
		}
		if len(n.Numbers) > 0 {
			parts = append(parts, "("+typ+" = 'number' AND (c.properties -> "+k+")::numeric = ANY("+b.arg(n.Numbers)+"::numeric[]))")
		}
		if len(parts) == 0 {
			return "FALSE", nil
		}
		return strings.Join(parts, " OR "), nil
	case "gt", "gte", "lt", "lte":
		op := orderOps[n.Cmp]
		switch n.ValKind {
		case "number":
			num := "CASE WHEN " + typ + " = 'number' THEN (c.properties -> " + k + ")::numeric" +
				" WHEN " + typ + " = 'string' AND (c.properties ->> " + k + ") ~ '" + numericText + "'" +
				" THEN (c.properties ->> " + k + ")::numeric END"
			return "(" + num + ") " + op + " " + b.arg(n.Number) + "::numeric", nil
		case "string":
			return typ + " = 'string' AND (c.properties ->> " + k + `) COLLATE "C" ` + op + " " + b.arg(n.Text) + "::text", nil
		case "time", "days":
			t := n.Time
			if n.ValKind == "days" {
				t = b.now.Add(-time.Duration(n.DaysAgo) * 24 * time.Hour)
			}
			return typ + " = 'string' AND (c.properties ->> " + k + `) COLLATE "C" ` + op + " " +
				b.arg(t.UTC().Format(time.RFC3339)) + "::text", nil
		}
	}
	return "", errBadPlan
}

// topic renders a condition on topic.<key>: the contact's subscription status on the organization's topic
// with that key. A key of another organization names no topic here.
func (b *sqlBuilder) topic(n ports.PlanNode) (string, error) {
	if n.Key == "" || len(n.Key) > ports.MaxTopicKeyLen {
		return "", errBadPlan
	}
	topicID, known := b.topics[n.Key]
	sub := func(status string) string {
		if !known {
			// Not one of the organization's topics: no contact has a subscription to it.
			return "FALSE"
		}
		return "EXISTS (SELECT 1 FROM topic_subscriptions ts WHERE ts.topic_id = " + b.arg(topicID) +
			"::uuid AND ts.organization_id = $1 AND ts.contact_id = c.id" + status + ")"
	}
	switch n.Cmp {
	case "exists":
		if n.Negate {
			return "NOT " + sub(""), nil
		}
		return sub(""), nil
	case "eq", "neq":
		var cond string
		if n.IsNull {
			cond = "NOT " + sub("")
		} else {
			if n.ValKind != "string" {
				return "", errBadPlan
			}
			if known {
				cond = sub(" AND ts.status = " + b.arg(n.Text) + "::text")
			} else {
				cond = "FALSE"
			}
		}
		if n.Cmp == "neq" {
			return "NOT (" + cond + ")", nil
		}
		return cond, nil
	case "in":
		if len(n.Texts) == 0 || !known {
			return "FALSE", nil
		}
		return sub(" AND ts.status = ANY(" + b.arg(n.Texts) + "::text[])"), nil
	}
	return "", fmt.Errorf("%w", errBadPlan)
}
