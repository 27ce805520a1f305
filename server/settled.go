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
type settledAnswers struct {
	mu sync.Mutex
	m  map[string]settledAnswer
}

type settledAnswer struct {
	org      string
	finished time.Time
	body     []byte
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
	if retain > 0 && !a.finished.After(now.Add(-retain)) {
		delete(c.m, id)
		return nil, false
	}
	return a.body, true
}

// put keeps the answer of a settled task, unless it is longer than settledAnswerMax.
func (c *settledAnswers) put(org, id string, finished time.Time, body []byte) {
	if len(body) > settledAnswerMax {
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
	c.m[id] = settledAnswer{org: org, finished: finished, body: body}
}
