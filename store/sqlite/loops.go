package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"enrichd/store"

	"github.com/google/uuid"
)

const loopColumns = `id, org_id, name, slug, object_type, operation, enabled, webhook_url, created_at, updated_at`

func scanLoop(row scanner) (*Loop, error) {
	var l Loop
	var created, updated int64
	if err := row.Scan(&l.ID, &l.OrgID, &l.Name, &l.Slug, &l.ObjectType, &l.Operation, &l.Enabled,
		&l.Destination.URL, &created, &updated); err != nil {
		return nil, err
	}
	l.CreatedAt, l.UpdatedAt = fromMS(created), fromMS(updated)
	l.Destination.Kind, l.Destination.Enabled = "webhook", true
	return &l, nil
}

// CreateLoop creates a Loop with a new signing secret, which the returned Loop carries
// this once. Its slug is unique in the organization: "-2", "-3", ... are appended.
func (db *DB) CreateLoop(ctx context.Context, nl NewLoop) (*Loop, error) {
	secret, err := store.NewLoopSecret()
	if err != nil {
		return nil, err
	}
	var l *Loop
	err = db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		slug, err := uniqueSlug(ctx, tx, nl.OrgID, "", store.Slugify(nl.Name))
		if err != nil {
			return err
		}
		l = &Loop{ID: uuid.Must(uuid.NewV7()).String(), OrgID: nl.OrgID, Name: nl.Name, Slug: slug,
			ObjectType: nl.ObjectType, Operation: "enrich", Enabled: nl.Enabled, CreatedAt: now, UpdatedAt: now,
			Destination: Destination{Kind: "webhook", URL: nl.WebhookURL, Enabled: true, Secret: secret}}
		_, err = tx.ExecContext(ctx, `INSERT INTO loops (id, org_id, name, slug, object_type, operation, enabled, webhook_url,
			secret, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			l.ID, l.OrgID, l.Name, l.Slug, l.ObjectType, l.Operation, l.Enabled, l.Destination.URL, secret, ms(now), ms(now))
		return err
	})
	return l, err
}

// uniqueSlug is base, or base-2, base-3, ...: the first no other Loop of the
// organization holds (self, the Loop being renamed, may keep its own).
func uniqueSlug(ctx context.Context, tx *Tx, orgID, self, base string) (string, error) {
	return store.UniqueSlug(base, func(slug string) (bool, error) {
		var taken int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM loops WHERE org_id = ? AND slug = ? AND id != ?`, orgID, slug, self).Scan(&taken)
		return taken > 0, err
	})
}

// GetLoop returns one of the organization's Loops, without its secret.
func (db *DB) GetLoop(ctx context.Context, orgID, id string) (*Loop, error) {
	return findLoop(ctx, db.read, orgID, id)
}

func findLoop(ctx context.Context, q querier, orgID, id string) (*Loop, error) {
	l, err := scanLoop(q.QueryRowContext(ctx, `SELECT `+loopColumns+` FROM loops WHERE id = ? AND org_id = ?`, id, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.LoopNotFound()
	}
	return l, err
}

// ListLoops returns the organization's Loops, oldest first, without their secrets.
func (db *DB) ListLoops(ctx context.Context, orgID string) ([]*Loop, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+loopColumns+` FROM loops WHERE org_id = ? ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	loops := []*Loop{}
	for rows.Next() {
		l, err := scanLoop(rows)
		if err != nil {
			return nil, err
		}
		loops = append(loops, l)
	}
	return loops, rows.Err()
}

// UpdateLoop changes what the patch sets. A disabled Loop takes no new runs; the tasks
// it has in flight still deliver.
func (db *DB) UpdateLoop(ctx context.Context, orgID, id string, p LoopPatch) (*Loop, error) {
	var l *Loop
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		if l, err = findLoop(ctx, tx, orgID, id); err != nil {
			return err
		}
		if p.Apply(l, db.now()) {
			if l.Slug, err = uniqueSlug(ctx, tx, orgID, id, store.Slugify(l.Name)); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE loops SET name = ?, slug = ?, webhook_url = ?, enabled = ?, updated_at = ? WHERE id = ?`,
			l.Name, l.Slug, l.Destination.URL, l.Enabled, ms(l.UpdatedAt), id)
		return err
	})
	return l, err
}

// RotateLoopSecret gives the Loop a new signing secret, which the returned Loop carries
// this once: how a lost or leaked secret is replaced. Every attempt from now on is
// signed with it, those of deliveries queued before included, since the sender reads
// the secret when it claims a delivery.
func (db *DB) RotateLoopSecret(ctx context.Context, orgID, id string) (*Loop, error) {
	secret, err := store.NewLoopSecret()
	if err != nil {
		return nil, err
	}
	var l *Loop
	err = db.inTx(ctx, func(tx *Tx) error {
		var err error
		if l, err = findLoop(ctx, tx, orgID, id); err != nil {
			return err
		}
		l.UpdatedAt = db.now()
		l.Destination.Secret = secret
		_, err = tx.ExecContext(ctx, `UPDATE loops SET secret = ?, updated_at = ? WHERE id = ?`, secret, ms(l.UpdatedAt), id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// DeleteLoop deletes a Loop and its deliveries, sent or not; tasks keep their loop_id.
func (db *DB) DeleteLoop(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM loops WHERE id = ? AND org_id = ?`, id, orgID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = store.LoopNotFound()
			}
			return err
		}
		return nil
	})
}

// checkLoopForRun is the check a new task naming a Loop must pass: the Loop is the
// organization's, takes the task's object type, and is enabled.
func checkLoopForRun(ctx context.Context, tx *Tx, orgID, loopID, objectType string) error {
	l, err := findLoop(ctx, tx, orgID, loopID)
	return store.CheckLoopForRun(l, err, loopID, objectType)
}
