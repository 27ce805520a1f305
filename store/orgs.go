package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Org is an organization: the owner of keys, credits and tasks.
type Org struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey describes a key without the key itself, which is never stored.
type APIKey struct {
	ID        string     `json:"id"`
	OrgID     string     `json:"org_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// LastUsedAt is when a request last authenticated with the key, to the minute:
	// it is written at most once a minute (see Authenticate).
	LastUsedAt *time.Time `json:"last_used_at"`
}

// Principal is who a request acts for.
type Principal struct {
	OrgID string
	KeyID string
	// KeyName is the key's name, or its prefix when it has none: who acts, as the
	// audit log names the key.
	KeyName string
}

// CreateOrg creates an organization. Names are 1-100 letters, digits, '.', '_', '-'.
func (db *DB) CreateOrg(ctx context.Context, name string) (*Org, error) {
	var org *Org
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		org, err = db.createOrg(ctx, tx, name)
		return err
	})
	return org, err
}

// createOrg inserts the organization. Two transactions creating the same name at once
// (PostgreSQL) both find it missing; the unique name lets one in and the other, waiting
// for it, inserts nothing (ON CONFLICT DO NOTHING, which leaves its transaction usable)
// and gets org_exists.
func (db *DB) createOrg(ctx context.Context, tx Tx, name string) (*Org, error) {
	if err := CheckOrgName(name); err != nil {
		return nil, err
	}
	if _, err := findOrg(ctx, tx, name); err == nil {
		return nil, OrgExists(name)
	}
	org := &Org{ID: uuid.NewString(), Name: name, CreatedAt: db.now()}
	n, err := tx.Exec(ctx, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		org.ID, org.Name, ms(org.CreatedAt))
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, OrgExists(name)
	}
	return org, nil
}

// FindOrg returns the organization with the given name.
func (db *DB) FindOrg(ctx context.Context, name string) (*Org, error) {
	return findOrg(ctx, db.Reader(), name)
}

const orgColumns = `id, name, created_at`

func scanOrg(row Row) (Org, error) {
	var o Org
	var created int64
	err := row.Scan(&o.ID, &o.Name, &created)
	o.CreatedAt = fromMS(created)
	return o, err
}

func findOrg(ctx context.Context, q Executor, name string) (*Org, error) {
	o, err := scanOrg(q.QueryRow(ctx, `SELECT `+orgColumns+` FROM orgs WHERE name = ?`, name))
	if errors.Is(err, ErrNoRows) {
		return nil, OrgNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// GetOrg returns the organization with the given id.
func (db *DB) GetOrg(ctx context.Context, id string) (*Org, error) {
	o, err := scanOrg(db.Reader().QueryRow(ctx, `SELECT `+orgColumns+` FROM orgs WHERE id = ?`, id))
	if errors.Is(err, ErrNoRows) {
		return nil, OrgIDNotFound()
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// ListOrgs lists every organization by name.
func (db *DB) ListOrgs(ctx context.Context) ([]Org, error) {
	rows, err := db.Reader().Query(ctx, `SELECT `+orgColumns+` FROM orgs ORDER BY name`)
	return collect(rows, err, scanOrg)
}
