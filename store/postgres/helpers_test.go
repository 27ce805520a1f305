package postgres

import (
	"errors"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func errCode(err error) string {
	var e *enrich.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// facade is db as the rest of enrichd calls it: package store's operations on this
// driver, on the driver's clock.
func facade(db *DB) *store.DB { return wrap(db, db.nowFn) }

// wrap is the store's facade over a driver, with the tests' subject key.
func wrap(d store.Driver, now func() time.Time) *store.DB {
	db := &store.DB{Driver: d, Now: now}
	db.SetSubjects(enrich.NewSubjects([]byte("enrichd tests' subject key, 32 b")))
	return db
}
