package postgres

import (
	"errors"

	"enrichd/store"

	"github.com/jackc/pgx/v5/pgconn"
)

// isUniqueViolation reports whether err is a unique constraint's refusal, constraint
// naming the one expected ("" for any).
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	var le *laterError // an earlier statement's, not this one's
	return !errors.As(err, &le) && errors.As(err, &pe) && pe.Code == "23505" && (constraint == "" || pe.ConstraintName == constraint)
}

// KeyTouches are the writes of keys' last use under way in this replica.
func (db *DB) KeyTouches() *store.KeyTouches { return &db.touches }
