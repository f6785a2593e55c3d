// Package id makes the core's row ids: UUIDv7 strings (RFC 9562 §5.7). They are time-ordered, so rows
// inserted together stay close in their indexes and ids sort by creation.
package id

import "github.com/google/uuid"

// New returns a fresh UUIDv7 in its canonical string form.
func New() string { return NewUUID().String() }

// NewUUID returns a fresh UUIDv7 as a value, for callers that derive further ids from one draw
// (deliverability numbers the rows of one report from a single base).
func NewUUID() uuid.UUID { return uuid.Must(uuid.NewV7()) }
