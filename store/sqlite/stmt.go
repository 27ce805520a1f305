package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// stmtCache holds the prepared statements of one connection pool.
type stmtCache struct {
	pool    *sql.DB
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool // seen inside a transaction, to prepare once it ends
}

func newStmtCache(pool *sql.DB) *stmtCache {
	return &stmtCache{pool: pool, stmts: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// prepared returns the statement for query, preparing it on the pool if needed. It
// must not be called while the caller holds the pool's only connection.
func (c *stmtCache) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := c.get(query); st != nil {
		return st, nil
	}
	st, err := c.pool.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.stmts[query]; old != nil {
		st.Close()
		return old, nil
	}
	c.stmts[query] = st
	return st, nil
}

// later notes a query to prepare once the connection is free again. Scripts of several
// statements (migrations) are never prepared: only their first statement would be.
func (c *stmtCache) later(query string) {
	if strings.Contains(strings.TrimRight(strings.TrimSpace(query), ";"), ";") {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[query] = true
}

// preparePending prepares what transactions ran unprepared.
func (c *stmtCache) preparePending(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(c.pending))
	for q := range c.pending {
		queries = append(queries, q)
	}
	clear(c.pending)
	c.mu.Unlock()
	for _, q := range queries {
		// A query that cannot be prepared simply keeps running unprepared.
		c.prepared(ctx, q)
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}

// Tx is a transaction whose queries use the prepared statements of its pool.
type Tx struct {
	*sql.Tx
	cache *stmtCache
	// detached, when set, replaces the context of every statement: the transaction is
	// shared by a group commit and must not be interrupted by one caller.
	detached context.Context
	// bound holds the statements already bound to this transaction, shared by the
	// callers of a group commit.
	bound map[*sql.Stmt]*sql.Stmt
}

func (t *Tx) context(ctx context.Context) context.Context {
	if t.detached != nil {
		return t.detached
	}
	return ctx
}

func (t *Tx) stmt(ctx context.Context, query string) *sql.Stmt {
	st := t.cache.get(query)
	if st == nil {
		t.cache.later(query)
		return nil
	}
	// database/sql makes a new transaction-bound copy of the statement, and records
	// it until the transaction ends, on every call: once per transaction is enough.
	if bound := t.bound[st]; bound != nil {
		return bound
	}
	bound := t.Tx.StmtContext(ctx, st)
	if t.bound != nil {
		t.bound[st] = bound
	}
	return bound
}

func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = t.context(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = t.context(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = t.context(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// readPool is the reader pool, its queries prepared. Its queries are short and
// index-served, so they are not interrupted when the caller's context ends: watching a
// context costs the driver and database/sql a goroutine for every query.
type readPool struct {
	*sql.DB
	cache *stmtCache
}

func (p *readPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	st, err := p.cache.prepared(ctx, query)
	if err != nil {
		return p.DB.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (p *readPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	st, err := p.cache.prepared(ctx, query)
	if err != nil {
		return p.DB.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}
