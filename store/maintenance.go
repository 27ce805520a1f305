package store

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ErrBackupExists is returned by Backup when the destination exists and overwriting
// it was not asked for.
var ErrBackupExists = errors.New("the backup file already exists")

// Purged is what one PurgeSettled batch deleted.
type Purged struct {
	Tasks      int
	Deliveries int
	Batches    int // batches uploaded before the cutoff, with their rows
}

// BatchesPerPurge is how many batches one PurgeSettled of limit rows deletes: a batch
// has up to MaxBatchRows rows, deleted with it in the same short transaction.
func BatchesPerPurge(limit int) int { return max(1, limit/500) }

// PurgeSettled deletes up to limit settled tasks (succeeded, failed or canceled) that
// settled before cutoff, with their idempotency keys and the results no other task
// shares, up to limit settled deliveries (succeeded or failed) whose last attempt was
// before cutoff, and the oldest batches uploaded before cutoff (BatchesPerPurge),
// oldest first, in one short transaction. Unsettled tasks and pending deliveries are
// never touched. The credit ledger keeps its rows: it names tasks by id without
// referring to them, so an organization's balance and history stay whole. Call it
// again until it deletes fewer than limit of each.
//
// One process purges at a time (Tx.Hold, LockPurgeSettled): while another holds the purge this one
// deletes nothing and returns a zero Purged, which also tells a caller looping until a
// batch falls short to stop.
func (db *DB) PurgeSettled(ctx context.Context, cutoff time.Time, limit int) (Purged, error) {
	var p Purged
	err := db.Write(ctx, func(tx Tx) error {
		p = Purged{}
		if ok, err := tx.Hold(ctx, LockPurgeSettled, false); err != nil || !ok {
			return err
		}
		var err error
		if p.Tasks, err = purgeTasks(ctx, tx, ms(cutoff), limit); err != nil {
			return err
		}
		n, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE id IN (
			SELECT id FROM deliveries WHERE status IN ('succeeded', 'failed') AND last_attempt_at < ?
			ORDER BY last_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED)`, ms(cutoff), limit)
		if err != nil {
			return err
		}
		p.Deliveries = int(n)
		// A batch goes when its retention is up: its tasks settled long before. Its rows
		// come after the tasks here, as in CreateTask.
		n, err = tx.Exec(ctx, `DELETE FROM batches WHERE id IN (
			SELECT id FROM batches WHERE created_at < ? ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED)`,
			ms(cutoff), BatchesPerPurge(limit))
		p.Batches = int(n)
		return err
	})
	return p, err
}

// purgeTasks deletes up to limit of the tasks settled before cutoff, oldest first, with
// their keys, and returns how many it deleted. Deleting a task deletes its result too
// once no other task shares it (the tasks' triggers).
func purgeTasks(ctx context.Context, tx Tx, cutoff int64, limit int) (int, error) {
	rows, err := tx.Query(ctx, purgeSettledQuery, cutoff, limit)
	ids, err := collect(rows, err, func(r Row) (any, error) {
		var id string
		err := r.Scan(&id)
		return id, err
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	list, args := inList(ids)
	// The results first, in id order: a store hit holds its result while it adds its
	// task's count, which the deletions below take before the trigger gets to the
	// result (see CreateTask on the order of locks).
	if _, err := tx.Exec(ctx, withIDs(purgeResultsQuery, list), args...); err != nil {
		return 0, err
	}
	// Keys before their tasks, found through the tasks' own (the keys' primary key
	// serves it): a key left without its task would answer a replay with a task that is
	// gone.
	if _, err := tx.Exec(ctx, withIDs(purgeKeysQuery, list), args...); err != nil {
		return 0, err
	}
	n, err := tx.Exec(ctx, withIDs(purgeTasksQuery, list), args...)
	return int(n), err
}

// The statements of purgeTasks; :ids stands for the list of the tasks' ids (inList).
const (
	purgeSettledQuery = `SELECT id FROM tasks WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < ?
		ORDER BY finished_at LIMIT ? FOR UPDATE SKIP LOCKED`
	purgeResultsQuery = `SELECT 1 FROM task_results WHERE id IN (SELECT result_id FROM tasks WHERE id IN :ids)
		ORDER BY id FOR NO KEY UPDATE`
	purgeKeysQuery = `DELETE FROM idempotency_keys WHERE (org_id, key, task_id) IN (
		SELECT org_id, idempotency_key, id FROM tasks WHERE id IN :ids)`
	purgeTasksQuery = `DELETE FROM tasks WHERE id IN :ids`
)

func withIDs(query, list string) string { return strings.Replace(query, ":ids", list, 1) }

// PurgeQueries are the statements PurgeSettled runs on its tasks, by name, with the
// list of n ids, for the drivers' tests of their plans: the settled tasks (a cutoff
// and a limit), then their results, keys and rows (n ids each).
func PurgeQueries(n int) map[string]string {
	list, _ := inList(make([]any, n))
	return map[string]string{"PurgeSettled": purgeSettledQuery, "PurgeResults": withIDs(purgeResultsQuery, list),
		"PurgeKeys": withIDs(purgeKeysQuery, list), "PurgeTasks": withIDs(purgeTasksQuery, list)}
}

// PurgeRecords deletes up to limit records of the store (what the sources gave, kept
// for everyone or for one organization) that no source has refreshed since cutoff,
// oldest first, with their keys and positions, in one short transaction, and returns
// how many it deleted. The dataset, the team's import, is never touched. Call it again
// until it deletes fewer than limit.
//
// A record being saved at the same moment (PostgreSQL) is either locked by its saver,
// and skipped here, or deleted first, and its saver then writes it anew (saveRecord).
func (db *DB) PurgeRecords(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var n int64
	err := db.Write(ctx, func(tx Tx) error {
		n = 0
		rows, err := tx.Query(ctx, purgeRecordsQuery, ms(cutoff), limit)
		ids, err := collect(rows, err, func(r Row) (any, error) {
			var id int64
			err := r.Scan(&id)
			return id, err
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		list, args := inList(ids)
		// Keys and positions before their records: each found by its own index, where
		// the foreign keys' cascade would do the same unseen.
		for _, q := range []string{purgeRecordKeysQuery, purgePositionsQuery} {
			if _, err := tx.Exec(ctx, withIDs(q, list), args...); err != nil {
				return err
			}
		}
		n, err = tx.Exec(ctx, withIDs(purgeRecordRowsQuery, list), args...)
		return err
	})
	return int(n), err
}

// PurgeGatherings deletes up to limit of what ambiguous email lookups gathered before
// cutoff, oldest first, with the candidates' profiles, in one short transaction, and
// returns how many gatherings and candidates it deleted: those profiles are other
// people's, kept only for a retry with a hint, which then searches again. Call it
// again until it deletes fewer than limit gatherings.
func (db *DB) PurgeGatherings(ctx context.Context, cutoff time.Time, limit int) (gatherings, candidates int, err error) {
	err = db.Write(ctx, func(tx Tx) error {
		gatherings, candidates = 0, 0
		rows, err := tx.Query(ctx, purgeGatheringsQuery, ms(cutoff), limit)
		addresses, err := collect(rows, err, func(r Row) (any, error) {
			var address string
			err := r.Scan(&address)
			return address, err
		})
		if err != nil || len(addresses) == 0 {
			return err
		}
		list, args := inList(addresses)
		n, err := tx.Exec(ctx, withIDs(purgeCandidatesQuery, list), args...)
		if err != nil {
			return err
		}
		candidates = int(n)
		n, err = tx.Exec(ctx, withIDs(purgeGatheringRowsQuery, list), args...)
		gatherings = int(n)
		return err
	})
	return gatherings, candidates, err
}

// The statements of PurgeRecords and PurgeGatherings; :ids stands for the list of
// the records' ids, or of the gatherings' addresses (inList).
const (
	// The oldest first, through records_store_enriched, which holds the store's only.
	purgeRecordsQuery = `SELECT id FROM records WHERE origin = 'store' AND last_enriched_at < ?
		ORDER BY last_enriched_at LIMIT ? FOR UPDATE SKIP LOCKED`
	purgeRecordKeysQuery = `DELETE FROM record_keys WHERE record_id IN :ids`
	purgePositionsQuery  = `DELETE FROM positions WHERE record_id IN :ids`
	purgeRecordRowsQuery = `DELETE FROM records WHERE id IN :ids`
	// The oldest first, through email_gatherings_gathered.
	purgeGatheringsQuery = `SELECT address FROM email_gatherings WHERE gathered_at < ?
		ORDER BY gathered_at LIMIT ? FOR UPDATE SKIP LOCKED`
	purgeCandidatesQuery    = `DELETE FROM email_candidates WHERE address IN :ids`
	purgeGatheringRowsQuery = `DELETE FROM email_gatherings WHERE address IN :ids`
)

// RetentionQueries are the statements PurgeRecords and PurgeGatherings run, by name,
// with arguments, for the drivers' tests of their plans: the selections take a cutoff
// and a limit, the deletions a list of two ids or addresses.
func RetentionQueries() map[string]struct {
	Query string
	Args  []any
} {
	list, _ := inList(make([]any, 2))
	ids, addresses := []any{int64(1), int64(2)}, []any{"a@acme.com", "b@acme.com"}
	return map[string]struct {
		Query string
		Args  []any
	}{
		"PurgeRecords":       {purgeRecordsQuery, []any{int64(5), 500}},
		"PurgeRecordKeys":    {withIDs(purgeRecordKeysQuery, list), ids},
		"PurgePositions":     {withIDs(purgePositionsQuery, list), ids},
		"PurgeRecordRows":    {withIDs(purgeRecordRowsQuery, list), ids},
		"PurgeGatherings":    {purgeGatheringsQuery, []any{int64(5), 500}},
		"PurgeCandidates":    {withIDs(purgeCandidatesQuery, list), addresses},
		"PurgeGatheringRows": {withIDs(purgeGatheringRowsQuery, list), addresses},
	}
}

// inList is a parenthesized list of placeholders for values, for an IN, and its
// arguments: padded with NULLs, which match nothing, to a power of two, so that a
// statement has a few texts for an engine to prepare and keep, not one a length.
func inList[T any](values []T) (string, []any) {
	n := 1
	for n < len(values) {
		n *= 2
	}
	args := make([]any, n)
	for i, v := range values {
		args[i] = v
	}
	return "(" + strings.Repeat("?, ", n-1) + "?)", args
}
