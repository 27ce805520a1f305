// Package sqlite is the store's driver for one SQLite file, the default engine. It
// runs package store's statements (exec.go: prepared, their PostgreSQL row locks
// dropped), runs a write transaction its way (the single writer below), provides the
// primitives of store.Driver and store.Tx that differ by engine, and keeps the file
// itself: its migrations (the root schema.sql, applied by store.Migrate), backups,
// checkpoints, free space, page caches, and the key cache's view of other processes'
// writes. It composes no operation: those are package store's.
//
// All writes go through one connection whose transactions begin IMMEDIATE, and one
// writer goroutine that commits them in groups, so writers queue in Go instead of
// failing with SQLITE_BUSY; reads use a separate pool. That single writer is what
// makes a charge, a queue position or an idempotency check safe here without row
// locks; store/postgres says the same things with locks.
package sqlite

import (
	"context"
	"database/sql"
	"enrichd/store"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is the enrichd database.
type DB struct {
	write  *sql.DB
	read   *readPool
	reader store.Executor // read as an Executor, made once: boxed anew, it cost every read an allocation
	writes *stmtCache
	dsn    func(extra ...string) string // the connection string of the file, with the pragmas every connection sets
	path   string                       // the database file

	known int // migrations in the schema this binary embeds

	store.Health             // storage failures, and the probe write (probeWrite)
	reopen       atomic.Bool // the writer's connection is to be opened anew (reopenWriter)
	// writerEpoch counts the writer's connections closed by reopenIfAsked.
	writerEpoch atomic.Int64
	touches     store.KeyTouches       // keys' last use being written
	keys        store.KeyCache         // valid keys by the hash of their token
	suppressed  store.SuppressionCache // organizations' suppressions, by the hash of their subject

	ops        chan *writeOp // transactions waiting for the writer
	closing    chan struct{}
	closeOnce  sync.Once
	writerDone chan struct{}
	watchDone  chan struct{} // watchForeignWrites has returned
	// checkpointDone is closed when checkpointLoop has returned; commits counts the
	// writer's commits, which tell it there is something to copy.
	checkpointDone chan struct{}
	checkpointer   *sql.DB // the connection of checkpointLoop, and of makeHeadroom
	commits        atomic.Int64
	// checkpoints and checkpointNanos count the checkpoints run and their time;
	// restartWAL asks the writer to finish one itself (finishCheckpointIfAsked).
	checkpoints, checkpointNanos, writerCheckpointNanos atomic.Int64
	restartWAL                                          atomic.Bool
	// restartAt is walRestartAt, but for tests; logCopied counts the writer's
	// checkpoints that copied the whole log.
	restartAt, logCopied atomic.Int64
	// grouped counts the transactions callers handed to the writer that it committed
	// or rolled back; with commits, how many a commit carries on average.
	grouped atomic.Int64

	// Now is the clock of every timestamp the store writes; tests move it.
	Now func() time.Time
}

// Open opens (creating if needed) the database file at path and applies the pending
// migrations of schema, the text of schema.sql. The options size its page caches and
// its reader pool; without them it takes DefaultCacheSize and DefaultReaders.
func Open(ctx context.Context, path, schema string, now func() time.Time, opts ...Option) (*DB, error) {
	if now == nil {
		now = time.Now
	}
	if path == "" {
		return nil, fmt.Errorf("no database path")
	}
	o, err := store.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	writerKiB, readerKiB := cacheSplit(o)
	// The file holds the Loops' signing secrets: it is created readable by its owner
	// only (SQLite gives its -wal and -shm files the same permissions).
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("cannot create the database %s: %w", path, store.StripPath(err))
	}
	pragmas := []string{"foreign_keys(ON)", "synchronous(NORMAL)"}
	dsn := func(extra ...string) string {
		q := url.Values{}
		// A busy timeout among extra replaces the default one: the driver runs the two
		// in no set order.
		if !slices.ContainsFunc(extra, func(p string) bool { return strings.HasPrefix(p, "busy_timeout") }) {
			q.Add("_pragma", "busy_timeout(10000)")
		}
		for _, p := range append(pragmas, extra...) {
			q.Add("_pragma", p)
		}
		return "file:" + path + "?" + q.Encode()
	}
	// The writer checkpoints nothing itself: checkpointLoop does, off its path. Its
	// statement journal stays in memory (temp_store): group commit runs each caller's
	// writes in a savepoint, which copies every page it changes to that journal first,
	// and on disk those copies were a third of the writer's time, most of them in a
	// temporary file opened anew for each batch.
	//
	// The writer overwrites what it deletes with zeros (secure_delete): an erasure, or
	// retention, leaves no byte of what it removed in the file's free space once the
	// log is checkpointed (Scrub). It costs a store hit nothing measurable (the
	// concurrent store-hit benchmark, on and off in turn: within the machine's noise).
	write, err := sql.Open("sqlite", dsn("journal_mode(WAL)", "journal_size_limit("+strconv.Itoa(walFileLimit)+")", "wal_autocheckpoint(0)",
		"temp_store(MEMORY)", "secure_delete(ON)", cacheSize(writerKiB))+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("cannot open the database %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	db := &DB{write: write, writes: newStmtCache(write), dsn: dsn, path: path, Now: now,
		ops: make(chan *writeOp, maxBatch), closing: make(chan struct{}), writerDone: make(chan struct{}), watchDone: make(chan struct{}), checkpointDone: make(chan struct{})}
	db.restartAt.Store(walRestartAt)
	db.Health.Init(func() time.Time { return db.Now() }, db.probeWrite)
	// The writer connection turns WAL on before any reader opens the file.
	if err := db.migrate(ctx, schema); err != nil {
		write.Close()
		return nil, err
	}
	// The migrations of a new file write its whole schema to the log, several times
	// over: copied to the file now, it does not hold a small disk's space until the
	// first checkpoint. Failing here is left to the first write to report.
	write.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	read, err := sql.Open("sqlite", dsn("query_only(1)", cacheSize(readerKiB)))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("cannot open the database %s: %w", path, err)
	}
	read.SetMaxOpenConns(o.Readers)
	read.SetMaxIdleConns(o.Readers)
	read.SetConnMaxIdleTime(readerIdle)
	db.read = &readPool{DB: read, cache: newStmtCache(read)}
	db.reader = readExec{db.read}
	version, err := db.dataVersion()
	if err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("cannot read the database %s: %w", path, err)
	}
	// A checkpoint copies frames from the log to the file without the page cache.
	// It waits for readers and the writer a little only: it is tried again next second.
	checkpointer, err := sql.Open("sqlite", dsn(cacheSize(256), "busy_timeout(100)"))
	if err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("cannot open the database %s: %w", path, err)
	}
	checkpointer.SetMaxOpenConns(1)
	db.checkpointer = checkpointer
	go db.writeLoop()
	go db.watchForeignWrites(version)
	go db.checkpointLoop(checkpointer)
	return db, nil
}

// Close closes both connection pools.
func (db *DB) Close() error {
	if db.read != nil { // the writer runs once Open has succeeded
		db.touches.Close() // they need the writer
		db.closeOnce.Do(func() { close(db.closing) })
		<-db.writerDone
		<-db.watchDone
		<-db.checkpointDone
	}
	db.writes.close()
	err := db.write.Close()
	if db.read != nil {
		db.read.cache.close()
		if rerr := db.read.Close(); err == nil {
			err = rerr
		}
	}
	return err
}

// now is the store's clock at the millisecond precision it stores, so what a call
// returns equals what a later read of the same row gives.
func (db *DB) now() time.Time { return db.Now().UTC().Truncate(time.Millisecond) }

func (db *DB) migrate(ctx context.Context, schema string) error {
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, title TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("database %s: creating the migrations table: %w", db.path, err)
	}
	known, err := store.Migrate(ctx, schema, db.now, func(fn func(store.Executor, func(string) error) error) error {
		return db.runTx(ctx, func(tx *Tx) error {
			return fn(txExec{tx}, func(script string) error { _, err := tx.ExecContext(ctx, script); return err })
		})
	})
	if err != nil {
		return fmt.Errorf("database %s: %w", db.path, err)
	}
	db.known = known
	return nil
}

// KnownMigrations is how many migrations the schema given to Open has.
func (db *DB) KnownMigrations() int { return db.known }

// inTx runs fn in a write transaction on the single writer: its changes are committed
// when fn returns nil and undone otherwise. Transactions that arrive while the writer
// is busy are committed together (group commit), each inside its own savepoint, so one
// that fails undoes only its own changes; their statements ignore the callers'
// cancellation, which would otherwise interrupt, and so roll back, the shared
// transaction. fn must not call inTx. A write the file cannot take (see storageFault)
// fails with a storage_unavailable *enrich.Error.
func (db *DB) inTx(ctx context.Context, fn func(*Tx) error) error {
	return db.storageChecked(db.write1(ctx, fn))
}

// write1 is inTx without the translation of storage faults.
func (db *DB) write1(ctx context.Context, fn func(*Tx) error) error {
	select {
	case <-db.closing:
		return errClosed
	default:
	}
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case db.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-db.closing:
		return errClosed
	}
	// Wait even if ctx ends meanwhile: fn may be running.
	select {
	case err := <-op.done:
		return err
	case <-db.writerDone:
		// The writer answers every transaction it takes before it stops.
		select {
		case err := <-op.done:
			return err
		default:
			return errClosed
		}
	}
}

var errClosed = errors.New("the database is closed")

// maxBatch is the most transactions committed together.
const maxBatch = 128

type writeOp struct {
	ctx  context.Context
	fn   func(*Tx) error
	done chan error
}

// writeLoop is the writer: it takes what is waiting, commits it, and goes back for more.
func (db *DB) writeLoop() {
	defer close(db.writerDone)
	// A profile tells the writer's time from the rest of the process by this label
	// (go tool pprof -tagfocus enrichd=writer): on two cores, the one goroutine that
	// every write waits for is what to measure first.
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("enrichd", "writer")))
	for {
		var batch []*writeOp
		select {
		case op := <-db.ops:
			batch = append(batch, op)
		case <-db.closing:
			return
		}
		batch = db.gather(batch)
		if len(batch) < maxBatch {
			// The requests a commit has just answered, and the ones arriving, are
			// runnable but not yet queued here: given the processor once, they hand
			// their writes over and this commit carries them (about 13 hits a commit at
			// 32 clients, against 4 without). A writer with nothing else runnable
			// gets the processor straight back, so a lone write waits no longer.
			runtime.Gosched()
			batch = db.gather(batch)
		}
		db.commit(batch, db.makeHeadroom())
		db.reopenIfAsked()
		db.finishCheckpointIfAsked()
		db.writes.preparePending(context.Background())
	}
}

// gather adds to batch the transactions waiting, up to maxBatch.
func (db *DB) gather(batch []*writeOp) []*writeOp {
	for len(batch) < maxBatch {
		select {
		case op := <-db.ops:
			batch = append(batch, op)
		default:
			return batch
		}
	}
	return batch
}

// WriteStats are the writer's totals since Open: transactions handed to it, and
// commits it made (fewer when group commit carries several in one).
func (db *DB) WriteStats() (transactions, commits int64) {
	return db.grouped.Load(), db.commits.Load()
}

// commit runs batch in one transaction, or, if there is a single op, in its own. With
// cramped set (the disk lacks the room makeHeadroom keeps), a transaction that changed
// a row is rolled back with that error, and one that changed nothing commits, as it
// would on a full disk.
func (db *DB) commit(batch []*writeOp, cramped error) {
	db.grouped.Add(int64(len(batch)))
	if len(batch) == 1 {
		op := batch[0]
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			return
		}
		op.done <- db.runTxWithin(context.WithoutCancel(op.ctx), store.Guarded(op.fn), cramped)
		return
	}
	errs := make([]error, len(batch))
	err := db.runTxWithin(context.Background(), func(tx *Tx) error {
		bg := context.Background()
		for i, op := range batch {
			if errs[i] = op.ctx.Err(); errs[i] != nil {
				continue
			}
			// Through tx, so that the three statements are prepared once, not parsed for
			// every transaction of every batch.
			if _, err := tx.ExecContext(bg, `SAVEPOINT op`); err != nil {
				return err
			}
			errs[i] = store.Guarded(op.fn)(&Tx{Tx: tx.Tx, cache: tx.cache, detached: context.WithoutCancel(op.ctx), bound: tx.bound})
			if errs[i] != nil {
				if _, err := tx.ExecContext(bg, `ROLLBACK TO op`); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(bg, `RELEASE op`); err != nil {
				return err
			}
		}
		return nil
	}, cramped)
	for i, op := range batch {
		if err != nil && errs[i] == nil {
			errs[i] = err // nothing of the batch was committed
		}
		op.done <- errs[i]
	}
}

// runTx runs fn in a transaction of its own. Its statements run on ctx, whatever
// context fn passes them: a caller gives up on a write by not starting it, never by
// interrupting it (which also costs every statement a goroutine that waits for ctx).
func (db *DB) runTx(ctx context.Context, fn func(*Tx) error) error {
	return db.runTxWithin(ctx, fn, nil)
}

// runTxWithin is runTx on a disk that lacks room (cramped, see commit) if cramped is
// not nil.
func (db *DB) runTxWithin(ctx context.Context, fn func(*Tx) error, cramped error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting a database transaction: %w", err)
	}
	defer tx.Rollback()
	// While the file fails, a commit that changed rows proves it takes writes again. One
	// that changed none proves nothing: it writes no page, and commits on a full disk.
	before := int64(-1)
	if db.StorageFailing() || cramped != nil {
		before = changes(tx)
	}
	if err := fn(&Tx{Tx: tx, cache: db.writes, detached: ctx, bound: map[*sql.Stmt]*sql.Stmt{}}); err != nil {
		return err
	}
	wrote := before >= 0 && changes(tx) > before
	if wrote && cramped != nil {
		return cramped
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing to the database: %w", err)
	}
	db.commits.Add(1)
	if wrote {
		db.Recovered()
	}
	return nil
}

// inReadTx runs fn in a read transaction of the reader pool, for a consistent view
// across several queries.
func (db *DB) inReadTx(ctx context.Context, fn func(*Tx) error) error {
	defer db.read.cache.preparePending(ctx)
	// Reads are short and index-served: they are not interrupted (see readPool).
	ctx = context.WithoutCancel(ctx)
	tx, err := db.read.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting a database read: %w", err)
	}
	defer tx.Rollback()
	return fn(&Tx{Tx: tx, cache: db.read.cache, detached: ctx, bound: map[*sql.Stmt]*sql.Stmt{}})
}
