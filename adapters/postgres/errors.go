package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postmill/postmill/ports"
)

// SQLSTATE codes interpretError translates (PostgreSQL appendix A).
const (
	sqlstateUniqueViolation     = "23505"
	sqlstateForeignKeyViolation = "23503"
	sqlstateInvalidTextRepr     = "22P02"
)

// interpretError translates a driver error into a ports error at the boundary. Messages carry constraint
// names only: a conflicting or malformed value is never echoed (SPEC §7). A malformed id (invalid uuid
// text) cannot name an existing row, so it is not_found like a well-formed id that matches nothing.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ports.NotFound("record not found")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateUniqueViolation:
			return ports.AlreadyExists(pgErr.ConstraintName)
		case sqlstateForeignKeyViolation:
			return ports.MissingReference(pgErr.ConstraintName)
		case sqlstateInvalidTextRepr:
			return ports.NotFound("record not found")
		}
	}
	return fmt.Errorf("postgres: %w", err)
}

// interpretErrorFor is interpretError with the not_found message naming the kind of record looked for
// ("API key not found"), which is what a 404 body should say.
func interpretErrorFor(what string, err error) error {
	err = interpretError(err)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return ports.NotFound("%s not found", what)
	}
	return err
}

// listError is interpretError for queries that select or change a set of rows: a malformed id selects
// nothing, which for a set is simply empty rather than not_found.
func listError(err error) error {
	err = interpretError(err)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return nil
	}
	return err
}
