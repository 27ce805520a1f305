package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestSpaceUsage: the tasks stored are counted, the tasks table and its indexes are
// among the objects, biggest first, and the objects fit in the file.
func TestSpaceUsage(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	org := newOrg(t, db, "acme")
	is.NoErr(db.SeedTasks(ctx, org, 300))

	sp, err := db.SpaceUsage(ctx)
	is.NoErr(err)
	is.Equal(sp.Tasks, int64(300))
	is.True(sp.Bytes > 0)
	byName := map[string]int64{}
	var sum int64
	for i, o := range sp.Objects {
		byName[o.Name] = o.Bytes
		sum += o.Bytes
		is.True(o.Unused >= 0 && o.Unused <= o.Bytes)
		if i > 0 {
			is.True(o.Bytes <= sp.Objects[i-1].Bytes) // the biggest first
		}
	}
	is.True(byName["tasks"] > 0)
	is.True(byName["tasks_org_created"] > 0)
	is.True(sum <= sp.Bytes) // free pages belong to no object
}

// TestSeedQueuedTasks: the seeded backlog is claimed oldest first, like one enqueued
// through CreateTask, and a claim released goes back without changing the count.
func TestSeedQueuedTasks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, _, _ := openDB(t)
	org := newOrg(t, db, "acme")
	is.NoErr(db.SeedQueuedTasks(ctx, org, 7000)) // more than one transaction's batch

	queued, err := db.CountTasks(ctx, org, "queued")
	is.NoErr(err)
	is.Equal(queued, int64(7000))
	c, err := db.ClaimTask(ctx, time.Minute)
	is.NoErr(err)
	is.True(c != nil) // the organization got its turn in the queue
	is.Equal(c.OrgID, org)
	is.Equal(c.Input.Target, "queued-0.com") // the oldest first
	is.NoErr(db.ReleaseTask(ctx, c))
	queued, err = db.CountTasks(ctx, org, "queued")
	is.NoErr(err)
	is.Equal(queued, int64(7000))
}
