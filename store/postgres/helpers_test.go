package postgres

import (
	"errors"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func errCode(err error) string {
	var e *enrich.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

type pgxTx = pgx.Tx

// facade is db as the rest of enrichd calls it: package store's operations on this
// driver, on the driver's clock.
func facade(db *DB) *store.DB { return &store.DB{Driver: db, Now: db.nowFn} }
