package store

import (
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
