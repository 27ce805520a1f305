package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/store"

	"github.com/jackc/pgx/v5"
)

// listener holds the LISTEN connection of Wakeups and of the key cache: a connection
// of its own, outside the pool, since it waits for notifications for as long as the DB
// is open. It listens on both channels from the first call of either.
type listener struct {
	once   sync.Once
	ch     chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// alive is when the connection last proved it was listening (monotonic, see
	// sinceStart): LISTEN done, a notification or a ping answered. 0 while it is not.
	alive atomic.Int64
	// ownPassed counts this process's own notifications of queued tasks heard and
	// passed over.
	ownPassed atomic.Int64
}

// processStart is the origin of sinceStart: the monotonic clock, which a change of the
// wall clock (NTP stepping it) does not move.
var processStart = time.Now()

// sinceStart is the time since processStart, at least 1 (0 is "not alive").
func sinceStart() int64 { return max(int64(time.Since(processStart)), 1) }

// trusted reports whether the connection proved itself within keyCacheTrust.
func (l *listener) trusted() bool {
	at := l.alive.Load()
	return at != 0 && sinceStart()-at <= int64(keyCacheTrust)
}

// Listen backs off from listenRetryMin, doubling, to listenRetryMax between failed
// connections: a database down for a while is asked every few seconds, not in a loop.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// The listening connection is pinged after listenPing without a notification, and
// given listenPingTimeout to answer. A connection lost without a word (a peer gone
// from the network, no RST) would otherwise look like a quiet one for as long as TCP
// takes to notice, and a revoke meanwhile would go unheard. keyCacheTrust is how long
// after its last proof of life the key cache is still used: past it, every request
// reads its key, as if there were no cache.
const (
	listenPing        = time.Second
	listenPingTimeout = 2 * time.Second
	keyCacheTrust     = listenPing + listenPingTimeout + time.Second
)

// Channels: tasksChannel is NOTIFY'd by an enqueue (notifyTasks), keysChannel by the
// api_keys triggers (schema.sql, migration 8), suppressionsChannel by the suppressions
// trigger (migration 12).
const (
	keysChannel         = "enrichd_keys"
	suppressionsChannel = "enrichd_suppressions"
)

// listenApplication names the LISTEN connection in pg_stat_activity.
const listenApplication = "enrichd listen"

// Wakeups returns a channel that receives when another replica has queued a task, so
// idle workers claim at once instead of at their next poll; the process that queues a
// task wakes its own workers, and its own notifications would wake a second one for the
// same task, to find nothing to claim (two claims of three were empty in a 10,000-row
// batch, docs/performance.md). It holds at most one signal: many enqueues while nobody
// reads make one wakeup, and the listener never blocks on a slow reader. After the
// LISTEN connection is lost and made again it signals once, since notifications sent
// meanwhile were missed. Polling stays the workers' fallback: a wakeup is a hint, never
// the only way work is found. The connection is made on the first call; Close ends it.
func (db *DB) Wakeups() <-chan struct{} {
	db.startListening()
	return db.listen.ch
}

// KeyCache holds the valid keys this replica has read, as long as its LISTEN
// connection is known to work: a key revoked through any replica, or by hand in psql,
// makes the api_keys triggers NOTIFY every replica when it commits, and each empties
// its cache on hearing it. While the connection is down, being made again, or has not
// proved itself within keyCacheTrust, it is nil and every request reads its key (see
// store.DB.Authenticate), so a revoke takes effect at once then too; the cache is
// emptied when the connection is back, since what was sent meanwhile went unheard.
// The first call starts the connection.
func (db *DB) KeyCache() *store.KeyCache {
	db.startListening()
	if !db.listen.trusted() {
		return nil
	}
	return &db.keys
}

// SuppressionCache holds the suppressions this replica has read, per organization, on
// the same terms as KeyCache: nil unless the LISTEN connection is known to work, and
// emptied whenever any replica, or psql, changes a suppression.
func (db *DB) SuppressionCache() *store.SuppressionCache {
	db.startListening()
	if !db.listen.trusted() {
		return nil
	}
	return &db.suppressed
}

func (db *DB) startListening() {
	l := &db.listen
	l.once.Do(func() {
		l.ch = make(chan struct{}, 1)
		l.done = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go db.listenLoop(ctx)
	})
}

func (l *listener) stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

func (l *listener) signal() {
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

// proved records that the connection works. The cache is emptied first when the last
// proof is too old: notifications may have been lost in between.
func (db *DB) proved() {
	l := &db.listen
	if !l.trusted() {
		db.keys.Invalidate()
		db.suppressed.Invalidate()
	}
	l.alive.Store(sinceStart())
}

// lost stops the key cache's use until the connection proves itself again.
func (db *DB) lost() {
	db.listen.alive.Store(0)
	db.keys.Invalidate()
	db.suppressed.Invalidate()
}

func (db *DB) listenLoop(ctx context.Context) {
	l := &db.listen
	defer close(l.done)
	defer db.lost()
	wait := listenRetryMin
	for first := true; ctx.Err() == nil; first = false {
		cfg := db.pool.Config().ConnConfig.Copy()
		cfg.RuntimeParams["application_name"] = listenApplication
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+tasksChannel+"; LISTEN "+keysChannel+"; LISTEN "+suppressionsChannel)
		}
		if err == nil {
			wait = listenRetryMin
			db.proved() // after a loss, alive is 0: the cache starts empty
			if !first {
				l.signal()
			}
			err = db.listenOn(ctx, conn)
		}
		db.lost()
		if conn != nil {
			conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listenOn hands on conn's notifications until it fails, pinging it when it has been
// quiet for listenPing.
func (db *DB) listenOn(ctx context.Context, conn *pgx.Conn) error {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			db.proved()
			switch n.Channel {
			case keysChannel:
				db.keys.Invalidate()
			case suppressionsChannel:
				db.suppressed.Invalidate()
			default:
				if n.Payload == db.self {
					db.listen.ownPassed.Add(1)
				} else {
					db.listen.signal()
				}
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err = conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return err
			}
			db.proved()
		default:
			return err
		}
	}
}
