package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"enrichd/secret"

	"github.com/jackc/pgx/v5"
)

// spread sends each request to the next of several enrichd processes in turn, as a
// round-robin load balancer would; each keeps its own kept-alive connections.
type spread struct {
	clients []*rawClient
	next    atomic.Uint64
}

func (s *spread) pick() *rawClient {
	return s.clients[(s.next.Add(1)-1)%uint64(len(s.clients))]
}

func (s *spread) closeIdle() {
	for _, c := range s.clients {
		c.closeIdle()
	}
}

// replicaRuns runs the replicas scenario once per count in opt.Replicas.
func replicaRuns(ctx context.Context, opt Options) ([]Result, error) {
	if !strings.HasPrefix(opt.DB, "postgres://") && !strings.HasPrefix(opt.DB, "postgresql://") {
		return nil, fmt.Errorf("the replicas scenario runs serve processes on PostgreSQL: give it a postgres:// URL")
	}
	counts := opt.Replicas
	if len(counts) == 0 {
		counts = []int{1, 2, 3}
	}
	var out []Result
	for _, n := range counts {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "  %d replica(s) ...\n", n)
		}
		r, err := replicaRun(ctx, opt, n)
		if err != nil {
			return nil, fmt.Errorf("%d replica(s): %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// replicaRun starts n serve processes on a schema of their own in opt.DB, drives the
// realistic mix spread over them in turn, and stops them. The schema is dropped
// afterwards: the database may hold other data, which the run never reads or writes,
// and each run starts from the same empty tables.
func replicaRun(ctx context.Context, opt Options, n int) (Result, error) {
	var salt [6]byte
	rand.Read(salt[:])
	schema := "enrichd_bench_" + hex.EncodeToString(salt[:])
	admin, err := pgx.Connect(ctx, opt.DB)
	if err != nil {
		return Result{}, fmt.Errorf("connecting to the --db: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return Result{}, fmt.Errorf("creating the bench's schema: %w", err)
	}
	defer admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE")
	dsn, err := withSearchPath(opt.DB, schema)
	if err != nil {
		return Result{}, err
	}

	rc, err := startReceiver()
	if err != nil {
		return Result{}, err
	}
	defer rc.close()
	key, loopID, err := prepareServeDB(ctx, opt, dsn, rc.url)
	if err != nil {
		return Result{}, err
	}
	// The replicas share one secret key file, as they must.
	keyDir, err := os.MkdirTemp("", "enrichd-bench-key-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(keyDir)
	keyFile := filepath.Join(keyDir, "secret-key")
	if _, _, err := secret.LoadOrCreate(keyFile); err != nil {
		return Result{}, err
	}
	e := &env{client: &http.Client{Timeout: 30 * time.Second}, spread: &spread{}}
	defer e.client.CloseIdleConnections()
	defer e.spread.closeIdle()
	for range n {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return Result{}, err
		}
		srv, err := startServe(opt, dsn, addr, keyFile)
		if err != nil {
			return Result{}, err
		}
		defer srv.stop()
		if err := srv.waitReady(ctx, e.client, "http://"+addr); err != nil {
			return Result{}, err
		}
		e.spread.clients = append(e.spread.clients, newRawClient(addr))
	}
	m, err := setUpMix(ctx, e, key, loopID, mixClients(opt))
	if err != nil {
		return Result{}, err
	}
	rows := m.drive(ctx, fmt.Sprintf("replicas-%d", n), opt.Duration)
	r := rows[0]
	r.Note = fmt.Sprintf("the realistic mix from %d clients, spread in turn over %d serve process(es), %d workers each, on one PostgreSQL database",
		len(m.clients), n, opt.Workers)
	return r, nil
}

// withSearchPath is dsn with its tables looked for, and created, in schema.
func withSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("the --db URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
