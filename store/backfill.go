package store

import (
	"context"
	"encoding/json"
	"strings"

	"enrichd/enrich"
)

// Rows written before subjects were hashed (or, during a rolling upgrade, by a replica
// of an older release) have NULL hashes. HashSubjects hashes them from what they hold,
// as the operations that write such rows now hash them, a batch at a time: each table's
// *_unhashed index holds exactly the rows left, so a database already done costs a
// read of an empty index per table.

// backfillBatch is how many rows one transaction of HashSubjects hashes.
const backfillBatch = 500

// backfillStep hashes up to limit of one table's rows not hashed yet, in tx, and
// returns how many it hashed.
type backfillStep struct {
	table string
	run   func(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error)
}

// The tables in the order they are hashed: a record before its keys and positions, a
// task before its deliveries.
var backfillSteps = []backfillStep{
	{"tasks", backfillTasks},
	{"task_results", backfillTaskResults},
	{"records", backfillRecords},
	{"record_keys", backfillRecordKeys},
	{"positions", backfillPositions},
	{"deliveries", backfillDeliveries},
	{"email_gatherings", backfillGatherings},
	{"email_candidates", backfillCandidates},
	{"batch_rows", backfillBatchRows},
	{"source_misses", backfillMisses},
	{"watches", backfillWatches},
}

// HashSubjects hashes the subjects of the rows that have none yet, every table's, in
// transactions of backfillBatch rows, and returns how many rows it hashed. limit, when
// more than 0, stops it after about that many (the maintenance's round); 0 hashes
// them all. Open calls it when given the subject key.
func (db *DB) HashSubjects(ctx context.Context, limit int) (int, error) {
	h, err := db.hasher()
	if err != nil {
		return 0, err
	}
	total := 0
	for _, step := range backfillSteps {
		// A table with nothing left is passed over on a read of its empty index,
		// without taking the writer.
		var left bool
		if err := db.Reader().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+step.table+` WHERE subject_hash IS NULL)`).Scan(&left); err != nil {
			return total, err
		}
		for left && (limit <= 0 || total < limit) {
			var n int
			err := db.Write(ctx, func(tx Tx) error {
				var err error
				n, err = step.run(ctx, tx, h, backfillBatch)
				return err
			})
			if err != nil {
				return total, err
			}
			total += n
			if n < backfillBatch {
				break
			}
		}
	}
	return total, nil
}

// Unhashed counts, per table, the rows whose subjects are not hashed yet: none once
// HashSubjects is done, so that every row about a person can be found by subject.
func (db *DB) Unhashed(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := db.Read(ctx, func(q Executor) error {
		for _, step := range backfillSteps {
			var n int64
			if err := q.QueryRow(ctx, `SELECT count(*) FROM `+step.table+` WHERE subject_hash IS NULL`).Scan(&n); err != nil {
				return err
			}
			out[step.table] = n
		}
		return nil
	})
	return out, err
}

// backfillRows reads the rows query selects (its first column the key of the row), and
// for each runs update with the key and what hash made of the row's other columns.
func backfillRows(ctx context.Context, tx Tx, query string, limit int, scan func(Row) (key []any, set []any, err error), update string) (int, error) {
	rows, err := tx.Query(ctx, query, limit)
	type change struct{ key, set []any }
	changes, err := collect(rows, err, func(r Row) (change, error) {
		key, set, err := scan(r)
		return change{key, set}, err
	})
	if err != nil {
		return 0, err
	}
	for _, c := range changes {
		if _, err := tx.Exec(ctx, update, append(c.set, c.key...)...); err != nil {
			return 0, err
		}
	}
	return len(changes), nil
}

func backfillTasks(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT t.id, t.lookup, t.target, t.object_type, r.data
		FROM tasks t LEFT JOIN task_results r ON r.id = t.result_id WHERE t.subject_hash IS NULL ORDER BY t.id LIMIT ?
		FOR UPDATE OF t SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var id, lookup, target, objectType string
			var data []byte
			if err := r.Scan(&id, &lookup, &target, &objectType, &data); err != nil {
				return nil, nil, err
			}
			subject := inputHash(h, enrich.Input{Lookup: enrich.Lookup(lookup), Target: target})
			return []any{id}, []any{subject, answerColumn(subject, resultJSONHash(h, objectType, data))}, nil
		}, `UPDATE tasks SET subject_hash = ?, answer_hash = ? WHERE id = ?`)
}

func backfillTaskResults(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT id, data FROM task_results WHERE subject_hash IS NULL ORDER BY id LIMIT ?
		FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var id int64
			var data []byte
			err := r.Scan(&id, &data)
			return []any{id}, []any{resultJSONHash(h, "", data)}, err
		}, `UPDATE task_results SET subject_hash = ? WHERE id = ?`)
}

func backfillRecords(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT id, object_type, data FROM records WHERE subject_hash IS NULL ORDER BY id LIMIT ?
		FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var id int64
			var objectType string
			var data []byte
			err := r.Scan(&id, &objectType, &data)
			return []any{id}, []any{resultJSONHash(h, objectType, data)}, err
		}, `UPDATE records SET subject_hash = ? WHERE id = ?`)
}

// recordSubject is a record's hash as read beside a row of its (subject_hash,
// object_type and data), made from its data when it has none yet.
func recordSubject(h *enrich.Subjects, hash []byte, objectType string, data []byte) []byte {
	if hash != nil {
		return hash
	}
	return resultJSONHash(h, objectType, data)
}

func backfillRecordKeys(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT k.origin, k.key, r.subject_hash, r.object_type, r.data
		FROM record_keys k JOIN records r ON r.id = k.record_id WHERE k.subject_hash IS NULL ORDER BY k.origin, k.key LIMIT ?
		FOR UPDATE OF k SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var origin, key, objectType string
			var hash, data []byte
			if err := r.Scan(&origin, &key, &hash, &objectType, &data); err != nil {
				return nil, nil, err
			}
			record := recordSubject(h, hash, objectType, data)
			own := keyHash(h, key, record)
			return []any{origin, key}, []any{own, answerColumn(own, record)}, nil
		}, `UPDATE record_keys SET subject_hash = ?, answer_hash = ? WHERE origin = ? AND key = ?`)
}

func backfillPositions(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT p.record_id, p.ord, r.subject_hash, r.object_type, r.data
		FROM positions p JOIN records r ON r.id = p.record_id WHERE p.subject_hash IS NULL ORDER BY p.record_id, p.ord LIMIT ?
		FOR UPDATE OF p SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var id, ord int64
			var objectType string
			var hash, data []byte
			if err := r.Scan(&id, &ord, &hash, &objectType, &data); err != nil {
				return nil, nil, err
			}
			return []any{id, ord}, []any{recordSubject(h, hash, objectType, data)}, nil
		}, `UPDATE positions SET subject_hash = ? WHERE record_id = ? AND ord = ?`)
}

// payloadHashes are the hashes of whom a delivery's body is about: its task's target
// and its data (a task's event or a watch's). A test event names nobody.
func payloadHashes(h *enrich.Subjects, payload []byte) (subject, answer []byte) {
	var body struct {
		Task *struct {
			ObjectType string `json:"object_type"`
			Target     string `json:"target"`
		} `json:"task"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(payload, &body) != nil || body.Task == nil {
		return noSubject, nil
	}
	subject = targetHash(h, body.Task.ObjectType, body.Task.Target)
	return subject, answerColumnBytes(subject, resultJSONHash(h, body.Task.ObjectType, body.Data))
}

// answerColumnBytes is answerColumn as bytes (nil for NULL).
func answerColumnBytes(subject, answer []byte) []byte {
	if a, ok := answerColumn(subject, answer).([]byte); ok {
		return a
	}
	return nil
}

// targetHash is the hash of a task's target, read without its lookup (a delivery's
// body shows the target alone): an address has an @, a profile an /in/, a company's
// page a /company/; anything else of a company is a domain.
func targetHash(h *enrich.Subjects, objectType, target string) []byte {
	switch {
	case objectType == enrich.ObjectPerson && strings.Contains(target, "@"):
		return inputHash(h, enrich.Input{Lookup: enrich.LookupEmail, Target: target})
	case objectType == enrich.ObjectPerson:
		return inputHash(h, enrich.Input{Lookup: enrich.LookupPersonURL, Target: target})
	case strings.Contains(target, "/company/"):
		return noSubject
	case target == "":
		return noSubject
	}
	return inputHash(h, enrich.Input{Lookup: enrich.LookupDomain, Target: target})
}

func backfillDeliveries(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT id, payload FROM deliveries WHERE subject_hash IS NULL ORDER BY id LIMIT ?
		FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var id string
			var payload []byte
			if err := r.Scan(&id, &payload); err != nil {
				return nil, nil, err
			}
			subject, answer := payloadHashes(h, payload)
			return []any{id}, []any{subject, answerColumn(subject, answer)}, nil
		}, `UPDATE deliveries SET subject_hash = ?, answer_hash = ? WHERE id = ?`)
}

func addressHash(h *enrich.Subjects, address string) []byte {
	return hashOf(h, enrich.Subject{Kind: enrich.SubjectEmail, Value: address}, true)
}

func backfillGatherings(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT address FROM email_gatherings WHERE subject_hash IS NULL ORDER BY address LIMIT ?
		FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var address string
			err := r.Scan(&address)
			return []any{address}, []any{addressHash(h, address)}, err
		}, `UPDATE email_gatherings SET subject_hash = ? WHERE address = ?`)
}

func backfillCandidates(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT address, ord, person FROM email_candidates WHERE subject_hash IS NULL ORDER BY address, ord LIMIT ?
		FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var address string
			var ord int64
			var person []byte
			if err := r.Scan(&address, &ord, &person); err != nil {
				return nil, nil, err
			}
			subject := addressHash(h, address)
			return []any{address, ord}, []any{subject, answerColumn(subject, resultJSONHash(h, enrich.ObjectPerson, person))}, nil
		}, `UPDATE email_candidates SET subject_hash = ?, answer_hash = ? WHERE address = ? AND ord = ?`)
}

// requestHash is the hash of whom a batch row's request names, read from the fields
// as the endpoint took them (not yet normalized).
func requestHash(h *enrich.Subjects, request []byte) []byte {
	var req struct {
		Domain     *string `json:"domain"`
		NetworkURL *string `json:"networkUrl"`
		Email      *string `json:"email"`
	}
	if json.Unmarshal(request, &req) != nil {
		return noSubject
	}
	var norm enrich.Normalizer
	switch {
	case req.Email != nil:
		if s, err := norm.Subject(enrich.SubjectEmail, *req.Email); err == nil {
			return hashOf(h, s, true)
		}
	case req.Domain != nil:
		if s, err := norm.Subject(enrich.SubjectDomain, *req.Domain); err == nil {
			return hashOf(h, s, true)
		}
	case req.NetworkURL != nil:
		s, ok := enrich.ProfileSubject(*req.NetworkURL) // a company's page is no profile: ok is false
		return hashOf(h, s, ok)
	}
	return noSubject
}

func backfillBatchRows(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT br.batch_id, br.row_number, br.request, t.subject_hash
		FROM batch_rows br LEFT JOIN tasks t ON t.id = br.task_id WHERE br.subject_hash IS NULL
		ORDER BY br.batch_id, br.row_number LIMIT ? FOR UPDATE OF br SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var batchID string
			var row int64
			var request, taskHash []byte
			if err := r.Scan(&batchID, &row, &request, &taskHash); err != nil {
				return nil, nil, err
			}
			hash := taskHash // the row's task, hashed before it, names the same subject
			if hash == nil {
				hash = requestHash(h, request)
			}
			return []any{batchID, row}, []any{hash}, nil
		}, `UPDATE batch_rows SET subject_hash = ? WHERE batch_id = ? AND row_number = ?`)
}

func backfillMisses(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT subject, source, org_id FROM source_misses WHERE subject_hash IS NULL
		ORDER BY subject, source, org_id LIMIT ? FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var subject, source, org string
			err := r.Scan(&subject, &source, &org)
			return []any{subject, source, org}, []any{keyHash(h, subject, noSubject)}, err
		}, `UPDATE source_misses SET subject_hash = ? WHERE subject = ? AND source = ? AND org_id = ?`)
}

func backfillWatches(ctx context.Context, tx Tx, h *enrich.Subjects, limit int) (int, error) {
	return backfillRows(ctx, tx, `SELECT id, object_type, lookup, target, baseline FROM watches WHERE subject_hash IS NULL
		ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`, limit,
		func(r Row) ([]any, []any, error) {
			var id, objectType, lookup, target string
			var baseline []byte
			if err := r.Scan(&id, &objectType, &lookup, &target, &baseline); err != nil {
				return nil, nil, err
			}
			subject := inputHash(h, enrich.Input{Lookup: enrich.Lookup(lookup), Target: target})
			return []any{id}, []any{subject, answerColumn(subject, resultJSONHash(h, objectType, baseline))}, nil
		}, `UPDATE watches SET subject_hash = ?, answer_hash = ? WHERE id = ?`)
}
