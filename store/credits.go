package store

import (
	"time"
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
