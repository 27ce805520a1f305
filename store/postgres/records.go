package postgres

import (
	"context"
	"database/sql"
	"errors"

	"enrichd/store"
)

// PointRecordKey points the key at the record id and returns the record it named
// before (0: none). A key another transaction is adding is waited for (the insert's
// conflict check) and then read, locked, and moved: what it named is not lost, so a
// record left without keys is deleted whichever of the two commits last.
func (e exec) PointRecordKey(ctx context.Context, origin, key string, id int64, redirect sql.NullInt64, subject []byte, answer any) (int64, error) {
	for {
		n, err := e.Exec(ctx, `INSERT INTO record_keys (origin, key, record_id, redirect, subject_hash, answer_hash) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (origin, key) DO NOTHING`, origin, key, id, redirect, subject, answer)
		if err != nil || n == 1 {
			return 0, err
		}
		var previous int64
		err = e.QueryRow(ctx, `SELECT record_id FROM record_keys WHERE origin = ? AND key = ? FOR UPDATE`, origin, key).Scan(&previous)
		if errors.Is(err, store.ErrNoRows) {
			continue // deleted with its record since the insert saw it
		}
		if err != nil {
			return 0, err
		}
		_, err = e.Exec(ctx, `UPDATE record_keys SET record_id = ?, redirect = ?, subject_hash = ?, answer_hash = ? WHERE origin = ? AND key = ?`,
			id, redirect, subject, answer, origin, key)
		return previous, err
	}
}

// FoldedEquals compares lower(column), which an index of positions serves (SQLite's
// COLLATE NOCASE folds ASCII only; the shortlist it serves is checked in Go either way).
func (db *DB) FoldedEquals(column string) string { return `lower(` + column + `) = lower(?)` }
