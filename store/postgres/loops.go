package postgres

import (
	"context"
	"errors"
	"time"

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

const loopColumns = `id, org_id, name, slug, object_type, operation, enabled, webhook_url, created_at, updated_at,
	destination_disabled_at, destination_disabled_reason, previous_secret_expires_at, delivery_failures,
	last_delivery_error, last_delivery_error_at`

func scanLoop(row pgx.Row) (*store.Loop, error) {
	var l store.Loop
	var created, updated int64
	var enabled int
	var disabledAt, previousExpires, lastErrAt *int64
	var reason, lastErr *string
	var failures int
	if err := row.Scan(&l.ID, &l.OrgID, &l.Name, &l.Slug, &l.ObjectType, &l.Operation, &enabled,
		&l.Destination.URL, &created, &updated, &disabledAt, &reason, &previousExpires, &failures, &lastErr, &lastErrAt); err != nil {
		return nil, err
	}
	l.Enabled = enabled != 0
	l.CreatedAt, l.UpdatedAt = fromMS(created), fromMS(updated)
	l.Destination.Kind = "webhook"
	l.SetState(fromNullMS(disabledAt), reason, fromNullMS(previousExpires), failures, lastErr, fromNullMS(lastErrAt))
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

// UpdateLoop changes what the patch sets, in one transaction. A disabled Loop takes no
// new runs; the tasks it has in flight still deliver. A rotation keeps the replaced
// secret for its grace period (none when 0: a leaked secret is not kept). Disabling
// the destination fails the Loop's pending deliveries that are not being sent (those
// are failed as their attempt is recorded). The Loop's row is locked first, so two
// changes to it apply one after the other.
func (db *DB) UpdateLoop(ctx context.Context, orgID, id string, p store.LoopPatch) (*store.Loop, error) {
	var l *store.Loop
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if p.Name != nil {
			if err := lockOrgLoops(ctx, tx, orgID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM loops WHERE id = $1 AND org_id = $2 FOR NO KEY UPDATE`, id, orgID); err != nil {
			return err
		}
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
		if _, err = tx.Exec(ctx, `UPDATE loops SET name = $1, slug = $2, webhook_url = $3, enabled = $4, updated_at = $5 WHERE id = $6`,
			l.Name, l.Slug, l.Destination.URL, b2i(l.Enabled), ms(l.UpdatedAt), id); err != nil {
			return err
		}
		if r := p.Rotate; r != nil {
			// The right-hand secret is the one being replaced.
			if _, err = tx.Exec(ctx, `UPDATE loops SET previous_secret = CASE WHEN $1 THEN secret END,
				previous_secret_expires_at = $2, secret = $3 WHERE id = $4`, r.Grace > 0, ms(*l.Destination.PreviousSecretExpiresAt), r.Secret, id); err != nil {
				return err
			}
		}
		switch {
		case !wasEnabled && l.Destination.Enabled:
			_, err = tx.Exec(ctx, `UPDATE loops SET destination_disabled_at = NULL, destination_disabled_reason = NULL,
				delivery_failures = 0 WHERE id = $1`, id)
		case wasEnabled && !l.Destination.Enabled:
			err = disableDestination(ctx, tx, id, *l.Destination.DisabledReason, l.UpdatedAt)
		}
		return err
	})
	return l, err
}

// disableDestination disables the Loop's destination, if it is not already, and fails
// its pending deliveries that are not being sent.
func disableDestination(ctx context.Context, tx pgx.Tx, loopID, reason string, now time.Time) error {
	var current string
	err := tx.QueryRow(ctx, `UPDATE loops SET destination_disabled_at = coalesce(destination_disabled_at, $1),
		destination_disabled_reason = CASE WHEN destination_disabled_at IS NULL THEN $2 ELSE destination_disabled_reason END
		WHERE id = $3 RETURNING destination_disabled_reason`, ms(now), reason, loopID).Scan(&current)
	if err != nil {
		return err
	}
	return failPending(ctx, tx, loopID, current, now)
}

// failPending fails the Loop's pending deliveries that are not being sent, because its
// destination is disabled for reason. Each keeps its attempts; last_attempt_at is set
// when there was none, so that retention deletes it in time.
func failPending(ctx context.Context, tx pgx.Tx, loopID, reason string, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL,
		last_error = $1, last_attempt_at = coalesce(last_attempt_at, $2)
		WHERE loop_id = $3 AND status = 'pending' AND (lease_until IS NULL OR lease_until <= $2)`,
		store.NotSentError(reason), ms(now), loopID)
	return err
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

// LoopTrouble counts the failing Loops and those whose destination is disabled; each
// count reads a partial index that holds only those Loops.
func (db *DB) LoopTrouble(ctx context.Context) (failing, disabled int64, err error) {
	err = db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM loops WHERE delivery_failures >= 3),
		(SELECT count(*) FROM loops WHERE destination_disabled_at IS NOT NULL)`).Scan(&failing, &disabled)
	return failing, disabled, db.readChecked(err)
}
