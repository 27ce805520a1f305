package postgres

import (
	"context"
	"errors"

	"enrichd/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what a transaction and the pool have in common, for helpers that read
// inside a write or on their own.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// isUniqueViolation reports whether err is a unique constraint's refusal, constraint
// naming the one expected ("" for any).
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && (constraint == "" || pe.ConstraintName == constraint)
}

// createOrg inserts the organization. Two transactions creating the same name at once
// both find it missing; the unique name lets one in and the other, waiting for it,
// inserts nothing (ON CONFLICT DO NOTHING, which leaves its transaction usable) and
// gets org_exists.
func (db *DB) createOrg(ctx context.Context, tx pgx.Tx, name string) (*store.Org, error) {
	if err := store.CheckOrgName(name); err != nil {
		return nil, err
	}
	if _, err := findOrg(ctx, tx, name); err == nil {
		return nil, store.OrgExists(name)
	}
	org := &store.Org{ID: uuid.NewString(), Name: name, CreatedAt: db.now()}
	tag, err := tx.Exec(ctx, `INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
		org.ID, org.Name, ms(org.CreatedAt))
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, store.OrgExists(name)
	}
	return org, nil
}

// FindOrg returns the organization with the given name.
func (db *DB) FindOrg(ctx context.Context, name string) (*store.Org, error) {
	org, err := findOrg(ctx, db.pool, name)
	return org, db.readChecked(err)
}

func findOrg(ctx context.Context, q querier, name string) (*store.Org, error) {
	var o store.Org
	var created int64
	err := q.QueryRow(ctx, `SELECT id, name, created_at FROM orgs WHERE name = $1`, name).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.OrgNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

// KeyTouches are the writes of keys' last use under way in this replica.
func (db *DB) KeyTouches() *store.KeyTouches { return &db.touches }

// KeyCache is nil: every request reads its key, so that a key revoked through one
// replica stops working on all of them at once (see store.DB.Authenticate).
func (db *DB) KeyCache() *store.KeyCache { return nil }
