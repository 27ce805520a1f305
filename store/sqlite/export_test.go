package sqlite

import "enrichd/store"

// What the tests of package store_test need to see inside the store.

// FindTasksQuery is the statement FindTasks runs for f, and its arguments.
func FindTasksQuery(orgID string, f TaskFilter, limit int) (string, []any) {
	return (&store.DB{Driver: (*DB)(nil)}).FindTasksQuery(orgID, f, limit)
}

// DashboardQueries are the literal statements of the dashboard's reads, by method, with
// arguments of the right types, for EXPLAIN QUERY PLAN.
var DashboardQueries = map[string]struct {
	Query string
	Args  []any
}{
	"TaskDeliveries": store.DeliveryStatements["TaskDeliveries"],
	"ListGrants":     {store.PlannedQueries["ListGrants"], []any{"o"}},
	"LedgerPage":     {store.PlannedQueries["LedgerPage"], []any{"o", int64(100), 50}},
	"DailyCredits":   {store.PlannedQueries["DailyCredits"], []any{"o", int64(20000), int64(20030)}},
	"CreditBalance":  {store.PlannedQueries["CreditBalance"], []any{"o"}},
	"ListKeys":       {store.PlannedQueries["ListKeys"], []any{"o"}},
}

// PlanQueries are statements whose plans the tests check, by name, with arguments of
// the right types.
var PlanQueries = map[string]struct {
	Query string
	Args  []any
}{
	"GetTask":           {store.TaskQueries["GetTask"], []any{"t", "o"}},
	"ListTasks":         {store.TaskQueries["ListTasks"], []any{"o", 50, 0}},
	"ListTasksByStatus": {store.TaskQueries["ListTasksByStatus"], []any{"o", "queued", 50, 0}},
	"ListTasksFailed":   {store.TaskQueries["ListTasksByStatus"], []any{"o", "failed", 50, 0}},
	"ListDeliveries":    store.DeliveryStatements["ListDeliveries"],
	"AbandonedOrgs":     {store.TaskQueries["AbandonedOrgs"], []any{int64(5)}},
	"Claim":             {unlocked(store.ClaimQuery), []any{int64(5), "t", int64(5), "o"}},
	"RequeueAbandoned":  {(&store.DB{Driver: (*DB)(nil)}).RequeueAbandonedQuery(2), []any{"o", "p", int64(5)}},
}

// WatchQueries are package store's statements of the watches, for EXPLAIN QUERY PLAN.
var WatchQueries = store.WatchQueries

// Unlocked is query as this driver runs it: without PostgreSQL's row locks.
func Unlocked(query string) string { return unlocked(query) }

// WaitKeyTouches waits for the writes of keys' last use under way.
func (db *DB) WaitKeyTouches() { db.touches.Wait() }

// KeyTouchesStarted counts the writes of keys' last use started since Open.
func (db *DB) KeyTouchesStarted() int64 { return db.touches.Started() }

// KeyReads counts the API keys Authenticate read from the database since Open.
func (db *DB) KeyReads() int64 { return db.keys.Reads() }

// ReopenWriter makes the writer open its connection anew after its next batch, as a
// write refused as read-only does.
func (db *DB) ReopenWriter() { db.reopenWriter() }

// EmptyKeyCache empties the key cache, as a commit of another process does.
func (db *DB) EmptyKeyCache() { db.keys.Invalidate() }

// MissQueries are package store's statements of the sources' misses, for EXPLAIN
// QUERY PLAN.
var MissQueries = store.MissQueries

// SpendQueries are package store's statements of the sources' spend and of the asks on
// the books, for EXPLAIN QUERY PLAN.
var SpendQueries = store.SpendQueries

// SuppressionQueries are package store's statements of the suppressions, for EXPLAIN
// QUERY PLAN.
var SuppressionQueries = store.SuppressionQueries

// ErasureQueries are package store's statements of the erasures, for EXPLAIN.
var ErasureQueries = store.ErasureQueries
