package sqlite

import (
	"context"
	"database/sql"
	"errors"
)

// PointRecordKey points the key at the record and returns the record it named before
// (0: none): the single writer needs no lock to read it first.
func (e txExec) PointRecordKey(ctx context.Context, origin, key string, recordID int64, redirect sql.NullInt64, subject []byte, answer any) (int64, error) {
	var previous int64
	err := e.tx.QueryRowContext(ctx, `SELECT record_id FROM record_keys WHERE origin = ? AND key = ?`, origin, key).Scan(&previous)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	_, err = e.tx.ExecContext(ctx, `INSERT OR REPLACE INTO record_keys (origin, key, record_id, redirect, subject_hash, answer_hash) VALUES (?, ?, ?, ?, ?, ?)`,
		origin, key, recordID, redirect, subject, answer)
	return previous, err
}

// FoldedEquals compares column COLLATE NOCASE, as its index does (it folds ASCII only;
// the shortlist it serves is checked in Go).
func (db *DB) FoldedEquals(column string) string { return column + ` = ? COLLATE NOCASE` }
