package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"enrichd/enrich"
)

// Ledger row kinds.
const (
	LedgerGrant  = "grant"
	LedgerCharge = "charge"
	LedgerRefund = "refund"
	LedgerExpiry = "expiry"
)

// LedgerEntry is one row of an organization's append-only credit ledger.
type LedgerEntry struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	Amount    int64     `json:"amount"`
	GrantID   int64     `json:"grant_id"`
	TaskID    *string   `json:"task_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Balance is an organization's credits, with the ledger sums it is derived from.
type Balance struct {
	Balance int64 `json:"balance"`
	Granted int64 `json:"granted"`
	Charged int64 `json:"charged"`
	Refund  int64 `json:"refunded"`
	Expired int64 `json:"expired"`
}

// Grant is one grant of credits and what is left of it.
type Grant struct {
	ID        int64      `json:"id"`
	Amount    int64      `json:"amount"`
	Remaining int64      `json:"remaining"`
	ExpiresAt *time.Time `json:"expires_at"` // nil: never
	ExpiredAt *time.Time `json:"expired_at"` // when what was left of it was written off
	CreatedAt time.Time  `json:"created_at"`
}

// Ledger page bounds.
const (
	DefaultLedgerPage = 50
	MaxLedgerPage     = 1000
)

// CreditDay is what moved an organization's credits on one UTC day, by ledger kind.
type CreditDay struct {
	Day      time.Time `json:"day"` // midnight UTC
	Granted  int64     `json:"granted"`
	Charged  int64     `json:"charged"`
	Refunded int64     `json:"refunded"`
	Expired  int64     `json:"expired"`
}

// MaxCreditDays is the longest period DailyCredits reports.
const MaxCreditDays = 366

// msPerDay is a day as credit_days numbers days: milliseconds since the epoch divided
// by it (the trigger's integer division, which Go's truncates the same way).
const msPerDay = 24 * 60 * 60 * 1000

// CreditDays is the frame of a DailyCredits answer: days zero days, oldest first,
// ending with now's UTC day, and the numbers credit_days gives the first and the
// last, for the driver's query. Days outside 1 to MaxCreditDays are refused.
func CreditDays(days int, now time.Time) (out []CreditDay, first, last int64, err error) {
	if days < 1 || days > MaxCreditDays {
		return nil, 0, 0, enrich.Errorf(enrich.KindInvalid, "days must be 1 to %d", MaxCreditDays)
	}
	last = now.UnixMilli() / msPerDay
	first = last - int64(days) + 1
	out = make([]CreditDay, days)
	for i := range out {
		out[i].Day = time.UnixMilli((first + int64(i)) * msPerDay).UTC()
	}
	return out, first, last, nil
}

// Add counts amount moved by a ledger entry of kind on the day.
func (d *CreditDay) Add(kind string, amount int64) {
	switch kind {
	case LedgerGrant:
		d.Granted += amount
	case LedgerCharge:
		d.Charged += amount
	case LedgerRefund:
		d.Refunded += amount
	case LedgerExpiry:
		d.Expired += amount
	}
}

// LedgerPageBounds is what a LedgerPage(beforeID, limit) reads: rows before the id
// (0: from the newest), at most limit (0: DefaultLedgerPage; past MaxLedgerPage, that).
func LedgerPageBounds(beforeID int64, limit int) (int64, int, error) {
	if beforeID < 0 {
		return 0, 0, enrich.Errorf(enrich.KindInvalid, "a ledger page starts before a row id, which is positive")
	}
	if beforeID == 0 {
		beforeID = math.MaxInt64
	}
	switch {
	case limit <= 0:
		limit = DefaultLedgerPage
	case limit > MaxLedgerPage:
		limit = MaxLedgerPage
	}
	return beforeID, limit, nil
}

// Every step that changes a grant's remaining credits (charge, refund, expiry) first
// locks the grant rows it reads, FOR UPDATE, in one order for all of them
// (grantOrder). On PostgreSQL, with many writers, a charge that read the grants and
// then updated them could otherwise spend the same credit twice: two charges of one
// organization run one after the other, the second reading what the first left, and
// never deadlock on each other. SQLite's single writer needs no lock and drops the
// clause. The ledger stays append-only and the source of truth; credit_days, kept by a
// trigger, is its sums.

// grantOrder is the order grants are charged in, the ones that expire first first,
// and the order every transaction locks them in.
const grantOrder = `ORDER BY expires_at IS NULL, expires_at, id`

// The statements of the credits' reads whose plans the drivers' tests check.
const (
	lockGrantsQuery = `SELECT id, remaining, expires_at FROM credit_grants
		WHERE org_id = ? AND expired_at IS NULL ` + grantOrder + ` FOR UPDATE`
	// balanceQuery derives the balance from the ledger alone, through its sums per day
	// in credit_days: the trigger that keeps them adds every ledger row as it is
	// appended, so they add up to the same, and reading a row per day and kind costs
	// the same for an organization with millions of charges as for one with ten,
	// where summing the ledger itself read every row (60 ms on the overview at 100,000
	// charges). The casts keep PostgreSQL's sums of BIGINT from being NUMERIC.
	balanceQuery = `SELECT
		CAST(coalesce(sum(CASE kind WHEN 'grant' THEN amount END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE kind WHEN 'charge' THEN amount END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE kind WHEN 'refund' THEN amount END), 0) AS BIGINT),
		CAST(coalesce(sum(CASE kind WHEN 'expiry' THEN amount END), 0) AS BIGINT)
		FROM credit_days WHERE org_id = ?`
	ledgerColumns   = `id, kind, amount, grant_id, task_id, created_at`
	ledgerPageQuery = `SELECT ` + ledgerColumns + `
		FROM credit_ledger WHERE org_id = ? AND id < ? ORDER BY id DESC LIMIT ?`
	listGrantsQuery = `SELECT id, amount, remaining, expires_at, expired_at, created_at
		FROM credit_grants WHERE org_id = ? ORDER BY id DESC`
	dailyCreditsQuery = `SELECT day, kind, amount FROM credit_days WHERE org_id = ? AND day >= ? AND day <= ? ORDER BY day`
)

// PlannedQueries are the statements of the keys' and credits' reads, by operation, for
// the drivers' tests of their query plans: written in this package, run on every
// engine.
var PlannedQueries = map[string]string{
	"ListKeys":      listKeysQuery,
	"ListGrants":    listGrantsQuery,
	"LedgerPage":    ledgerPageQuery,
	"DailyCredits":  dailyCreditsQuery,
	"CreditBalance": balanceQuery,
	"lockGrants":    lockGrantsQuery,
}

// GrantCredits adds a grant of amount credits to the organization, expiring at
// expiresAt when it is not nil.
func (db *DB) GrantCredits(ctx context.Context, orgName string, amount int64, expiresAt *time.Time) (int64, error) {
	if amount <= 0 {
		return 0, enrich.Errorf(enrich.KindInvalid, "amount must be a positive number of credits")
	}
	var grantID int64
	err := db.Write(ctx, func(tx Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		now := db.now()
		if err := tx.QueryRow(ctx, `INSERT INTO credit_grants (org_id, amount, remaining, expires_at, created_at)
			VALUES (?, ?, ?, ?, ?) RETURNING id`, org.ID, amount, amount, nullMS(expiresAt), ms(now)).Scan(&grantID); err != nil {
			return err
		}
		if err := appendLedger(ctx, tx, org.ID, LedgerGrant, amount, grantID, nil, now); err != nil {
			return err
		}
		_, err = expireGrants(ctx, tx, org.ID, now)
		return err
	})
	return grantID, err
}

// CreditBalance returns the organization's balance after writing off expired grants.
func (db *DB) CreditBalance(ctx context.Context, orgName string) (Balance, error) {
	var b Balance
	err := db.Write(ctx, func(tx Tx) error {
		org, err := findOrg(ctx, tx, orgName)
		if err != nil {
			return err
		}
		if _, err := expireGrants(ctx, tx, org.ID, db.now()); err != nil {
			return err
		}
		b, err = balance(ctx, tx, org.ID)
		return err
	})
	if IsStorageFault(err) {
		// A disk that takes no writes refuses the write-off, not the balance: what is
		// left of the grants past their expiry counts as expired all the same, read
		// without writing, so the balance is shown while writes fail.
		return db.balanceWithoutWriteOff(ctx, orgName)
	}
	return b, err
}

// balanceWithoutWriteOff is the balance CreditBalance would write off and read, read
// alone: the grants past their expiry not written off yet count as expired.
func (db *DB) balanceWithoutWriteOff(ctx context.Context, orgName string) (Balance, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return Balance{}, err
	}
	b, err := balance(ctx, db.Reader(), org.ID)
	if err != nil {
		return Balance{}, err
	}
	var lapsed int64
	if err := db.Reader().QueryRow(ctx, `SELECT CAST(coalesce(sum(remaining), 0) AS BIGINT) FROM credit_grants
		WHERE org_id = ? AND expired_at IS NULL AND expires_at <= ?`, org.ID, ms(db.now())).Scan(&lapsed); err != nil {
		return Balance{}, err
	}
	b.Expired += lapsed
	b.Balance -= lapsed
	return b, nil
}

// CreditLedger lists the organization's ledger, oldest first.
func (db *DB) CreditLedger(ctx context.Context, orgName string) ([]LedgerEntry, error) {
	org, err := db.FindOrg(ctx, orgName)
	if err != nil {
		return nil, err
	}
	rows, err := db.Reader().Query(ctx, `SELECT `+ledgerColumns+` FROM credit_ledger WHERE org_id = ? ORDER BY id`, org.ID)
	return orEmpty(collect(rows, err, scanLedger))
}

// ListGrants returns the organization's grants, newest first. Grants past their expiry
// are written off by the next charge or balance, not here: a read changes nothing.
func (db *DB) ListGrants(ctx context.Context, orgID string) ([]Grant, error) {
	rows, err := db.Reader().Query(ctx, listGrantsQuery, orgID)
	return orEmpty(collect(rows, err, func(r Row) (Grant, error) {
		var g Grant
		var expires, expired sql.NullInt64
		var created int64
		err := r.Scan(&g.ID, &g.Amount, &g.Remaining, &expires, &expired, &created)
		g.ExpiresAt, g.ExpiredAt, g.CreatedAt = fromNullMS(expires), fromNullMS(expired), fromMS(created)
		return g, err
	}))
}

// LedgerPage returns up to limit rows of the organization's ledger, newest first, from
// the row before beforeID (0: from the newest). The next page starts before the last
// row's ID. limit 0 means DefaultLedgerPage; more than MaxLedgerPage means the most.
func (db *DB) LedgerPage(ctx context.Context, orgID string, beforeID int64, limit int) ([]LedgerEntry, error) {
	beforeID, limit, err := LedgerPageBounds(beforeID, limit)
	if err != nil {
		return nil, err
	}
	rows, err := db.Reader().Query(ctx, ledgerPageQuery, orgID, beforeID, limit)
	return orEmpty(collect(rows, err, scanLedger))
}

// DailyCredits returns one entry per UTC day for the days days ending with now's,
// oldest first, days without movement included as zeros. It reads credit_days, which
// a trigger keeps beside the ledger: a handful of rows a day, however busy the day was.
func (db *DB) DailyCredits(ctx context.Context, orgID string, days int, now time.Time) ([]CreditDay, error) {
	out, first, last, err := CreditDays(days, now)
	if err != nil {
		return nil, err
	}
	rows, err := db.Reader().Query(ctx, dailyCreditsQuery, orgID, first, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var day, amount int64
		var kind string
		if err := rows.Scan(&day, &kind, &amount); err != nil {
			return nil, err
		}
		out[day-first].Add(kind, amount)
	}
	return out, rows.Err()
}

// scanLedger reads a ledger row selected as ledgerColumns.
func scanLedger(r Row) (LedgerEntry, error) {
	var e LedgerEntry
	var created int64
	err := r.Scan(&e.ID, &e.Kind, &e.Amount, &e.GrantID, &e.TaskID, &created)
	e.CreatedAt = fromMS(created)
	return e, err
}

// orEmpty makes an empty list an empty slice, which JSON shows as [] rather than null.
func orEmpty[T any](out []T, err error) ([]T, error) {
	if out == nil && err == nil {
		out = []T{}
	}
	return out, err
}

// balance derives the balance from the ledger's sums per day (see balanceQuery).
func balance(ctx context.Context, q Executor, orgID string) (Balance, error) {
	var b Balance
	err := q.QueryRow(ctx, balanceQuery, orgID).Scan(&b.Granted, &b.Charged, &b.Refund, &b.Expired)
	b.Balance = b.Granted - b.Charged + b.Refund - b.Expired
	return b, err
}

func appendLedger(ctx context.Context, tx Tx, orgID, kind string, amount, grantID int64, taskID *string, now time.Time) error {
	return tx.ExecLater(ctx, `INSERT INTO credit_ledger (org_id, kind, amount, grant_id, task_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, orgID, kind, amount, grantID, taskID, ms(now))
}

// liveGrant is an unexpired grant, read under its row lock.
type liveGrant struct {
	id        int64
	remaining int64
	expiresAt *int64
}

// expireGrants locks the organization's unexpired grants, writes off what is left of
// those past their expiry, and returns the others, still locked, in grantOrder.
func expireGrants(ctx context.Context, tx Tx, orgID string, now time.Time) ([]liveGrant, error) {
	grants, err := askGrants(ctx, tx, orgID)
	if err == nil {
		err = tx.Flush(ctx)
	}
	if err != nil {
		return nil, err
	}
	return expireAsked(ctx, tx, orgID, *grants, now)
}

// askGrants asks for the organization's unexpired grants in grantOrder
// (Tx.QueryLater), to be read with the transaction's next statement and locked from
// then to its end; they are there once Tx.Flush has returned.
func askGrants(ctx context.Context, tx Tx, orgID string) (*[]liveGrant, error) {
	var grants []liveGrant
	err := tx.QueryLater(ctx, func(r Row) error {
		var g liveGrant
		err := r.Scan(&g.id, &g.remaining, &g.expiresAt)
		grants = append(grants, g)
		return err
	}, lockGrantsQuery, orgID)
	return &grants, err
}

// expireAsked is expireGrants on the grants askGrants read.
func expireAsked(ctx context.Context, tx Tx, orgID string, grants []liveGrant, now time.Time) ([]liveGrant, error) {
	live := grants[:0]
	for _, g := range grants {
		if g.expiresAt == nil || *g.expiresAt > ms(now) {
			live = append(live, g)
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE credit_grants SET expired_at = ?, remaining = 0 WHERE id = ?`, ms(now), g.id); err != nil {
			return nil, err
		}
		if g.remaining > 0 {
			if err := appendLedger(ctx, tx, orgID, LedgerExpiry, g.remaining, g.id, nil, now); err != nil {
				return nil, err
			}
		}
	}
	return live, nil
}

// charge takes cost credits for the task taskID from the organization's unexpired
// grants, read by askGrants, the ones that expire first first, or fails with 402
// (insufficient_credits, or credits_expired when an expiry was the last thing to take
// credits away), having changed nothing but the write-off of expired grants, which the
// caller's refusal rolls back with the rest. The grants stay locked until tx ends, so
// a concurrent charge of the same organization waits and then sees what this one
// left: the last credit is spent once.
func charge(ctx context.Context, tx Tx, asked []liveGrant, orgID, taskID string, cost int64, now time.Time) error {
	grants, err := expireAsked(ctx, tx, orgID, asked, now)
	if err != nil {
		return err
	}
	type take struct{ grant, amount int64 }
	var takes []take
	var available int64
	for _, g := range grants {
		if available >= cost {
			break
		}
		if g.remaining <= 0 {
			continue
		}
		n := min(g.remaining, cost-available)
		takes = append(takes, take{g.id, n})
		available += n
	}
	if available < cost {
		return insufficientCredits(ctx, tx, orgID, cost, available)
	}
	for _, t := range takes {
		if err := tx.ExecLater(ctx, `UPDATE credit_grants SET remaining = remaining - ? WHERE id = ?`, t.amount, t.grant); err != nil {
			return err
		}
		if err := appendLedger(ctx, tx, orgID, LedgerCharge, t.amount, t.grant, &taskID, now); err != nil {
			return err
		}
	}
	return nil
}

// insufficientCredits builds the 402: credits_expired when the last thing that took
// credits away was an expiry, insufficient_credits otherwise. remaining is what the
// unexpired grants still hold, which is the balance.
func insufficientCredits(ctx context.Context, q Executor, orgID string, cost, remaining int64) error {
	var lastKind string
	err := q.QueryRow(ctx, `SELECT kind FROM credit_ledger
		WHERE org_id = ? AND kind IN ('charge', 'expiry') AND amount > 0 ORDER BY id DESC LIMIT 1`, orgID).Scan(&lastKind)
	if err != nil && !errors.Is(err, ErrNoRows) {
		return err
	}
	e := &enrich.Error{Kind: enrich.KindPaymentRequired, CreditsRemaining: &remaining}
	if lastKind == LedgerExpiry {
		e.Code = "credits_expired"
		e.Message = fmt.Sprintf("your credits have expired: this request costs %d and %d remain; ask for a new grant", cost, remaining)
	} else {
		e.Code = "insufficient_credits"
		e.Message = fmt.Sprintf("not enough credits: this request costs %d and %d remain; ask for a new grant", cost, remaining)
	}
	return e
}

// refund gives back what the task taskID was charged and not yet refunded, to the
// grants it was taken from, in grant id order. Credits returned to a grant that has
// expired in the meantime expire at once, so the balance never counts them. The
// grants are locked first (Tx.LockTaskGrants, in grantOrder, as a charge locks them),
// before their expiry is looked at, so an expiry running at the same time cannot write
// off a grant and then see credits come back to it. The caller holds the task's row,
// which keeps a second refund of the same task waiting until this one is committed and
// then finding nothing left to give back.
func refund(ctx context.Context, tx Tx, taskID string, now time.Time) error {
	if err := tx.LockTaskGrants(ctx, taskID); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT l.org_id, l.grant_id, g.expired_at IS NOT NULL,
			sum(CASE l.kind WHEN 'charge' THEN l.amount ELSE 0 END) - sum(CASE l.kind WHEN 'refund' THEN l.amount ELSE 0 END)
		FROM credit_ledger l JOIN credit_grants g ON g.id = l.grant_id
		WHERE l.task_id = ? GROUP BY l.org_id, l.grant_id, g.expired_at ORDER BY l.grant_id`, taskID)
	type back struct {
		org     string
		grant   int64
		expired bool
		amount  int64
	}
	backs, err := collect(rows, err, func(r Row) (back, error) {
		var b back
		err := r.Scan(&b.org, &b.grant, &b.expired, &b.amount)
		return b, err
	})
	if err != nil {
		return err
	}
	for _, b := range backs {
		if b.amount <= 0 {
			continue
		}
		if err := appendLedger(ctx, tx, b.org, LedgerRefund, b.amount, b.grant, &taskID, now); err != nil {
			return err
		}
		if b.expired {
			if err := appendLedger(ctx, tx, b.org, LedgerExpiry, b.amount, b.grant, &taskID, now); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE credit_grants SET remaining = remaining + ? WHERE id = ?`, b.amount, b.grant); err != nil {
			return err
		}
	}
	return nil
}
