package postgres

import (
	"context"
	"errors"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// The Loops are package store's; what is left here is what this driver's tasks,
// watches and seeds still read of them.

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

func findLoop(ctx context.Context, q querier, orgID, id string) (*store.Loop, error) {
	l, err := scanLoop(q.QueryRow(ctx, `SELECT `+loopColumns+` FROM loops WHERE id = $1 AND org_id = $2`, id, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.LoopNotFound()
	}
	return l, err
}

// checkLoopForRun is the check a new task naming a Loop must pass: the Loop is the
// organization's, takes the task's object type, and is enabled. (For CreateTask.)
func checkLoopForRun(ctx context.Context, tx pgx.Tx, orgID, loopID, objectType string) error {
	l, err := findLoop(ctx, tx, orgID, loopID)
	return store.CheckLoopForRun(l, err, loopID, objectType)
}
