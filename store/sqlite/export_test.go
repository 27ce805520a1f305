package sqlite

// What the tests of package store_test need to see inside the store.

// FindTasksQuery is the statement FindTasks runs for f, and its arguments.
func FindTasksQuery(orgID string, f TaskFilter, limit int) (string, []any) {
	return findTasksQuery(orgID, f, limit)
}

// DashboardQueries are the literal statements of the dashboard's reads, by method, with
// arguments of the right types, for EXPLAIN QUERY PLAN.
var DashboardQueries = map[string]struct {
	Query string
	Args  []any
}{
	"TaskDeliveries": {taskDeliveriesQuery, []any{"t", "o", maxTaskDeliveries}},
	"ListGrants":     {listGrantsQuery, []any{"o"}},
	"LedgerPage":     {ledgerPageQuery, []any{"o", int64(100), 50}},
	"DailyCredits":   {dailyCreditsQuery, []any{"o", int64(20000), int64(20030)}},
	"CreditBalance":  {balanceQuery, []any{"o"}},
	"ListKeys":       {listKeysQuery, []any{"o"}},
}

// PlanQueries are statements whose plans the tests check, by name, with arguments of
// the right types.
var PlanQueries = map[string]struct {
	Query string
	Args  []any
}{
	"GetTask":           {getTaskQuery, []any{"t", "o"}},
	"ListTasks":         {listTasksQuery, []any{"o", 50, 0}},
	"ListTasksByStatus": {listTasksByStatusQuery, []any{"o", "queued", 50, 0}},
	"ListDeliveries":    {listDeliveriesQuery, []any{"l", 50, 0}},
}

// WatchQueries are the watches' list, count, scheduler and spend statements, by name,
// with arguments of the right types, for EXPLAIN QUERY PLAN.
var WatchQueries = map[string]struct {
	Query string
	Args  []any
}{
	"ListWatches":      {listWatchesQuery, []any{"o", 50, 0}},
	"ListLoopWatches":  {listLoopWatchesQuery, []any{"o", "l", 50, 0}},
	"CountWatches":     {countWatchesQuery, []any{"o"}},
	"CountLoopWatches": {countLoopWatchesQuery, []any{"o", "l"}},
	"DueWatches":       {dueWatchesQuery, []any{int64(5), 10, 200}},
	"WatchSpend":       {watchSpendQuery, []any{"o", int64(5)}},
}

// Unlocked is query as this driver runs it: without PostgreSQL's row locks.
func Unlocked(query string) string { return unlocked(query) }

// WaitKeyTouches waits for the writes of keys' last use under way.
func (db *DB) WaitKeyTouches() { db.touches.Wait() }

// KeyTouchesStarted counts the writes of keys' last use started since Open.
func (db *DB) KeyTouchesStarted() int64 { return db.touches.Started() }

// KeyReads counts the API keys Authenticate read from the database since Open.
func (db *DB) KeyReads() int64 { return db.keys.reads.Load() }

// ReopenWriter makes the writer open its connection anew after its next batch, as a
// write refused as read-only does.
func (db *DB) ReopenWriter() { db.reopenWriter() }
