package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"enrichd/enrich"
)

// Claim is a task a worker holds under a lease. Only the holder of Token can settle it.
type Claim struct {
	TaskID    string
	OrgID     string
	Input     enrich.Input
	ExpiresAt time.Time
	Token     string
	// QueuedAt is when the task entered the queue; a task put back keeps it, so the
	// claim lag it shows counts the whole wait.
	QueuedAt time.Time
	// WatchID is the watch whose check this task is, if it is one: a check asks the
	// sources afresh and never serves a stored record in their place.
	WatchID *string
	// More reports that another task was queued as this one was claimed (of its
	// organization, or another organization still had its turn in line). When it was
	// not, the worker need not claim again as the task settles: a task queued since
	// then woke a worker as it was queued, and a claim now would most often find
	// nothing (on PostgreSQL, two claims in three did during a batch). The poll stays
	// the fallback: on PostgreSQL a task of another replica's, queued just after this
	// claim read the line, whose wakeup went to a claimer that found only an emptied
	// turn and another's held, waits for it.
	More bool
}

// Outcome is how a claimed task ends: with a result or with an error.
type Outcome struct {
	Result *enrich.Result
	// Fetched marks a result obtained from a source, to be kept in the store; a
	// stored record served because its refresh failed is not.
	Fetched bool
	// FetchedAt is when a fetched result was retrieved; zero means now.
	FetchedAt time.Time
	Err       *enrich.TaskError
	// Gathered is what an email lookup that fit several people gathered, kept for a
	// retry with a hint until KeepGathered has passed.
	Gathered     *enrich.Gathering
	KeepGathered time.Duration
	// TieBroken marks an email lookup's person picked by a hint among several: the
	// address is not remembered as theirs, and what was gathered for it stays.
	TieBroken bool
	// Trace is what the sources were asked and where the result's fields came from:
	// the task keeps both, and a fetched result is stored with its provenance. One
	// that is Private (a field came from the organization's own vendor key) is kept
	// in the store for that organization alone. A stored record served because its
	// refresh failed carries the provenance it was stored with.
	Trace enrich.Trace
	// Company is the company an email lookup identified the address's domain as, when
	// a source gave it: it is kept as a company lookup's result is, whether or not the
	// lookup found its person, so the next lookup at the domain reads it.
	Company *IdentifiedCompany
	// Asks are the task's asks of priced sources answered while it ran: Settle takes
	// them off the books, with what they cost, in the transaction that settles the task,
	// whether or not the claim is still the worker's (the vendor answered them either
	// way), and marks each one a sweep had settled first (Unbooked).
	Asks []AnsweredAsk
}

// identifiedCompany is the company the settle keeps before the task's own record
// (keepIdentified), or nil.
func (o Outcome) identifiedCompany() *IdentifiedCompany {
	if o.Company != nil && o.Company.Company != nil {
		return o.Company
	}
	return nil
}

// IdentifiedCompany is a company an email lookup identified, as a source gave it.
type IdentifiedCompany struct {
	Company    *enrich.Company
	Domain     string    // the address's domain, the company was asked for by
	At         time.Time // when the source gave it
	Provenance enrich.Provenance
	// Private says a field came from the organization's own vendor key: the record is
	// kept for that organization alone.
	Private bool
}

// ExpiredTask is a task ExpireTasks failed as timed_out, or RequeueAbandoned as
// internal_error, and refunded.
type ExpiredTask struct {
	ID             string
	ObjectType     string
	CreditsCharged int64
	LoopID         *string
}

// MaxTaskAttempts is how many times a task may be claimed and its claim lost (its
// lease ran out before it settled: a crash, a kill, or a lease that could not be
// extended) before it fails as internal_error instead of being claimed again for ever. A claim
// given back at a shutdown (ReleaseTask) is not counted.
const MaxTaskAttempts = 5

// The queue: queue_turns holds the organizations that have queued tasks, in the order
// of their next turn; a claim serves the lowest seq, FIFO within the organization, and
// sends it to the back of the line (Driver.QueueSeq). On SQLite the single writer
// orders everything. With several claimers at once (PostgreSQL):
//   - a claimer locks the turn it serves (Tx.NextTurn, FOR UPDATE SKIP LOCKED): the
//     others pass to the next organization instead of waiting, and no two claim for the
//     same one at a time; its task is locked the same way, so no two claim the same task;
//   - a turn's new place comes from a sequence, not max(seq) + 1, which two claimers
//     would compute alike;
//   - a claimer drops a turn whose organization has nothing queued only while it holds
//     the organization's row (Tx.LeaveQueue, SKIP LOCKED again): everything that makes
//     a task queued (an enqueue, a requeue, a release) holds that row first
//     (Tx.LockOrgs), and joins the line after it, so a turn is never dropped under a
//     task about to be queued.

// claimQuery hands out the oldest queued task of one organization: FIFO within it. It
// walks the index of queued tasks, which SQLite's planner would not always pick over the
// list's (PostgreSQL's driver drops the hint). It returns whether more is queued
// (Claim.More) by the same index, and by the first turn in line of another
// organization: a task another claimer is taking, or one whose turn outlived its
// tasks, counts as more, so a worker may claim in vain but never leaves a task behind.
const claimQuery = `UPDATE tasks
SET status = 'running', started_at = ?, lease_token = ?, lease_until = ?, attempts = attempts + 1
WHERE id = (
    SELECT id FROM tasks INDEXED BY tasks_org_queued WHERE org_id = ? AND status = 'queued'
    ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, org_id, lookup, target, input, expires_at, coalesce(queued_at, created_at), watch_id,
    EXISTS (SELECT 1 FROM tasks AS more INDEXED BY tasks_org_queued
        WHERE more.org_id = tasks.org_id AND more.status = 'queued' AND more.id <> tasks.id)
    OR EXISTS (SELECT 1 FROM queue_turns WHERE queue_turns.org_id <> tasks.org_id)`

// ClaimQuery is the statement that claims an organization's next task, for the
// drivers' tests of its plan: it takes the time, the lease's token, its end and the
// organization.
const ClaimQuery = claimQuery

// ClaimTask takes the next queued task, if any, under a lease of the given length.
// Organizations take turns (round-robin), so one with a few tasks is served between
// the tasks of another's bulk upload. It returns nil when nothing is queued that
// another claimer is not already taking.
func (db *DB) ClaimTask(ctx context.Context, lease time.Duration) (*Claim, error) {
	token, err := leaseToken()
	if err != nil {
		return nil, err
	}
	var c *Claim
	err = db.Write(ctx, func(tx Tx) error {
		var err error
		c, err = db.claimTask(ctx, tx, lease, token)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// leaseToken is a new claim's token: who holds the task's lease.
func leaseToken() (string, error) {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(tok[:]), nil
}

func (db *DB) claimTask(ctx context.Context, tx Tx, lease time.Duration, token string) (*Claim, error) {
	now := db.now()
	c := &Claim{Token: token}
	// The turns this claim found nothing to take from: not served again by it.
	var passed []string
	for {
		org, err := tx.NextTurn(ctx, passed)
		if errors.Is(err, ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var input string
		var expires, queued int64
		err = tx.QueryRow(ctx, claimQuery, ms(now), c.Token, ms(now.Add(lease)), org).
			Scan(&c.TaskID, &c.OrgID, &c.Input.Lookup, &c.Input.Target, &input, &expires, &queued, &c.WatchID, &c.More)
		if errors.Is(err, ErrNoRows) {
			// Its queued tasks were canceled or expired since it got in line.
			if err := tx.LeaveQueue(ctx, org); err != nil {
				return nil, err
			}
			passed = append(passed, org)
			continue
		}
		if err != nil {
			return nil, err
		}
		c.ExpiresAt, c.QueuedAt = fromMS(expires), fromMS(queued)
		// The hints are the only thing read from the input as sent. An input that
		// cannot be read (a row written by hand, or by another version) must not stop
		// the queue: the task runs without hints.
		if json.Unmarshal([]byte(input), &c.Input.Hints) != nil {
			c.Input.Hints = enrich.Hints{}
		}
		if err := tx.ExecLater(ctx, `UPDATE queue_turns SET seq = `+db.QueueSeq()+` WHERE org_id = ?`, org); err != nil {
			return nil, err
		}
		return c, nil
	}
}

// joinQueue gives the organization a turn at the back of the line if it has none. The
// caller holds the organization's row (Tx.LockOrgs), so no claimer is dropping its turn.
func (db *DB) joinQueue(ctx context.Context, tx Tx, orgID string) error {
	return tx.ExecLater(ctx, `INSERT INTO queue_turns (org_id, seq) VALUES (?, `+db.QueueSeq()+`)
		ON CONFLICT (org_id) DO NOTHING`, orgID)
}

// ExtendLease keeps a claim alive while its work runs. It reports false when the claim
// is no longer the task's (canceled, expired, or claimed again after the lease ran out):
// the worker should then stop.
func (db *DB) ExtendLease(ctx context.Context, c *Claim, lease time.Duration) (bool, error) {
	var ok bool
	err := db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE tasks SET lease_until = ? WHERE id = ? AND lease_token = ? AND status = 'running'`,
			ms(db.now().Add(lease)), c.TaskID, c.Token)
		ok = err == nil && n == 1
		return err
	})
	return ok, err
}

// Settle finishes a claimed task in one transaction: the task's status and result, the
// refund of a failure, the record for the store, the webhook delivery of a task that
// has a Loop, for a watch's task what it changes on the watch and sends to the watch's
// Loop (WatchSettled; the watch's row is taken after the task's), and last the task's
// answered asks (Outcome.Asks). It reports false, and changes nothing but the asks,
// when the claim is no longer the task's. The task's row is locked
// first (PostgreSQL), so a cancel, an expiry or a requeue of it at the same moment
// either waits for this and finds it settled, or settles it first and this finds the
// claim gone: the task settles, and is refunded, once.
func (db *DB) Settle(ctx context.Context, c *Claim, out Outcome) (bool, error) {
	var settled bool
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		settled, err = db.settleWithAsks(ctx, tx, c, out)
		return err
	})
	return settled && err == nil, err
}

// settleWithAsks is settle, then the task's answered asks, which the vendor answered
// whether or not the claim is still the worker's. They come last, so that the rows of
// the spend they add to are held (PostgreSQL) for as short a time as the transaction
// allows, and the task's row is still the first taken.
func (db *DB) settleWithAsks(ctx context.Context, tx Tx, c *Claim, out Outcome) (bool, error) {
	settled, err := db.settle(ctx, tx, c, out)
	if err != nil {
		return settled, err
	}
	return settled, settleAnsweredAsks(ctx, tx, out.Asks)
}

// SettleAndClaim is Settle and then, in the same write, ClaimTask: a worker settles its
// task and takes its next one with one write, not two. next is nil when nothing is
// queued. An error leaves both undone, as Settle's does; the worker then settles
// alone. Where one writer runs every write (SingleWriter: SQLite) that is a write
// fewer a task for it; elsewhere (PostgreSQL) it is Settle, next always nil: a claim
// in the settle's transaction would hold the settled task's per-status counts while
// it waits for a turn, and two workers claiming each other's organization would wait
// on each other.
func (db *DB) SettleAndClaim(ctx context.Context, c *Claim, out Outcome, lease time.Duration) (settled bool, next *Claim, err error) {
	if !db.SingleWriter() {
		settled, err = db.Settle(ctx, c, out)
		return settled, nil, err
	}
	token, err := leaseToken()
	if err != nil {
		return false, nil, err
	}
	err = db.Write(ctx, func(tx Tx) error {
		var err error
		if settled, err = db.settleWithAsks(ctx, tx, c, out); err != nil {
			return err
		}
		next, err = db.claimTask(ctx, tx, lease, token)
		return err
	})
	if err != nil {
		return false, nil, err
	}
	return settled, next, nil
}

// settle is Settle's transaction; the task's asks come last (settleWithAsks).
func (db *DB) settle(ctx context.Context, tx Tx, c *Claim, out Outcome) (bool, error) {
	h, err := db.hasher()
	if err != nil {
		return false, err
	}
	now := db.now()
	// Owning the claim, the task's Loop, its watch and whom it is about, in one read;
	// with it, in one round trip on PostgreSQL, the record a fetched result replaces,
	// unless the settle saves an identified company's record first.
	var loopID, watchID *string
	var subject []byte
	owned := false
	if err := tx.QueryLater(ctx, func(r Row) error {
		owned = true
		return r.Scan(&loopID, &watchID, &subject)
	}, `SELECT loop_id, watch_id, subject_hash FROM tasks WHERE id = ? AND lease_token = ? AND status = 'running' FOR UPDATE`,
		c.TaskID, c.Token); err != nil {
		return false, err
	}
	owner := ""
	if out.Trace.Private {
		owner = c.OrgID
	}
	fetchedAt := out.FetchedAt
	if fetchedAt.IsZero() {
		fetchedAt = now
	}
	var held *heldRecord
	if out.Err == nil && out.Fetched && out.identifiedCompany() == nil {
		if held, err = askHeldRecord(ctx, tx, c.Input, *out.Result, !out.TieBroken, owner, fetchedAt, now); err != nil {
			return false, err
		}
	}
	if err := tx.Flush(ctx); err != nil {
		return false, err
	}
	if !owned {
		return false, nil
	}
	if subject == nil { // queued by a release that did not hash it
		subject = inputHash(h, c.Input)
	}
	if out.Gathered != nil {
		if err := keepGathering(ctx, tx, h, out.Gathered, now.Add(-out.KeepGathered)); err != nil {
			return true, err
		}
	}
	if ic := out.identifiedCompany(); ic != nil {
		if err := keepIdentified(ctx, tx, h, c.OrgID, ic, now); err != nil {
			return true, err
		}
	}
	fetched := false
	provenance, sources, err := traceJSON(out.Trace)
	if err != nil {
		return true, err
	}
	if out.Err != nil {
		taskErr, err := json.Marshal(out.Err)
		if err != nil {
			return true, err
		}
		if err := finishTask(ctx, tx, c.TaskID, StatusFailed, nil, taskErr, []byte(`{}`), sources, subject, nil, false, now); err != nil {
			return true, err
		}
		if err := refund(ctx, tx, c.TaskID, now); err != nil {
			return true, err
		}
	} else {
		res := *out.Result
		if out.Fetched {
			if res, err = storeFetched(ctx, tx, h, c.Input, res, !out.TieBroken, owner, provenance, fetchedAt, now, held); err != nil {
				return true, err
			}
		}
		if c.Input.Lookup == enrich.LookupEmail && !out.TieBroken {
			// The address is on record now: what was gathered for it is no longer read.
			if err := forgetGathering(ctx, tx, enrich.AddressKey(c.Input.Target)); err != nil {
				return true, err
			}
		}
		data, err := ResultJSON(res)
		if err != nil {
			return true, err
		}
		if err := finishTask(ctx, tx, c.TaskID, StatusSucceeded, data, nil, provenance, sources, subject, resultHash(h, res), out.Fetched, now); err != nil {
			return true, err
		}
		fetched = out.Fetched
	}
	if err := deliverSettled(ctx, tx, c.TaskID, loopID, now); err != nil {
		return true, err
	}
	if watchID != nil {
		if err := settleWatch(ctx, tx, h, c.TaskID, *watchID, fetched, now); err != nil {
			return true, err
		}
	}
	return true, nil
}

// keepIdentified keeps the company an email lookup identified as a lookup of its
// domain would have: by the domain and its page, for everyone, or for the organization
// alone when a field came from its own key.
func keepIdentified(ctx context.Context, tx Tx, h *enrich.Subjects, orgID string, ic *IdentifiedCompany, now time.Time) error {
	prov := ic.Provenance
	if prov == nil {
		prov = enrich.Provenance{}
	}
	provenance, err := json.Marshal(prov)
	if err != nil {
		return err
	}
	owner := ""
	if ic.Private {
		owner = orgID
	}
	_, err = storeFetched(ctx, tx, h, enrich.Input{Lookup: enrich.LookupDomain, Target: ic.Domain}, enrich.Result{Company: ic.Company},
		true, owner, provenance, ic.At, now, nil)
	return err
}

// finishTask settles the task id. subject is the hash of whom its input names, answer
// of whom its result is about (nil without a result); fetched says the result was
// just fetched, and most likely new (keepResult).
func finishTask(ctx context.Context, tx Tx, id, status string, data, taskErr, provenance, sources, subject, answer []byte, fetched bool, now time.Time) error {
	result, err := resultID(ctx, tx, data, answer, fetched)
	if err != nil {
		return err
	}
	return tx.ExecLater(ctx, `UPDATE tasks SET status = ?, result_id = ?, error = ?, finished_at = ?,
		lease_token = NULL, lease_until = NULL, provenance = ?, sources = ?, subject_hash = ?, answer_hash = ? WHERE id = ?`,
		status, result, nullText(taskErr), ms(now), nullText(provenance), nullText(sources), subject, answerColumn(subject, answer), id)
}

// traceJSON is a trace's provenance and sources as a task keeps them: {} and [],
// never null.
func traceJSON(tr enrich.Trace) (provenance, sources []byte, err error) {
	prov, calls := tr.Provenance, tr.Sources
	if prov == nil {
		prov = enrich.Provenance{}
	}
	if calls == nil {
		calls = []enrich.SourceCall{}
	}
	if provenance, err = json.Marshal(prov); err != nil {
		return nil, nil, err
	}
	sources, err = json.Marshal(calls)
	return provenance, sources, err
}

func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// expireBatch is the most tasks one transaction of ExpireTasks fails: after an outage
// the expired backlog is failed a batch at a time, with other writes between them.
const expireBatch = 500

// ExpireTasks fails, as timed_out, and refunds the unsettled tasks past their
// expires_at; those with a Loop send task.failed. It returns the tasks it expired.
// One process sweeps at a time: while another holds the sweep (PostgreSQL's replicas),
// this one does nothing and returns none.
func (db *DB) ExpireTasks(ctx context.Context) ([]ExpiredTask, error) {
	var all []ExpiredTask
	for {
		batch, err := db.expireTasks(ctx)
		all = append(all, batch...)
		if err != nil || len(batch) < expireBatch {
			return all, err
		}
	}
}

func (db *DB) expireTasks(ctx context.Context) ([]ExpiredTask, error) {
	var expired []ExpiredTask
	err := db.Write(ctx, func(tx Tx) error {
		expired = nil
		if ok, err := tx.Hold(ctx, LockExpireTasks, false); err != nil || !ok {
			return err
		}
		now := db.now()
		var err error
		expired, err = failTasks(ctx, tx, now, TimedOut, `status IN ('queued', 'running') AND expires_at <= ?
			ORDER BY expires_at LIMIT ?`, ms(now), expireBatch)
		return err
	})
	if err != nil {
		return nil, err
	}
	return expired, nil
}

// failTasks fails the unsettled tasks that match where (a condition on tasks, with
// ORDER BY and LIMIT if wanted) with taskErr, refunds them and queues task.failed to
// their Loops, all in tx; it returns them. Tasks another transaction holds (one
// settling, on PostgreSQL) are passed over: they are settling already.
func failTasks(ctx context.Context, tx Tx, now time.Time, taskErr enrich.TaskError, where string, args ...any) ([]ExpiredTask, error) {
	body, err := json.Marshal(taskErr)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `UPDATE tasks SET status = 'failed', error = ?, finished_at = ?, lease_token = NULL, lease_until = NULL
		WHERE id IN (SELECT id FROM tasks WHERE `+where+` FOR UPDATE SKIP LOCKED) AND status IN ('queued', 'running')
		RETURNING id, object_type, credits_charged, loop_id`, append([]any{string(body), ms(now)}, args...)...)
	failed, err := collect(rows, err, func(row Row) (ExpiredTask, error) {
		var t ExpiredTask
		err := row.Scan(&t.ID, &t.ObjectType, &t.CreditsCharged, &t.LoopID)
		return t, err
	})
	if err != nil {
		return nil, err
	}
	for _, t := range failed {
		if err := refund(ctx, tx, t.ID, now); err != nil {
			return nil, err
		}
		if err := deliverSettled(ctx, tx, t.ID, t.LoopID, now); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

// RequeueAbandoned puts back in the queue the running tasks whose lease ran out: their
// worker died (a crash, a restart) without settling them. Those claimed
// MaxTaskAttempts times already are failed instead, refunded, and send task.failed to
// their Loop, in the same transaction; they are returned. One process sweeps at a
// time: while another holds the sweep, this one returns 0, nil.
func (db *DB) RequeueAbandoned(ctx context.Context) (requeued int, gaveUp []ExpiredTask, err error) {
	err = db.Write(ctx, func(tx Tx) error {
		requeued, gaveUp = 0, nil
		if ok, err := tx.Hold(ctx, LockRequeueAbandoned, false); err != nil || !ok {
			return err
		}
		now := db.now()
		rows, err := tx.Query(ctx, abandonedOrgsQuery, ms(now))
		orgs, err := collect(rows, err, func(row Row) (string, error) {
			var org string
			return org, row.Scan(&org)
		})
		if err != nil || len(orgs) == 0 {
			return err
		}
		// The organizations first, before the refunds below lock their grants: an
		// enqueue takes the organization and then the grants, and this must not hold
		// grants while it waits for an organization.
		if err := tx.LockOrgs(ctx, orgs...); err != nil {
			return err
		}
		gaveUp, err = failTasks(ctx, tx, now, GaveUp,
			`status = 'running' AND lease_until < ? AND attempts >= ?`, ms(now), MaxTaskAttempts)
		if err != nil {
			return err
		}
		requeued, err = db.requeue(ctx, tx, orgs, db.requeueAbandonedQuery, ms(now))
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return requeued, gaveUp, nil
}

// abandonedOrgsQuery lists the organizations of the running tasks whose lease ran out
// before a time. SQLite's planner, left to itself, walked every task's index entry
// for the DISTINCT, on the single writer at every sweep; the hint keeps it on the few
// running tasks (PostgreSQL's driver drops it).
const abandonedOrgsQuery = `SELECT DISTINCT org_id FROM tasks INDEXED BY tasks_running_lease
	WHERE status = 'running' AND lease_until < ?`

// abandonedWhere picks the running tasks whose lease ran out before a time.
const abandonedWhere = `status = 'running' AND lease_until < ?`

// RequeueAbandonedQuery is the statement that puts the abandoned tasks of n
// organizations back in the queue, for the drivers' tests of its plan: it takes the
// organizations (n rounded up to a power of two), then the time.
func (db *DB) RequeueAbandonedQuery(n int) string {
	in, _ := inList(make([]string, n))
	return db.requeueAbandonedQuery(in)
}

// requeueAbandonedQuery puts back the abandoned tasks of the organizations in (inList),
// walking the index of running tasks: SQLite's planner, left to itself, walks an
// organization's every task by the list's index to find the few running ones.
func (db *DB) requeueAbandonedQuery(in string) string {
	return requeueQuery(db.IndexedBy("tasks", "tasks_running_lease"), in, "", abandonedWhere)
}

// requeueQuery puts back the running tasks of table (tasks, or it with an index
// named) of the organizations in that match where, setting set too.
func requeueQuery(table, in, set, where string) string {
	return `UPDATE ` + table + ` SET status = 'queued', started_at = NULL, lease_token = NULL, lease_until = NULL` + set + `
		WHERE org_id IN ` + in + ` AND ` + where + ` RETURNING org_id`
}

// requeue runs query (a requeueQuery, given the organizations' placeholders) with
// args after the organizations', putting running tasks of orgs back in the queue and
// their organizations in line; it returns how many it put back. The organizations'
// rows are locked first, as an enqueue locks its own (see ClaimTask).
func (db *DB) requeue(ctx context.Context, tx Tx, orgs []string, query func(in string) string, args ...any) (int, error) {
	if err := tx.LockOrgs(ctx, orgs...); err != nil {
		return 0, err
	}
	in, inArgs := inList(orgs)
	rows, err := tx.Query(ctx, query(in), append(inArgs, args...)...)
	back, err := collect(rows, err, func(row Row) (string, error) {
		var org string
		return org, row.Scan(&org)
	})
	if err != nil || len(back) == 0 {
		return 0, err
	}
	joined := slices.Clone(back)
	slices.Sort(joined)
	for _, org := range slices.Compact(joined) {
		if err := db.joinQueue(ctx, tx, org); err != nil {
			return 0, err
		}
	}
	return len(back), tx.NotifyQueued(ctx)
}

// releaseQuery gives a claimed task back (its id and lease token follow the
// organization), its attempt undone: found by its id, it needs no index named.
func releaseQuery(in string) string {
	return requeueQuery("tasks", in, `, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END`,
		`id = ? AND lease_token = ? AND status = 'running'`)
}

// ReleaseTask puts a claimed task back in the queue untouched, for a worker that stops
// (a shutdown) before the task is done. The claim given back does not count as an
// attempt.
func (db *DB) ReleaseTask(ctx context.Context, c *Claim) error {
	return db.Write(ctx, func(tx Tx) error {
		_, err := db.requeue(ctx, tx, []string{c.OrgID}, releaseQuery, c.TaskID, c.Token)
		return err
	})
}

// QueueDepth counts the unsettled tasks by state, across organizations, from the
// counts the triggers keep: one row per organization and status, so the cost does not
// grow with the backlog.
func (db *DB) QueueDepth(ctx context.Context) (queued, running int64, err error) {
	err = db.Reader().QueryRow(ctx, queueDepthQuery).Scan(&queued, &running)
	return queued, running, err
}

const queueDepthQuery = `SELECT CAST(coalesce(sum(CASE status WHEN 'queued' THEN n END), 0) AS BIGINT),
	CAST(coalesce(sum(CASE status WHEN 'running' THEN n END), 0) AS BIGINT) FROM task_counts`
