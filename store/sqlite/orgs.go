package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"enrichd/store"

	"github.com/google/uuid"
)

func (db *DB) createOrg(ctx context.Context, tx *Tx, name string) (*Org, error) {
	if err := store.CheckOrgName(name); err != nil {
		return nil, err
	}
	if _, err := findOrg(ctx, tx, name); err == nil {
		return nil, store.OrgExists(name)
	}
	org := &Org{ID: uuid.NewString(), Name: name, CreatedAt: db.now()}
	_, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)`, org.ID, org.Name, ms(org.CreatedAt))
	return org, err
}

// FindOrg returns the organization with the given name.
func (db *DB) FindOrg(ctx context.Context, name string) (*Org, error) {
	return findOrg(ctx, db.read, name)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func findOrg(ctx context.Context, q querier, name string) (*Org, error) {
	var o Org
	var created int64
	err := q.QueryRowContext(ctx, `SELECT id, name, created_at FROM orgs WHERE name = ?`, name).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.OrgNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = fromMS(created)
	return &o, nil
}

// KeyTouches are the writes of keys' last use under way, on the writer.
func (db *DB) KeyTouches() *store.KeyTouches { return &db.touches }

// KeyCache is the keys this process has read. One process writes the file at a time,
// so what it keeps goes stale only by its own revocations, which empty it, or by
// another process's commit, which watchForeignWrites notices and empties it for.
func (db *DB) KeyCache() *store.KeyCache { return &db.keys }
