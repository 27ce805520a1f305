package sqlite

import "enrichd/store"

// The facade's types, constants and variables under their own names, so that the SQL
// of this driver reads as it did when it was the store itself.

type (
	APIKey      = store.APIKey
	Attempt     = store.Attempt
	Attempted   = store.Attempted
	Balance     = store.Balance
	Claim       = store.Claim
	CreditDay   = store.CreditDay
	Delivery    = store.Delivery
	Destination = store.Destination
	Dispatch    = store.Dispatch
	Enqueued    = store.Enqueued
	ExpiredTask = store.ExpiredTask
	Grant       = store.Grant
	ImportStats = store.ImportStats
	LedgerEntry = store.LedgerEntry
	Loop        = store.Loop
	LoopPatch   = store.LoopPatch
	NewLoop     = store.NewLoop
	NewTask     = store.NewTask
	ObjectSpace = store.ObjectSpace
	Option      = store.Option
	Options     = store.Options
	Org         = store.Org
	Outcome     = store.Outcome
	Principal   = store.Principal
	Purged      = store.Purged
	Space       = store.Space
	Task        = store.Task
	TaskCursor  = store.TaskCursor
	TaskFilter  = store.TaskFilter
	User        = store.User
)

const (
	CodeStorageUnavailable = store.CodeStorageUnavailable
	DefaultCacheSize       = store.DefaultCacheSize
	DefaultLedgerPage      = store.DefaultLedgerPage
	DefaultTaskPage        = store.DefaultTaskPage
	DeliveryFailed         = store.DeliveryFailed
	DeliveryPending        = store.DeliveryPending
	DeliverySucceeded      = store.DeliverySucceeded
	EventTaskFailed        = store.EventTaskFailed
	EventTaskSucceeded     = store.EventTaskSucceeded
	EventTest              = store.EventTest
	LedgerCharge           = store.LedgerCharge
	LedgerExpiry           = store.LedgerExpiry
	LedgerGrant            = store.LedgerGrant
	LedgerRefund           = store.LedgerRefund
	MaxCacheSize           = store.MaxCacheSize
	MaxCreditDays          = store.MaxCreditDays
	MaxEmail               = store.MaxEmail
	MaxLedgerPage          = store.MaxLedgerPage
	MaxReaders             = store.MaxReaders
	MaxTaskAttempts        = store.MaxTaskAttempts
	MaxTaskPage            = store.MaxTaskPage
	RoleAdmin              = store.RoleAdmin
	RoleViewer             = store.RoleViewer
	SetupLinkTTL           = store.SetupLinkTTL
	StatusCanceled         = store.StatusCanceled
	StatusFailed           = store.StatusFailed
	StatusQueued           = store.StatusQueued
	StatusRunning          = store.StatusRunning
	StatusSucceeded        = store.StatusSucceeded
	StorageLogInterval     = store.StorageLogInterval
	StorageRetryAfter      = store.StorageRetryAfter
)

var (
	ErrBackupExists = store.ErrBackupExists
	MaxAttempts     = store.MaxAttempts
	RetrySchedule   = store.RetrySchedule
)
