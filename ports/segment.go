package ports

import (
	"context"
	"encoding/json"
	"time"
)

// Segment bounds (SPEC §2 Segment, §4.9, §8).
const (
	MaxSegmentNameLen        = 200
	MaxSegmentDescriptionLen = 2000
	MaxRuleDepth             = 5
	MaxRuleNodes             = 50
	MaxRuleInEntries         = 200
	MaxRuleStringLen         = 1024
	MaxRuleDaysAgo           = 36500
	MaxSegmentSample         = 25
)

// Segment is a saved rule over an organization's contacts (SPEC §2). Rule is the rule tree as the client
// sent it (validated JSON).
type Segment struct {
	ID             string
	OrganizationID string
	Name           string
	Description    string
	Rule           json.RawMessage
	// Plan is the rule compiled by the core; the store keeps it so that an audience can be read without
	// the core's compiler.
	Plan      *PlanNode
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SegmentInput is a segment create or update body: nil fields are absent.
type SegmentInput struct {
	Name        *string
	Description *string
	Rule        json.RawMessage
	// Plan is Rule compiled; set by the core whenever Rule is.
	Plan *PlanNode
}

// SegmentPreview is the count of contacts a rule matches and a sample of them (at most MaxSegmentSample,
// or the limit asked).
type SegmentPreview struct {
	Count  int
	Sample []Contact
}

// SegmentService is the segments use case (SPEC §4.9). A rule outside the language is invalid_argument
// with details under rule before any query is built.
type SegmentService interface {
	CreateSegment(ctx context.Context, orgID string, in SegmentInput) (Segment, error)
	GetSegment(ctx context.Context, orgID, id string) (Segment, error)
	// ListSegments returns one page of the organization's segments, newest first: limit 1-MaxListLimit (0
	// means DefaultListLimit) from offset (0 or more). Errors: invalid_argument (limit, offset).
	ListSegments(ctx context.Context, orgID string, limit, offset int) ([]Segment, error)
	UpdateSegment(ctx context.Context, orgID, id string, in SegmentInput) (Segment, error)
	DeleteSegment(ctx context.Context, orgID, id string) error
	PreviewRule(ctx context.Context, orgID string, rule json.RawMessage, limit int) (SegmentPreview, error)
	PreviewSegment(ctx context.Context, orgID, id string, limit int) (SegmentPreview, error)
}

// RuleOp is a node kind of a compiled segment plan.
type RuleOp string

// Plan node kinds.
const (
	PlanAnd  RuleOp = "and"
	PlanOr   RuleOp = "or"
	PlanCond RuleOp = "cond"
)

// Field kinds of the rule language.
const (
	FieldText      = "text"
	FieldBool      = "boolean"
	FieldTimestamp = "timestamp"
	FieldProperty  = "property"
	FieldTopic     = "topic"
)

// PlanNode is a rule compiled by the core into a typed plan the store turns into parameterised SQL. Values
// are already checked and typed: Text and Texts strings, Number and Numbers float64, Bool, Time; DaysAgo
// (ValKind "days") is resolved by the store at evaluation time, so a saved plan never goes stale; IsNull
// for eq/neq null; Negate inverts exists. The store keeps a segment's plan beside its rule as JSON.
type PlanNode struct {
	Op       RuleOp
	Children []PlanNode
	// Condition (Op == PlanCond).
	Kind string // one of the Field* kinds
	// Column is the contact column for text, boolean and timestamp fields (email, first_name, ...); Key
	// the property or topic key.
	Column  string
	Key     string
	Cmp     string
	IsNull  bool
	Negate  bool
	ValKind string    // "string", "number", "bool", "time" or "days" for scalar comparisons
	Text    string    `json:",omitempty"`
	Number  float64   `json:",omitempty"`
	Bool    bool      `json:",omitempty"`
	Time    time.Time `json:",omitzero"`
	DaysAgo int       `json:",omitempty"`
	Texts   []string  `json:",omitempty"`
	Numbers []float64 `json:",omitempty"`
}

// SegmentStore is what the segments use case reads and writes, scoped by organization.
type SegmentStore interface {
	CreateSegment(ctx context.Context, s Segment) (Segment, error)
	GetSegment(ctx context.Context, orgID, id string) (Segment, error)
	// ListSegments returns limit segments from offset, newest first.
	ListSegments(ctx context.Context, orgID string, limit, offset int) ([]Segment, error)
	UpdateSegment(ctx context.Context, orgID, id string, in SegmentInput, now time.Time) (Segment, error)
	DeleteSegment(ctx context.Context, orgID, id string) error
	// PreviewPlan counts the organization's contacts the plan matches and returns the first limit of them
	// by id. Topic keys resolve within the organization only: another organization's key matches nothing.
	PreviewPlan(ctx context.Context, orgID string, plan PlanNode, limit int) (SegmentPreview, error)
}
