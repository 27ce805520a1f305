package postgres

import (
	"context"
	"errors"

	"enrichd/store"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// b2i is a boolean as the integer column keeps it (the schema keeps SQLite's 0 and 1,
// so rows copy between the engines unchanged).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

const loopColumns = `id, org_id, name, slug, object_type, operation, enabled, webhook_url, created_at, updated_at`

func scanLoop(row pgx.Row) (*store.Loop, error) {
	var l store.Loop
	var created, updated int64
	var enabled int
	if err := row.Scan(&l.ID, &l.OrgID, &l.Name, &l.Slug, &l.ObjectType, &l.Operation, &enabled,
		&l.Destination.URL, &created, &updated); err != nil {
		return nil, err
	}
	l.Enabled = enabled != 0
	l.CreatedAt, l.UpdatedAt = fromMS(created), fromMS(updated)
	l.Destination.Kind, l.Destination.Enabled = "webhook", true
	return &l, nil
}

// lockOrgLoops takes the organization's row lock, which orders the writers that must
// see each other's Loops (two Loops named alike get different slugs). FOR NO KEY
// UPDATE, not FOR UPDATE: it does not block the inserts that reference the
// organization (their foreign key check takes FOR KEY SHARE), so tasks keep flowing.
func lockOrgLoops(ctx context.Context, tx pgx.Tx, orgID string) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM orgs WHERE id = $1 FOR NO KEY UPDATE`, orgID)
	return err
}

// CreateLoop creates a Loop with a new signing secret, which the returned Loop carries
// this once. Its slug is unique in the organization: "-2", "-3", ... are appended.
func (db *DB) CreateLoop(ctx context.Context, nl store.NewLoop) (*store.Loop, error) {
	secret, err := store.NewLoopSecret()
	if err != nil {
		return nil, err
	}
	var l *store.Loop
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockOrgLoops(ctx, tx, nl.OrgID); err != nil {
			return err
		}
		now := db.now()
		slug, err := uniqueSlug(ctx, tx, nl.OrgID, "", store.Slugify(nl.Name))
		if err != nil {
			return err
		}
		l = &store.Loop{ID: uuid.Must(uuid.NewV7()).String(), OrgID: nl.OrgID, Name: nl.Name, Slug: slug,
			ObjectType: nl.ObjectType, Operation: "enrich", Enabled: nl.Enabled, CreatedAt: now, UpdatedAt: now,
			Destination: store.Destination{Kind: "webhook", URL: nl.WebhookURL, Enabled: true, Secret: secret}}
		_, err = tx.Exec(ctx, `INSERT INTO loops (id, org_id, name, slug, object_type, operation, enabled, webhook_url,
			secret, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			l.ID, l.OrgID, l.Name, l.Slug, l.ObjectType, l.Operation, b2i(l.Enabled), l.Destination.URL, secret, ms(now), ms(now))
		return err
	})
	return l, err
}

// uniqueSlug is base, or base-2, base-3, ...: the first no other Loop of the
// organization holds (self, the Loop being renamed, may keep its own). The caller
// holds the organization's lock (lockOrg).
func uniqueSlug(ctx context.Context, tx pgx.Tx, orgID, self, base string) (string, error) {
	return store.UniqueSlug(base, func(slug string) (bool, error) {
		var taken bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loops WHERE org_id = $1 AND slug = $2 AND id <> $3)`,
			orgID, slug, self).Scan(&taken)
		return taken, err
	})
}

// GetLoop returns one of the organization's Loops, without its secret.
func (db *DB) GetLoop(ctx context.Context, orgID, id string) (*store.Loop, error) {
	l, err := findLoop(ctx, db.pool, orgID, id)
	return l, db.readChecked(err)
}

func findLoop(ctx context.Context, q querier, orgID, id string) (*store.Loop, error) {
	l, err := scanLoop(q.QueryRow(ctx, `SELECT `+loopColumns+` FROM loops WHERE id = $1 AND org_id = $2`, id, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.LoopNotFound()
	}
	return l, err
}

// ListLoops returns the organization's Loops, oldest first, without their secrets.
func (db *DB) ListLoops(ctx context.Context, orgID string) ([]*store.Loop, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+loopColumns+` FROM loops WHERE org_id = $1 ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, db.readChecked(err)
	}
	loops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Loop, error) { return scanLoop(r) })
	if loops == nil && err == nil {
		loops = []*store.Loop{}
	}
	return loops, db.readChecked(err)
}

// UpdateLoop changes what the patch sets. A disabled Loop takes no new runs; the tasks
// it has in flight still deliver.
func (db *DB) UpdateLoop(ctx context.Context, orgID, id string, p store.LoopPatch) (*store.Loop, error) {
	var l *store.Loop
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if p.Name != nil {
			if err := lockOrgLoops(ctx, tx, orgID); err != nil {
				return err
			}
		}
		var err error
		if l, err = findLoop(ctx, tx, orgID, id); err != nil {
			return err
		}
		if p.Apply(l, db.now()) {
			if l.Slug, err = uniqueSlug(ctx, tx, orgID, id, store.Slugify(l.Name)); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE loops SET name = $1, slug = $2, webhook_url = $3, enabled = $4, updated_at = $5 WHERE id = $6`,
			l.Name, l.Slug, l.Destination.URL, b2i(l.Enabled), ms(l.UpdatedAt), id)
		return err
	})
	return l, err
}

// RotateLoopSecret gives the Loop a new signing secret, which the returned Loop carries
// this once. Every attempt from now on is signed with it, since the sender reads the
// secret when it claims a delivery.
func (db *DB) RotateLoopSecret(ctx context.Context, orgID, id string) (*store.Loop, error) {
	secret, err := store.NewLoopSecret()
	if err != nil {
		return nil, err
	}
	var l *store.Loop
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if l, err = findLoop(ctx, tx, orgID, id); err != nil {
			return err
		}
		l.UpdatedAt = db.now()
		l.Destination.Secret = secret
		_, err = tx.Exec(ctx, `UPDATE loops SET secret = $1, updated_at = $2 WHERE id = $3`, secret, ms(l.UpdatedAt), id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// DeleteLoop deletes a Loop and its deliveries, sent or not; tasks keep their loop_id.
func (db *DB) DeleteLoop(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM loops WHERE id = $1 AND org_id = $2`, id, orgID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.LoopNotFound()
		}
		return nil
	})
}

// checkLoopForRun is the check a new task naming a Loop must pass: the Loop is the
// organization's, takes the task's object type, and is enabled. (For CreateTask.)
func checkLoopForRun(ctx context.Context, tx pgx.Tx, orgID, loopID, objectType string) error {
	l, err := findLoop(ctx, tx, orgID, loopID)
	return store.CheckLoopForRun(l, err, loopID, objectType)
}
