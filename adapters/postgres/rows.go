package postgres

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postmill/postmill/ports"
)

// Conversions between ports values and column values that several areas' rows share.

// jsonStringMap encodes a string map as a JSON object; nil is {} so the column never holds JSON null.
func jsonStringMap(m map[string]string) ([]byte, error) {
	if len(m) == 0 {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("postgres: encode map: %w", err)
	}
	return b, nil
}

// stringMap decodes what jsonStringMap stored; an empty object reads as nil.
func stringMap(b []byte) map[string]string {
	var m map[string]string
	if len(b) == 0 || json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return nil
	}
	return m
}

func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func textPtr(t pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	s := t.String
	return &s
}

// idOrNew returns id, or a fresh UUIDv7 when the caller left it empty.
func idOrNew(id string) string {
	if id != "" {
		return id
	}
	return uuid.Must(uuid.NewV7()).String()
}

func clampInt32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// encodeCursor makes the opaque page token: base64url of "<unix microseconds>.<id>" of the last row shown.
func encodeCursor(createdAt time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(createdAt.UnixMicro(), 10) + "." + id))
}

func decodeCursor(cursor string) (time.Time, string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return time.Time{}, "", false
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return time.Time{}, "", false
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	if _, err := uuid.Parse(id); err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMicro(us).UTC(), id, true
}

// utcPtr copies an optional time into UTC so that callers never share the row's pointer.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// isUUID reports whether s is a UUID in its canonical form; other ids name no row, and asking PostgreSQL
// would only turn them into a cast error.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// pageBounds checks a page query's limit and cursor: newest first, the first page starts after every row.
func pageBounds(q ports.PageQuery) (limit int, beforeAt time.Time, beforeID string, err error) {
	limit = q.Limit
	if limit == 0 {
		limit = ports.DefaultListLimit
	}
	if limit < 1 || limit > ports.MaxListLimit {
		return 0, time.Time{}, "", ports.ValidationError(ports.FieldViolation{Path: "limit", Message: fmt.Sprintf("must be between 1 and %d", ports.MaxListLimit)})
	}
	beforeAt, beforeID = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), "ffffffff-ffff-ffff-ffff-ffffffffffff"
	if q.Cursor != "" {
		var ok bool
		if beforeAt, beforeID, ok = decodeCursor(q.Cursor); !ok {
			return 0, time.Time{}, "", ports.ValidationError(ports.FieldViolation{Path: "cursor", Message: "invalid cursor"})
		}
	}
	return limit, beforeAt, beforeID, nil
}
