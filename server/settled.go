package server

import (
	"sync"
	"time"
)

// settledAnswersSize bounds the answers kept, and settledAnswerMax the length of one:
// at most 4,096 × 16 KiB, 64 MiB, where a company's answer is about 2 KiB. A longer
// answer (a person with a long history, a record several vendors filled) is read
// from the database each time.
const (
	settledAnswersSize = 4096
	settledAnswerMax   = 16 << 10
)

// settledAnswers keeps the bodies of GET /v1/tasks/:id for settled tasks. A settled
// task never changes again (its result is kept by its hash, and nothing updates a task
// once it succeeded, failed or was canceled) until retention deletes it, so its
// answer can be written again without reading the database: a task read then costs
// about what the HTTP stack does. A task is kept with its organization, whose keys
// alone read it, and its finish time, so that one retention may have deleted, here or
// on another replica, is read from the database again (and found gone): replicas on
// one database are to share their --retain (docs/scale-out.md).
//
// An erasure is the one change of a settled task (its input, target and result go):
// each answer is kept with the erasure epoch it was read at (store.DB.ErasureEpoch),
// and one kept before the epoch moved, here or on another process, is read again.
type settledAnswers struct {
	mu sync.Mutex
	m  map[string]settledAnswer
	// epoch is the store's ErasureEpoch; nil keeps every answer at epoch 0 (tests).
	epoch func() (uint64, bool)
}

type settledAnswer struct {
	org      string
	finished time.Time
	body     []byte
	epoch    uint64
}

// epochNow is the erasure epoch to read a task at, and whether an answer may be kept.
func (c *settledAnswers) epochNow() (uint64, bool) {
	if c.epoch == nil {
		return 0, true
	}
	return c.epoch()
}

// get is the answer kept for the task id of org, if any, as long as a task finished
// then is younger than retain (0: kept for ever) at now.
func (c *settledAnswers) get(org, id string, now time.Time, retain time.Duration) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[id]
	if !ok || a.org != org {
		return nil, false
	}
	if epoch, known := c.epochNow(); !known || epoch != a.epoch {
		delete(c.m, id) // an erasure may have taken its input, target and result since
		return nil, false
	}
	if retain > 0 && !a.finished.After(now.Add(-retain)) {
		delete(c.m, id)
		return nil, false
	}
	return a.body, true
}

// put keeps the answer of a settled task read now.
func (c *settledAnswers) put(org, id string, finished time.Time, body []byte) {
	epoch, ok := c.epochNow()
	c.putAt(org, id, finished, body, epoch, ok)
}

// putAt keeps the answer of a settled task read at the erasure epoch epoch (taken
// before the read, so that an erasure committed meanwhile moves it past), unless the
// epoch was not known then, or the answer is longer than settledAnswerMax.
func (c *settledAnswers) putAt(org, id string, finished time.Time, body []byte, epoch uint64, known bool) {
	if len(body) > settledAnswerMax || !known {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]settledAnswer)
	}
	if _, ok := c.m[id]; !ok && len(c.m) >= settledAnswersSize {
		for old := range c.m { // any one: the map's order is as good as a random pick
			delete(c.m, old)
			break
		}
	}
	c.m[id] = settledAnswer{org: org, finished: finished, body: body, epoch: epoch}
}
