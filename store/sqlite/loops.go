package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"enrichd/store"
)

// The Loops are package store's; what is left here is what this driver's tasks and
// watches still read of them.

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

func findLoop(ctx context.Context, q querier, orgID, id string) (*Loop, error) {
	l, err := scanLoop(q.QueryRowContext(ctx, `SELECT `+loopColumns+` FROM loops WHERE id = ? AND org_id = ?`, id, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.LoopNotFound()
	}
	return l, err
}

// checkLoopForRun is the check a new task naming a Loop must pass: the Loop is the
// organization's, takes the task's object type, and is enabled.
func checkLoopForRun(ctx context.Context, tx *Tx, orgID, loopID, objectType string) error {
	l, err := findLoop(ctx, tx, orgID, loopID)
	return store.CheckLoopForRun(l, err, loopID, objectType)
}
