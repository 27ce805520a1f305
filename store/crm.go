package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// keepCRMWrite keeps what an acknowledged attempt wrote into the CRM for the Loop and
// the delivery's subject (hubspot_writes), replacing what was kept before: the attempt
// hands over every value enrichd wrote and still stands behind. A delivery about no
// subject (a test event) keeps nothing.
func keepCRMWrite(ctx context.Context, tx Tx, d *Dispatch, w *CRMWrite, now time.Time) error {
	written, err := json.Marshal(w.Written)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO hubspot_writes (loop_id, subject_hash, org_id, object_type, object_id, written, updated_at)
		SELECT loop_id, subject_hash, org_id, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT) FROM deliveries WHERE id = ? AND length(subject_hash) > 0
		ON CONFLICT (loop_id, subject_hash) DO UPDATE SET object_type = excluded.object_type, object_id = excluded.object_id,
			written = excluded.written, updated_at = excluded.updated_at`,
		w.ObjectType, w.ObjectID, string(written), ms(now), d.ID)
	return err
}

// CRMWritten is what the delivery's Loop wrote into the CRM about the delivery's
// subject before, or nil: the object to look at first, and the values enrichd wrote.
func (db *DB) CRMWritten(ctx context.Context, deliveryID string) (*CRMWrite, error) {
	var w CRMWrite
	var written string
	err := db.Reader().QueryRow(ctx, `SELECT w.object_type, w.object_id, w.written FROM deliveries d
		JOIN hubspot_writes w ON w.loop_id = d.loop_id AND w.subject_hash = d.subject_hash WHERE d.id = ?`, deliveryID).
		Scan(&w.ObjectType, &w.ObjectID, &written)
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(written), &w.Written); err != nil {
		return nil, err
	}
	return &w, nil
}
