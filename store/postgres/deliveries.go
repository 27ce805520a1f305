package postgres

import (
	"context"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// The deliveries are package store's; the claim's primitives are PostgreSQL's.

// claimWindow is how many due deliveries a claim looks at per delivery it may hand
// out, as the SQLite store's window: enough to pass over Loops that have their share.
const claimWindow = 4

// dueWhere is what makes a delivery claimable at $1: pending, due, not leased.
const dueWhere = `status = 'pending' AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)`

// PickDueDeliveries picks what a claim hands out, counting what is in flight to a Loop
// in the database: its pending deliveries whose lease has not run out, whoever
// leased them. That count includes this sender's own, which it also passes in
// inFlight; the larger of the two is taken (inFlight is larger when this sender's own
// leases ran out during slow sends). Two claims must not both count the same Loop as
// empty: a claim locks the Loops it may hand out deliveries of (those with something
// due in the window, in id order, FOR NO KEY UPDATE, which the inserts of new
// deliveries do not wait for) and skips those another claim holds (SKIP LOCKED), so it
// counts only what is committed and no one adds to it meanwhile. The deliveries
// themselves are taken FOR UPDATE SKIP LOCKED too, never waiting on a retry or a
// record of attempts that holds one.
func (e exec) PickDueDeliveries(ctx context.Context, now int64, limit, perLoop int, inFlight map[string]int) ([]string, error) {
	full := []string{}
	for loop, n := range inFlight {
		if n >= perLoop {
			full = append(full, loop)
		}
	}
	rows, err := e.q.Query(ctx, `SELECT id FROM loops WHERE id IN (SELECT loop_id FROM (SELECT loop_id FROM deliveries
		WHERE `+dueWhere+` AND loop_id <> ALL($2) ORDER BY next_attempt_at, id LIMIT $3) due)
		ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`, now, full, claimWindow*limit)
	if err != nil {
		return nil, err
	}
	loops, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(loops) == 0 {
		return nil, err
	}
	share := map[string]int{}
	for _, l := range loops {
		share[l] = perLoop - inFlight[l]
	}
	rows, err = e.q.Query(ctx, `SELECT loop_id, count(*) FROM deliveries
		WHERE loop_id = ANY($1) AND status = 'pending' AND lease_until > $2 GROUP BY loop_id`, loops, now)
	if err != nil {
		return nil, err
	}
	var loop string
	var leased int
	if _, err := pgx.ForEachRow(rows, []any{&loop, &leased}, func() error {
		share[loop] = min(share[loop], perLoop-leased)
		return nil
	}); err != nil {
		return nil, err
	}
	rows, err = e.q.Query(ctx, `SELECT id, loop_id FROM deliveries WHERE `+dueWhere+` AND loop_id = ANY($2)
		ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`, now, loops, claimWindow*limit)
	if err != nil {
		return nil, err
	}
	var id string
	var ids []string
	_, err = pgx.ForEachRow(rows, []any{&id, &loop}, func() error {
		if len(ids) < limit && share[loop] > 0 {
			share[loop]--
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}

// LeaseDeliveries leases them all in one statement, joined to their Loops.
func (e exec) LeaseDeliveries(ctx context.Context, ids []string, leaseUntil, now int64) ([]*store.Dispatch, error) {
	rows, err := e.q.Query(ctx, `UPDATE deliveries d SET lease_until = $1 FROM loops l
		WHERE d.id = ANY($2) AND l.id = d.loop_id
		RETURNING d.id, d.loop_id, d.event, d.payload, d.attempts + 1, l.webhook_url, l.secret,
			CASE WHEN l.previous_secret_expires_at > $3 THEN coalesce(l.previous_secret, '') ELSE '' END,
			coalesce(l.destination_disabled_reason, ''), l.destination_kind, l.object_type, coalesce(l.hubspot_token, ''),
			coalesce(l.hubspot_token_key_id, ''), l.hubspot_options`, leaseUntil, ids, now)
	if err != nil {
		return nil, err
	}
	byID := map[string]*store.Dispatch{}
	if _, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var d store.Dispatch
		var payload string
		err := r.Scan(&d.ID, &d.LoopID, &d.Event, &payload, &d.Attempt, &d.URL, &d.Secret, &d.PreviousSecret, &d.DisabledReason,
			&d.Kind, &d.ObjectType, &d.HubSpot.Sealed, &d.HubSpot.KeyID, &d.HubSpotOptions)
		d.Payload, d.LeaseUntil = []byte(payload), leaseUntil
		byID[d.ID] = &d
		return struct{}{}, err
	}); err != nil {
		return nil, err
	}
	out := make([]*store.Dispatch, 0, len(ids))
	for _, id := range ids {
		if d := byID[id]; d != nil {
			out = append(out, d)
		}
	}
	return out, nil
}
