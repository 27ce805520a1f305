package store

import (
	"context"
	"sync"
	"sync/atomic"

	"enrichd/enrich"
)

// The suppressions an organization's enrichments are checked against are kept in
// memory, so that a check costs a map lookup rather than a read: most organizations
// have none, or a few hundred.
const (
	// suppressionsCachedPerOrg bounds the entries kept for one organization: one with
	// more is checked by a read of the index each time.
	suppressionsCachedPerOrg = 20_000
	// suppressionsCachedMax bounds the entries kept in all; past it the cache starts
	// again empty, which costs each organization one read.
	suppressionsCachedMax = 200_000
)

// SuppressionCache holds, per organization, the hashes of the subjects it may not
// enrich (its own entries and the installation's). The driver empties it whenever
// another process may have changed them (SQLite: a poll of the file's data version;
// PostgreSQL: a NOTIFY from the suppressions trigger, heard on the LISTEN connection,
// and no cache while that connection is not known to work), and this process's own
// changes do (AddSuppression, DeleteSuppression).
type SuppressionCache struct {
	mu  sync.Mutex
	gen uint64 // counts the invalidations: a load begun before one is not kept
	// epoch is gen, read without the lock (Epoch).
	epoch atomic.Uint64
	orgs  map[string]*orgSuppressions
	size  int
	// loads counts the lists read from the database, for tests.
	loads atomic.Int64
}

// orgSuppressions is one organization's: the hashes, or too many to keep (checked by
// a read each time).
type orgSuppressions struct {
	hashes  map[enrich.SubjectHash]struct{}
	tooMany bool
}

// check answers from the cache: whether any of hashes is suppressed, and whether the
// cache knows (the organization's entries are loaded and not too many).
func (c *SuppressionCache) check(orgID string, hashes [][]byte) (suppressed, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.orgs[orgID]
	if o == nil || o.tooMany {
		return false, false
	}
	for _, h := range hashes {
		if len(h) != enrich.SubjectHashSize {
			continue
		}
		if _, ok := o.hashes[enrich.SubjectHash(h)]; ok {
			return true, true
		}
	}
	return false, true
}

// load reads the organization's entries into the cache, and reports whether it kept
// them (not when an invalidation came meanwhile, or the read failed).
func (c *SuppressionCache) load(ctx context.Context, q Executor, orgID string) bool {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	c.loads.Add(1)
	rows, err := q.Query(ctx, loadSuppressionsQuery, orgID, suppressionsCachedPerOrg+1)
	list, err := collect(rows, err, func(r Row) (h []byte, err error) { return h, r.Scan(&h) })
	if err != nil {
		return false
	}
	o := &orgSuppressions{tooMany: len(list) > suppressionsCachedPerOrg}
	if !o.tooMany {
		o.hashes = make(map[enrich.SubjectHash]struct{}, len(list))
		for _, h := range list {
			if len(h) == enrich.SubjectHashSize {
				o.hashes[enrich.SubjectHash(h)] = struct{}{}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return false
	}
	if c.orgs == nil || c.size+len(o.hashes) > suppressionsCachedMax {
		c.orgs, c.size = map[string]*orgSuppressions{}, 0
	}
	if old := c.orgs[orgID]; old != nil {
		c.size -= len(old.hashes)
	}
	c.orgs[orgID] = o
	c.size += len(o.hashes)
	return true
}

// Invalidate empties the cache: the next check of every organization reads its list
// again.
func (c *SuppressionCache) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.epoch.Add(1)
	clear(c.orgs)
	c.size = 0
}

// Epoch counts the invalidations: it changes whenever a suppression may have been
// added or lifted, by this process or another, an erasure's included.
func (c *SuppressionCache) Epoch() uint64 { return c.epoch.Load() }

// Loads counts the lists read from the database rather than the cache, for tests.
func (c *SuppressionCache) Loads() int64 { return c.loads.Load() }
