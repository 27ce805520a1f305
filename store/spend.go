package store

import (
	"context"
	"strings"
	"time"

	"enrichd/enrich"
)

// SourceUse is what asks of one source came to: the asks by outcome (Hits, Misses,
// Errors), the requests they sent upstream (Calls) and the vendor credits those cost
// by the vendor's published price (Credits).
type SourceUse struct {
	Calls   int64 `json:"calls"`
	Hits    int64 `json:"hits"`
	Misses  int64 `json:"misses"`
	Errors  int64 `json:"errors"`
	Credits int64 `json:"vendor_credits"`
}

func (u *SourceUse) add(o SourceUse) {
	u.Calls += o.Calls
	u.Hits += o.Hits
	u.Misses += o.Misses
	u.Errors += o.Errors
	u.Credits += o.Credits
}

// UseOf is what one ask of a source, as the pipeline reports it, adds to its use: a
// skipped ask adds nothing.
func UseOf(call enrich.SourceCall) SourceUse {
	u := SourceUse{Calls: call.VendorCalls, Credits: call.Credits}
	switch call.Outcome {
	case enrich.OutcomeHit:
		u.Hits = 1
	case enrich.OutcomeMiss:
		u.Misses = 1
	case enrich.OutcomeError:
		u.Errors = 1
	}
	return u
}

// DayStart is the start of t's UTC day: spend is kept per organization, source and day.
func DayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// MonthStart is the start of t's UTC month: budgets are monthly.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// AddSourceSpend adds u to what source cost orgID on the UTC day of at, with the
// organization's own vendor key (own) or the installation's: one small write.
func (db *DB) AddSourceSpend(ctx context.Context, orgID, source string, own bool, at time.Time, u SourceUse) error {
	return db.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO source_spend (org_id, source, day, own_key, calls, hits, misses, errors, credits)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id, source, day, own_key) DO UPDATE SET
				calls = source_spend.calls + excluded.calls, hits = source_spend.hits + excluded.hits,
				misses = source_spend.misses + excluded.misses, errors = source_spend.errors + excluded.errors,
				credits = source_spend.credits + excluded.credits`,
			orgID, source, ms(DayStart(at)), boolInt(own), u.Calls, u.Hits, u.Misses, u.Errors, u.Credits)
		return err
	})
}

// SourceDay is one UTC day of a source's use by an organization, both keys together.
type SourceDay struct {
	Day time.Time `json:"day"`
	SourceUse
}

// SourceSpend is what one source cost an organization since a day: in all, the part
// made with its own vendor key, and day by day (oldest first, days without use left out).
type SourceSpend struct {
	Source string
	Total  SourceUse
	OwnKey SourceUse
	Days   []SourceDay
}

// SourceSpendSince returns what each source cost orgID since since (a UTC day's start),
// by source name. It reads the organization's rows of the primary key's range.
func (db *DB) SourceSpendSince(ctx context.Context, orgID string, since time.Time) (map[string]*SourceSpend, error) {
	type row struct {
		source string
		day    int64
		own    int
		use    SourceUse
	}
	r, err := db.Reader().Query(ctx, `SELECT source, day, own_key, calls, hits, misses, errors, credits
		FROM source_spend WHERE org_id = ? AND day >= ? ORDER BY source, day, own_key`, orgID, ms(since))
	rows, err := collect(r, err, func(r Row) (row, error) {
		var x row
		err := r.Scan(&x.source, &x.day, &x.own, &x.use.Calls, &x.use.Hits, &x.use.Misses, &x.use.Errors, &x.use.Credits)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]*SourceSpend{}
	for _, r := range rows {
		s := out[r.source]
		if s == nil {
			s = &SourceSpend{Source: r.source}
			out[r.source] = s
		}
		s.Total.add(r.use)
		if r.own == 1 {
			s.OwnKey.add(r.use)
		}
		day := fromMS(r.day)
		if n := len(s.Days); n > 0 && s.Days[n-1].Day.Equal(day) {
			s.Days[n-1].add(r.use)
		} else {
			s.Days = append(s.Days, SourceDay{Day: day, SourceUse: r.use})
		}
	}
	return out, nil
}

// Budget is a monthly cap of one source's vendor credits: an organization's, or the
// installation's (OrgID "").
type Budget struct {
	OrgID          string `json:"-"`
	Source         string `json:"source"`
	MonthlyCredits int64  `json:"monthly_credits"`
}

// MaxBudget bounds a budget: more than any vendor account holds.
const MaxBudget = int64(1) << 40

// SetSourceBudget sets the monthly cap of source's vendor credits for orgID ("": the
// installation's, over every organization's calls made with its keys). credits 0
// clears it; a negative cap, or one past MaxBudget, is refused.
func (db *DB) SetSourceBudget(ctx context.Context, orgID, source string, credits int64) error {
	source = strings.TrimSpace(source)
	switch {
	case source == "" || len(source) > 64:
		return enrich.Errorf(enrich.KindInvalid, "name the source, at most 64 characters")
	case credits < 0 || credits > MaxBudget:
		return enrich.Errorf(enrich.KindInvalid, "a budget is a whole number of vendor credits from 1 to %d, or 0 to clear it", MaxBudget)
	}
	return db.Write(ctx, func(tx Tx) error {
		if credits == 0 {
			_, err := tx.Exec(ctx, `DELETE FROM source_budgets WHERE org_id = ? AND source = ?`, orgID, source)
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO source_budgets (org_id, source, monthly_credits, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (org_id, source) DO UPDATE SET monthly_credits = excluded.monthly_credits, updated_at = excluded.updated_at`,
			orgID, source, credits, ms(db.now()))
		return err
	})
}

// SourceBudgets returns the budgets set for orgID and the installation's, each by
// source name.
func (db *DB) SourceBudgets(ctx context.Context, orgID string) (org, installation map[string]int64, err error) {
	r, err := db.Reader().Query(ctx, `SELECT org_id, source, monthly_credits FROM source_budgets
		WHERE org_id IN (?, '') ORDER BY org_id, source`, orgID)
	rows, err := collect(r, err, func(r Row) (Budget, error) {
		var b Budget
		err := r.Scan(&b.OrgID, &b.Source, &b.MonthlyCredits)
		return b, err
	})
	if err != nil {
		return nil, nil, err
	}
	org, installation = map[string]int64{}, map[string]int64{}
	for _, b := range rows {
		if b.OrgID == "" {
			installation[b.Source] = b.MonthlyCredits
		} else {
			org[b.Source] = b.MonthlyCredits
		}
	}
	return org, installation, nil
}

// BudgetState is what a source's budgets allow an organization's next ask: the caps
// the database holds (0: none) and the month's credits each counts.
type BudgetState struct {
	OrgCap, InstallationCap int64
	// OrgSpent are the organization's credits of the source this month, both keys;
	// InstallationSpent every organization's made with the installation's keys.
	OrgSpent, InstallationSpent int64
}

// SourceBudgetState reads source's budgets for orgID and, where one is set or
// counted (countInstallation: the installation has a cap the database does not hold),
// the month's credits since monthStart it is measured against, in one read. With no
// budget at all it is one lookup of the budgets' primary key.
func (db *DB) SourceBudgetState(ctx context.Context, orgID, source string, monthStart time.Time, countInstallation bool) (BudgetState, error) {
	var st BudgetState
	err := db.Read(ctx, func(q Executor) error {
		r, err := q.Query(ctx, `SELECT org_id, monthly_credits FROM source_budgets WHERE source = ? AND org_id IN (?, '')`, source, orgID)
		rows, err := collect(r, err, func(r Row) (Budget, error) {
			var b Budget
			err := r.Scan(&b.OrgID, &b.MonthlyCredits)
			return b, err
		})
		if err != nil {
			return err
		}
		for _, b := range rows {
			if b.OrgID == "" {
				st.InstallationCap = b.MonthlyCredits
			} else {
				st.OrgCap = b.MonthlyCredits
			}
		}
		if st.OrgCap > 0 {
			if err := q.QueryRow(ctx, `SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM source_spend WHERE org_id = ? AND source = ? AND day >= ?`,
				orgID, source, ms(monthStart)).Scan(&st.OrgSpent); err != nil {
				return err
			}
		}
		if st.InstallationCap > 0 || countInstallation {
			if err := q.QueryRow(ctx, `SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM source_spend INDEXED BY source_spend_installation
				WHERE source = ? AND day >= ? AND own_key = 0`, source, ms(monthStart)).Scan(&st.InstallationSpent); err != nil {
				return err
			}
		}
		return nil
	})
	return st, err
}
