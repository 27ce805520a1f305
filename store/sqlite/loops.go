package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"enrichd/store"

	"github.com/google/uuid"
)

const loopColumns = `id, org_id, name, slug, object_type, operation, enabled, webhook_url, created_at, updated_at,
	destination_disabled_at, destination_disabled_reason, previous_secret_expires_at, delivery_failures,
	last_delivery_error, last_delivery_error_at`

func scanLoop(row scanner) (*Loop, error) {
	var l Loop
	var created, updated int64
	var disabledAt, previousExpires, lastErrAt sql.NullInt64
	var reason, lastErr *string
	var failures int
	if err := row.Scan(&l.ID, &l.OrgID, &l.Name, &l.Slug, &l.ObjectType, &l.Operation, &l.Enabled,
		&l.Destination.URL, &created, &updated, &disabledAt, &reason, &previousExpires, &failures, &lastErr, &lastErrAt); err != nil {
		return nil, err
	}
	l.CreatedAt, l.UpdatedAt = fromMS(created), fromMS(updated)
	l.Destination.Kind = "webhook"
	l.SetState(fromNullMS(disabledAt), reason, fromNullMS(previousExpires), failures, lastErr, fromNullMS(lastErrAt))
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

// UpdateLoop changes what the patch sets, in one transaction. A disabled Loop takes no
// new runs; the tasks it has in flight still deliver. A rotation keeps the replaced
// secret for its grace period (none when 0: a leaked secret is not kept). Disabling
// the destination fails the Loop's pending deliveries that are not being sent (those
// are failed as their attempt is recorded).
func (db *DB) UpdateLoop(ctx context.Context, orgID, id string, p LoopPatch) (*Loop, error) {
	var l *Loop
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		if l, err = findLoop(ctx, tx, orgID, id); err != nil {
			return err
		}
		wasEnabled := l.Destination.Enabled
		if p.Apply(l, db.now()) {
			if l.Slug, err = uniqueSlug(ctx, tx, orgID, id, store.Slugify(l.Name)); err != nil {
				return err
			}
		}
		if _, err = tx.ExecContext(ctx, `UPDATE loops SET name = ?, slug = ?, webhook_url = ?, enabled = ?, updated_at = ? WHERE id = ?`,
			l.Name, l.Slug, l.Destination.URL, l.Enabled, ms(l.UpdatedAt), id); err != nil {
			return err
		}
		if r := p.Rotate; r != nil {
			// The right-hand secret is the one being replaced.
			if _, err = tx.ExecContext(ctx, `UPDATE loops SET previous_secret = CASE WHEN ? > 0 THEN secret END,
				previous_secret_expires_at = ?, secret = ? WHERE id = ?`, r.Grace, ms(*l.Destination.PreviousSecretExpiresAt), r.Secret, id); err != nil {
				return err
			}
		}
		switch {
		case !wasEnabled && l.Destination.Enabled:
			_, err = tx.ExecContext(ctx, `UPDATE loops SET destination_disabled_at = NULL, destination_disabled_reason = NULL,
				delivery_failures = 0 WHERE id = ?`, id)
		case wasEnabled && !l.Destination.Enabled:
			err = disableDestination(ctx, tx, id, *l.Destination.DisabledReason, l.UpdatedAt)
		}
		return err
	})
	return l, err
}

// disableDestination disables the Loop's destination, if it is not already, and fails
// its pending deliveries that are not being sent.
func disableDestination(ctx context.Context, tx *Tx, loopID, reason string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE loops SET destination_disabled_at = ?, destination_disabled_reason = ?
		WHERE id = ? AND destination_disabled_at IS NULL`, ms(now), reason, loopID); err != nil {
		return err
	}
	var current string
	if err := tx.QueryRowContext(ctx, `SELECT destination_disabled_reason FROM loops WHERE id = ?`, loopID).Scan(&current); err != nil {
		return err
	}
	return failPending(ctx, tx, loopID, current, now)
}

// failPending fails the Loop's pending deliveries that are not being sent, because its
// destination is disabled for reason. Each keeps its attempts; last_attempt_at is set
// when there was none, so that retention deletes it in time.
func failPending(ctx context.Context, tx *Tx, loopID, reason string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL,
		last_error = ?, last_attempt_at = coalesce(last_attempt_at, ?)
		WHERE loop_id = ? AND status = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`,
		store.NotSentError(reason), ms(now), loopID, ms(now))
	return err
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

// LoopTrouble counts the failing Loops and those whose destination is disabled; each
// count reads a partial index that holds only those Loops.
func (db *DB) LoopTrouble(ctx context.Context) (failing, disabled int64, err error) {
	err = db.read.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM loops WHERE delivery_failures >= 3),
		(SELECT count(*) FROM loops WHERE destination_disabled_at IS NOT NULL)`).Scan(&failing, &disabled)
	return failing, disabled, err
}
