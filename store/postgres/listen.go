package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener holds the LISTEN connection of Wakeups: a connection of its own, outside
// the pool, since it waits for notifications for as long as the DB is open.
type listener struct {
	once   sync.Once
	ch     chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// Listen backs off from listenRetryMin, doubling, to listenRetryMax between failed
// connections: a database down for a while is asked every few seconds, not in a loop.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Wakeups returns a channel that receives when some replica (this one included) has
// enqueued a task, so idle workers claim at once instead of at their next poll. It
// holds at most one signal: many enqueues while nobody reads make one wakeup, and the
// listener never blocks on a slow reader. After the LISTEN connection is lost and made
// again it signals once, since notifications sent meanwhile were missed. Polling stays
// the workers' fallback: a wakeup is a hint, never the only way work is found. The
// connection is made on the first call; Close ends it.
func (db *DB) Wakeups() <-chan struct{} {
	l := &db.listen
	l.once.Do(func() {
		l.ch = make(chan struct{}, 1)
		l.done = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go db.listenLoop(ctx)
	})
	return l.ch
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

func (db *DB) listenLoop(ctx context.Context) {
	l := &db.listen
	defer close(l.done)
	wait := listenRetryMin
	for first := true; ctx.Err() == nil; first = false {
		conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+tasksChannel)
		}
		if err == nil {
			wait = listenRetryMin
			if !first {
				l.signal()
			}
			for {
				if _, err = conn.WaitForNotification(ctx); err != nil {
					break
				}
				l.signal()
			}
		}
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
