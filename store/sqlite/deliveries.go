package sqlite

import (
	"context"

	"enrichd/store"
)

// The deliveries are package store's; the claim's primitives are SQLite's.

// PickDueDeliveries chooses the deliveries to claim from a window of the oldest due
// ones of Loops that do not have their share (four claims' worth, as SQLite walks the
// due index): in (next_attempt_at, id) order, each Loop up to its share of what this
// sender has in flight. The single writer holds them; the statement's text is fixed
// (see store.DueDeliveries), so it is prepared once.
func (e txExec) PickDueDeliveries(ctx context.Context, now int64, limit, perLoop int, inFlight map[string]int) ([]string, error) {
	rows, err := e.tx.QueryContext(ctx, `SELECT id, loop_id `+store.DueDeliveries+`
		ORDER BY next_attempt_at, id LIMIT ?`, append(store.DueArgs(now, perLoop, inFlight), 4*limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	taken := map[string]int{}
	var ids []string
	for rows.Next() && len(ids) < limit {
		var id, loop string
		if err := rows.Scan(&id, &loop); err != nil {
			return nil, err
		}
		if inFlight[loop]+taken[loop] < perLoop {
			taken[loop]++
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// LeaseDeliveries leases each delivery by its own statement, of fixed text, prepared
// once: the Loop's columns are read by its primary key as each row is returned.
func (e txExec) LeaseDeliveries(ctx context.Context, ids []string, leaseUntil, now int64) ([]*Dispatch, error) {
	out := make([]*Dispatch, 0, len(ids))
	for _, id := range ids {
		var d Dispatch
		var payload string
		err := e.tx.QueryRowContext(ctx, `UPDATE deliveries SET lease_until = ? WHERE id = ?
			RETURNING id, loop_id, event, payload, attempts + 1,
				(SELECT webhook_url FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT secret FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT CASE WHEN previous_secret_expires_at > ? THEN coalesce(previous_secret, '') ELSE '' END
					FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT coalesce(destination_disabled_reason, '') FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT destination_kind FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT object_type FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT coalesce(hubspot_token, '') FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT coalesce(hubspot_token_key_id, '') FROM loops WHERE loops.id = deliveries.loop_id),
				(SELECT hubspot_options FROM loops WHERE loops.id = deliveries.loop_id)`,
			leaseUntil, id, now).
			Scan(&d.ID, &d.LoopID, &d.Event, &payload, &d.Attempt, &d.URL, &d.Secret, &d.PreviousSecret, &d.DisabledReason,
				&d.Kind, &d.ObjectType, &d.HubSpot.Sealed, &d.HubSpot.KeyID, &d.HubSpotOptions)
		if err != nil {
			return nil, err
		}
		d.Payload, d.LeaseUntil = []byte(payload), leaseUntil
		out = append(out, &d)
	}
	return out, nil
}
