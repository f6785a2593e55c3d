package ports

import "context"

// SealedColumn names a stored column whose values are sealed with the master secret (core/secret) and bound
// to their row's id as associated data. Re-encryption after a key rotation walks each of them.
type SealedColumn string

// The sealed columns: every secret encrypted at rest (ARCHITECTURE.md, data rules).
const (
	SealedTOTPSeeds      SealedColumn = "users.totp_secret"
	SealedDKIMKeys       SealedColumn = "domains.dkim_private_key"
	SealedWebhookSecrets SealedColumn = "webhook_endpoints.secret"
)

// SealedColumns lists every SealedColumn, in the order re-encryption walks them.
var SealedColumns = []SealedColumn{SealedTOTPSeeds, SealedDKIMKeys, SealedWebhookSecrets}

// SealedValue is one stored sealed value and the id of its row, which is also its associated data.
type SealedValue struct {
	ID     string
	Sealed []byte
}

// SealedStore reads and rewrites sealed columns across every organization. Only the operator's re-encryption
// command uses it; no request path does.
type SealedStore interface {
	// SealedValues returns up to limit non-empty values of column whose row ids sort after afterID (""
	// starts from the beginning), ordered by id, so a caller pages through a column however it changes.
	// Errors: invalid_argument for an unknown column.
	SealedValues(ctx context.Context, column SealedColumn, afterID string, limit int) ([]SealedValue, error)
	// ReplaceSealed writes replacement into the row when its value still equals current, and reports
	// whether it did: a value changed meanwhile (a re-enrolment, a rotated webhook secret) is left alone.
	// Errors: invalid_argument for an unknown column.
	ReplaceSealed(ctx context.Context, column SealedColumn, id string, current, replacement []byte) (bool, error)
}
