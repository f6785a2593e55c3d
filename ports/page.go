package ports

// Page sizes of every paged list (SPEC §8: limit 1-100, default 25): DefaultListLimit when the caller gives
// none, MaxListLimit at most.
const (
	DefaultListLimit = 25
	MaxListLimit     = 100
)

// MaxUnpagedListRows bounds the bare-array form of the suppression, domain, template and webhook lists
// (SPEC §9.2 keeps a bare array when the caller gives neither limit nor cursor): at most this many rows,
// newest first. limit and cursor page through the rest.
const MaxUnpagedListRows = 1000

// Page is one page of a list, newest first. NextCursor is "" on the last page.
type Page[T any] struct {
	Data       []T
	NextCursor string
}

// Checked applies DefaultListLimit to a query without a limit and refuses a limit outside 1-MaxListLimit
// with a 400 at path limit. The cursor is the store's to judge: only the store can read it.
func (q PageQuery) Checked() (PageQuery, error) {
	if q.Limit == 0 {
		q.Limit = DefaultListLimit
	}
	if q.Limit < 1 || q.Limit > MaxListLimit {
		return q, ValidationError(FieldViolation{Path: "limit", Message: msgListLimit})
	}
	return q, nil
}

// msgListLimit is the violation of a limit outside 1-MaxListLimit.
const msgListLimit = "must be between 1 and 100"

// Unpaged is the query of a list's bare-array form: the first MaxUnpagedListRows rows.
func Unpaged() PageQuery { return PageQuery{Limit: MaxUnpagedListRows} }

// CheckOffsetPage checks the page of a list paged by offset (limit and offset, SPEC §4.7): a limit of 0
// becomes DefaultListLimit; a limit outside 1-MaxListLimit or a negative offset is a 400 at path limit or
// offset. It returns the limit to apply.
func CheckOffsetPage(limit, offset int) (int, error) {
	if limit == 0 {
		limit = DefaultListLimit
	}
	var v []FieldViolation
	if limit < 1 || limit > MaxListLimit {
		v = append(v, FieldViolation{Path: "limit", Message: msgListLimit})
	}
	if offset < 0 {
		v = append(v, FieldViolation{Path: "offset", Message: msgListOffset})
	}
	if len(v) > 0 {
		return 0, ValidationError(v...)
	}
	return limit, nil
}

// msgListOffset is the violation of a negative offset.
const msgListOffset = "must be at least 0"
