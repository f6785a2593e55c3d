package postgres

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// listBounds is pageBounds for the lists that also have a bare-array form (domains, templates,
// suppressions, webhook endpoints): the limit may reach ports.MaxUnpagedListRows, which the core asks for
// when a client gives neither limit nor cursor. The client's own bound (1-100) is the core's to check.
func listBounds(q ports.PageQuery) (limit int, beforeAt time.Time, beforeID string, err error) {
	limit = q.Limit
	if limit == 0 {
		limit = ports.DefaultListLimit
	}
	if limit < 1 || limit > ports.MaxUnpagedListRows {
		return 0, time.Time{}, "", ports.ValidationError(ports.FieldViolation{
			Path: "limit", Message: fmt.Sprintf("must be between 1 and %d", ports.MaxUnpagedListRows)})
	}
	beforeAt, beforeID = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), "ffffffff-ffff-ffff-ffff-ffffffffffff"
	if q.Cursor != "" {
		var ok bool
		if beforeAt, beforeID, ok = decodeCursor(q.Cursor); !ok {
			return 0, time.Time{}, "", errBadCursor
		}
	}
	return limit, beforeAt, beforeID, nil
}

// errBadCursor is the 400 of a cursor this store did not issue.
var errBadCursor = ports.ValidationError(ports.FieldViolation{Path: "cursor", Message: "invalid cursor"})

// pageOf turns rows read with limit+1 into a page: the extra row only says that another page follows, and
// the cursor names the last row shown by its (created_at, id).
func pageOf[R, T any](rows []R, limit int, convert func(R) T, key func(R) (time.Time, string)) ports.Page[T] {
	page := ports.Page[T]{Data: make([]T, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		at, id := key(rows[limit-1])
		page.NextCursor = encodeCursor(at, id)
	}
	for _, r := range rows {
		page.Data = append(page.Data, convert(r))
	}
	return page
}

// versionCursorPrefix marks a template-version cursor, so that a cursor of another list is refused rather
// than read as a number.
const versionCursorPrefix = "v"

// encodeVersionCursor is the opaque page token of a template's versions: the last version number shown.
func encodeVersionCursor(version int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(versionCursorPrefix + strconv.Itoa(version)))
}

// versionBounds checks a version page's limit (1-ports.MaxListLimit) and cursor and returns the number the
// page starts below.
func versionBounds(q ports.PageQuery) (limit int, before int32, err error) {
	limit = q.Limit
	if limit == 0 {
		limit = ports.DefaultListLimit
	}
	if limit < 1 || limit > ports.MaxListLimit {
		return 0, 0, ports.ValidationError(ports.FieldViolation{
			Path: "limit", Message: fmt.Sprintf("must be between 1 and %d", ports.MaxListLimit)})
	}
	if q.Cursor == "" {
		return limit, math.MaxInt32, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil {
		return 0, 0, errBadCursor
	}
	digits, ok := strings.CutPrefix(string(raw), versionCursorPrefix)
	n, err := strconv.ParseInt(digits, 10, 32)
	if !ok || err != nil || n < 1 {
		return 0, 0, errBadCursor
	}
	return limit, int32(n), nil
}
