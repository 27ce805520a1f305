package worker

import (
	"context"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// RunWorkers processes the queue until ctx is canceled: cfg.Workers workers claim and
// enrich tasks, a sweeper fails expired tasks and requeues the claims of workers that
// died, the watch scheduler enqueues the tasks of the watches that are due, the batch
// feeder those of the batches' rows,
// maintenance applies retention and checkpoints the WAL, the completer completes the
// erasures whose events are done, memory is given back when
// idle, and the webhook sender delivers the Loops' events.
//
// Once ctx ends nothing new is claimed, and the tasks already claimed get
// cfg.ShutdownGrace to settle; those still running then go back to the queue,
// untouched, for the next start. The sender keeps delivering while they settle. It
// returns once every worker has stopped.
func (s *Pool) RunWorkers(ctx context.Context) error {
	// hard ends the tasks in hand and the sender: when the grace runs out, or as soon
	// as the workers are done.
	hard, stopHard := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHard()
	// A tool waiting for a task stops waiting: this process settles no more tasks.
	stopping := make(chan struct{})
	s.stopping.Store(&stopping)
	defer context.AfterFunc(ctx, func() { close(stopping) })()
	var workers, others sync.WaitGroup
	others.Add(8)
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "watch scheduler", s.scheduleWatches)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "batch feeder", s.feedBatches)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "replica heartbeat", s.heartbeat)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "sweep", s.sweep)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "maintenance", s.maintain)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "idle memory release", s.releaseIdleMemory)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(ctx, "erasure completer", s.completeErasures)
	}()
	go func() {
		defer others.Done()
		s.keepRunning(hard, "webhook sender", s.sender.Run)
	}()
	for range s.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			s.keepRunning(ctx, "task worker", func(ctx context.Context) { s.work(ctx, hard) })
		}()
	}
	drained := make(chan struct{})
	go func() {
		workers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		grace := time.NewTimer(s.cfg.ShutdownGrace)
		defer grace.Stop()
		select {
		case <-drained:
		case <-grace.C:
			s.log.Warn("shutdown grace ran out: tasks still running go back to the queue", "grace", s.cfg.ShutdownGrace.String())
			stopHard()
			<-drained
		}
	}
	stopHard()
	others.Wait()
	return nil
}

func (s *Pool) wakeWorker() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// work claims tasks until ctx ends, and runs each to its end unless hard ends first.
// On SQLite a task's settle claims the next one in the same write while ctx lasts
// (store.DB.SettleAndClaim), so a busy worker claims with a write of its own only once
// it is woken, or polled, after a settle found the queue empty. Where the settle claims
// nothing (PostgreSQL), a worker claims again as its task settles only if more was
// queued as it claimed it (store.Claim.More).
func (s *Pool) work(ctx, hard context.Context) {
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	var next nextClaim
	for ctx.Err() == nil {
		claim := next.claim
		if claim == nil && !next.empty {
			if s.storageWait(ctx, poll.C) {
				continue
			}
			var err error
			claim, err = s.db.ClaimTask(ctx, s.cfg.Lease)
			if err != nil && ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
				s.log.Error("claiming a task", "err", err)
			}
		}
		if claim != nil {
			s.activity.Add(1)
			s.metrics.claimed(claim, s.db.Now())
			next = s.processSafely(hard, ctx, claim)
			if next.claim == nil && !claim.More {
				// Nothing else was queued as the task was claimed, and a task queued
				// since woke a worker (store.Claim.More).
				next.empty = true
			}
			if next.empty {
				// The queue was empty as the task settled: wait a whole interval, not
				// for a tick that came while it ran.
				poll.Reset(s.cfg.PollInterval)
			}
			continue
		}
		next = nextClaim{}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-s.db.Wakeups(): // another replica enqueued a task
		case <-poll.C:
		}
	}
	if c := next.claim; c != nil {
		// Claimed as the worker was told to stop: back to the queue at once.
		releaseCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		if err := s.db.ReleaseTask(releaseCtx, c); err != nil && !store.IsStorageFault(err) {
			s.log.Error("releasing a task at shutdown", "task", c.TaskID, "err", err)
		}
	}
}

// nextClaim is what a task's settle did for its worker's next claim: the task it
// claimed, or that the queue was empty (store.DB.SettleAndClaim). It is filled in as
// the settle's write returns, so a panic after the write loses neither the claim nor
// the settle.
type nextClaim struct {
	claim   *store.Claim
	empty   bool // the settle looked for a next task, or the claim for more, and nothing was queued
	written bool // the settle's write was made: the task is settled, or its claim gone
}

// heartbeatEvery is how often a replica says it is alive; a replica that has not for
// three of them no longer counts.
const heartbeatEvery = 5 * time.Second

// heartbeat records this replica as alive and gives each API key's limiter its share
// of the limit: with n replicas alive, each lets a key through at 1/n of its rate, so
// that a key's requests spread over them by a load balancer meet the limit as a
// whole. On SQLite there is one replica, and the share is the whole. Then it settles
// the asks on the books of the processes that are gone.
func (s *Pool) heartbeat(ctx context.Context) {
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		live, err := s.db.Heartbeat(ctx, s.replica, 3*heartbeatEvery)
		switch {
		case err != nil && ctx.Err() == nil && !store.IsStorageFault(err):
			s.log.Error("recording this replica's heartbeat", "err", err)
		case err == nil:
			if old := s.keyLimits.setShare(live); old != live {
				s.log.Info("replicas alive changed: each enforces its share of a key's rate limit", "replicas", live)
			}
		}
		s.settleDeadAsks(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// settleDeadAsks settles as unknown, at their full price, the asks of priced sources
// left on the books by a process that is gone: on SQLite any process before this one,
// on PostgreSQL a replica whose heartbeat ran out, for an ask booked before this one's
// first heartbeat was surely in; and anyone's ask older than a task lives, whose
// settling was lost to a storage outage. They count the same before and after: the
// sweep says they will not be answered.
func (s *Pool) settleDeadAsks(ctx context.Context) {
	now := s.db.Now()
	n, err := s.db.SettleDeadSourceAsks(ctx, s.replica, now.Add(-3*heartbeatEvery), now.Add(-s.cfg.TaskTTL-time.Minute))
	switch {
	case err != nil && ctx.Err() == nil && !store.IsStorageFault(err):
		s.log.Error("settling the asks of processes that are gone", "err", err)
	case n > 0:
		s.log.Warn("asks of a process that ended before their answers came are counted at their full price, as unknown", "asks", n)
	}
}

func (s *Pool) sweep(ctx context.Context) {
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	for {
		if s.storageWait(ctx, tick.C) {
			continue
		}
		if n, gaveUp, err := s.db.RequeueAbandoned(ctx); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("requeueing abandoned tasks", "err", err)
		} else {
			if n > 0 {
				s.log.Info("requeued tasks whose worker stopped", "tasks", n)
				for range n {
					s.wakeWorker()
				}
			}
			s.gaveUp(gaveUp)
		}
		if expired, err := s.db.ExpireTasks(ctx); err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
			s.log.Error("expiring tasks", "err", err)
		} else if len(expired) > 0 {
			s.log.Info("expired tasks past their lifetime", "tasks", len(expired))
			for _, t := range expired {
				s.metrics.settled(t.ObjectType, store.StatusFailed, t.CreditsCharged)
			}
			s.sender.Wake()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// process runs one claimed task to its end, keeping its lease alive meanwhile.
// claiming is the worker's: while it lasts, the settle claims the next task (next).
func (s *Pool) process(ctx, claiming context.Context, c *store.Claim, asks *answeredAsks, next *nextClaim) {
	// The deadline is measured on the store's clock, the one expires_at was set by.
	taskCtx, cancel := context.WithTimeout(ctx, c.ExpiresAt.Sub(s.db.Now()))
	defer cancel()
	leaseDone := make(chan struct{})
	go func() {
		defer close(leaseDone)
		s.keepRunning(taskCtx, "lease keeper", func(ctx context.Context) { s.keepLease(ctx, cancel, c) })
	}()
	var out store.Outcome
	var res enrich.Result
	var trace enrich.Trace
	var taskErr *enrich.TaskError
	// The task's answered asks are settled with it (answeredAsks).
	spend := s.spend.forTask(asks)
	// A task queued before its subject was suppressed asks no source.
	suppressed := s.claimSuppressed(taskCtx, c)
	if suppressed != nil {
		out, taskErr = store.Outcome{Err: suppressed}, suppressed
	} else if failed := s.runSafely(c.TaskID, func() {
		fill, err := s.fillFor(taskCtx, c)
		if err != nil {
			// The organization's list cannot be read now: the server's default
			// still answers, rather than failing the task on a read.
			if !store.IsStorageFault(err) {
				s.log.Error("reading the fill lists", "task", c.TaskID, "err", err)
			}
			fill = s.cfg.Fill.For(c.Input.Lookup.ObjectType())
		}
		p := s.pipeline
		if c.WatchID != nil {
			// A watch's check: nothing held is served in the sources' place, and no
			// source is passed over for a miss remembered.
			fresh := *s.pipeline
			fresh.Fresh = true
			p = &fresh
		}
		if c.Input.Lookup == enrich.LookupEmail {
			// An email lookup serves its own stale fallbacks: a stored record is not a
			// substitute for resolving an address.
			// The email path asks its companies and profiles through Enrich: the task's
			// trace gathers what each source was asked, and where the person came from. The
			// person it finds is filled by the organization's person list, as a profile
			// lookup's is.
			task := &enrich.Task{Org: c.OrgID, Fill: fill, Spend: spend}
			o := p.ResolveEmail(taskCtx, task, c.Input)
			out = store.Outcome{Err: o.Err, KeepGathered: s.cfg.KeepGathered(), TieBroken: o.TieBroken,
				Trace: task.Trace(o.Result)}
			out.Gathered = sharedGathering(o.Gathered, out.Trace)
			if o.Company != nil {
				// The company identified is kept, so the next lookup at the domain
				// reads it rather than asking a vendor again.
				ct := task.Trace(enrich.Result{Company: o.Company})
				_, domain, _ := enrich.SplitAddress(c.Input.Target)
				out.Company = &store.IdentifiedCompany{Company: o.Company, Domain: domain, At: o.CompanyAt,
					Provenance: ct.Provenance, Private: ct.Private}
			}
			if o.Err == nil {
				out.Result, out.Fetched, out.FetchedAt = &o.Result, true, o.FetchedAt
				if len(out.Trace.Provenance) == 0 {
					// A held profile served as it is: its fields came from where the
					// store has them from.
					out.Trace.Provenance = s.heldProvenance(taskCtx, o.Result)
				}
			}
		} else {
			res, trace, taskErr = p.Lookup(taskCtx, &enrich.Task{Org: c.OrgID, Fill: fill, Spend: spend}, c.Input)
		}
	}); failed != nil {
		out, taskErr = store.Outcome{Err: failed}, failed
	}
	cancel()
	<-leaseDone

	// Settling must finish even while the service shuts down; one the disk refuses is
	// tried again for as long as the lease lasts (settle).
	settleCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second+s.cfg.Lease)
	defer done()
	if ctx.Err() != nil {
		if err := s.db.ReleaseTask(settleCtx, c); err != nil && !store.IsStorageFault(err) { // the store logs those
			s.log.Error("releasing a task at shutdown", "task", c.TaskID, "err", err)
		}
		s.spend.settleApart(settleCtx, asks, asks.take())
		return
	}
	if c.Input.Lookup != enrich.LookupEmail && suppressed == nil {
		out = s.outcome(settleCtx, c, res, trace, taskErr)
	}
	s.settle(settleCtx, claiming, c, s.withoutSuppressed(settleCtx, c, out), asks, next, ctx.Done())
}

// processSafely is process, where a panic outside the enrichment (which process
// recovers itself) fails the task as internal_error, refunded, instead of leaving
// its claim running until the lease runs out.
func (s *Pool) processSafely(ctx, claiming context.Context, c *store.Claim) nextClaim {
	asks := &answeredAsks{}
	var next nextClaim
	if failed := s.runSafely(c.TaskID, func() { s.process(ctx, claiming, c, asks, &next) }); failed != nil && !next.written {
		settleCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		// A no-op if it was settled before the panic.
		s.settle(settleCtx, claiming, c, store.Outcome{Err: failed}, asks, &next, ctx.Done())
	}
	return next
}

// settle records how a claimed task ended, if the claim is still its worker's. A
// settle the disk refused is tried again once the database takes writes, for as long
// as the claim's lease lasts or until stop is closed (a shutdown out of grace): the
// result in hand is kept rather than the task run again. Past that the sweeper puts
// the task back in the queue once the database takes writes. The task's answered
// asks go in the same write; those of a settle never written are settled on their
// own (they may fail as it did, and stay on the books at their full price for a
// sweep).
func (s *Pool) settle(ctx, claiming context.Context, c *store.Claim, out store.Outcome, asks *answeredAsks, next *nextClaim, stop <-chan struct{}) {
	out.Asks = asks.take()
	leaseEnd := s.db.Now().Add(s.cfg.Lease)
	var settled bool
	var err error
	stopping := claiming.Err() != nil // read once: a stop during the write must not settle again
	if !stopping {
		var claim *store.Claim
		settled, claim, err = s.db.SettleAndClaim(ctx, c, out, s.cfg.Lease)
		if err == nil {
			// Where the settle claims (SingleWriter), nothing claimed is an empty queue.
			*next = nextClaim{claim: claim, empty: claim == nil && s.db.SingleWriter(), written: true}
		}
	}
	if stopping || (err != nil && !store.IsStorageFault(err)) {
		// Told to stop claiming; or a write that failed for another reason than the
		// storage (on SQLite, maybe the claim's own): the settle alone.
		settled, err = s.db.Settle(ctx, c, out)
		next.written = err == nil
	}
	defer func() {
		if err != nil {
			s.spend.settleApart(ctx, asks, out.Asks)
		} else {
			s.spend.settled(asks, out.Asks)
		}
	}()
	if store.IsStorageFault(err) {
		retry := time.NewTicker(store.ProbeEvery)
		defer retry.Stop()
		for store.IsStorageFault(err) && s.db.Now().Before(leaseEnd) {
			select {
			case <-retry.C:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
			if s.db.Writable(ctx) {
				settled, err = s.db.Settle(ctx, c, out)
				next.written = err == nil
			}
		}
	}
	if err != nil && !store.IsStorageFault(err) { // the store logs those
		s.log.Error("settling a task", "task", c.TaskID, "err", err)
	}
	if settled {
		status := store.StatusSucceeded
		if out.Err != nil {
			status = store.StatusFailed
		}
		s.metrics.settled(c.Input.Lookup.ObjectType(), status, c.Input.Lookup.Cost())
	}
	s.sender.Wake() // in case the task has a Loop
}

// gaveUp counts and logs the tasks failed (and refunded) for their claims being lost
// too many times, and wakes the sender for those with a Loop.
func (s *Pool) gaveUp(tasks []store.ExpiredTask) {
	for _, t := range tasks {
		s.log.Warn("a task's claim ran out too many times: the task fails", "task", t.ID, "attempts", store.MaxTaskAttempts)
		s.metrics.settled(t.ObjectType, store.StatusFailed, t.CreditsCharged)
	}
	if len(tasks) > 0 {
		s.sender.Wake()
	}
}

// outcome is how a company or profile lookup ends: a refresh that cannot complete
// serves the stored record, as old as it is, with the provenance it was stored with
// and the sources that were asked.
func (s *Pool) outcome(ctx context.Context, c *store.Claim, res enrich.Result, tr enrich.Trace, taskErr *enrich.TaskError) store.Outcome {
	out := store.Outcome{Result: &res, Fetched: true, Trace: tr}
	if taskErr != nil {
		out = store.Outcome{Err: taskErr, Trace: enrich.Trace{Sources: tr.Sources}}
		if (taskErr.Code == enrich.CodeProviderUnavailable || taskErr.Code == enrich.CodeNotFound) && c.WatchID == nil {
			stored, prov, err := s.db.FindStoredFor(ctx, c.OrgID, c.Input)
			if err != nil {
				s.log.Error("reading the stored record", "task", c.TaskID, "err", err)
			}
			if stored != nil {
				out = store.Outcome{Result: stored, Trace: enrich.Trace{Provenance: prov, Sources: tr.Sources}}
			}
		}
	}
	return out
}

// heldProvenance is the provenance the store keeps for a person's profile, or nil.
func (s *Pool) heldProvenance(ctx context.Context, res enrich.Result) enrich.Provenance {
	if res.Person == nil || res.Person.NetworkURL == nil {
		return nil
	}
	_, prov, err := s.db.FindStoredWithProvenance(ctx, enrich.Input{Lookup: enrich.LookupPersonURL, Target: *res.Person.NetworkURL})
	if err != nil && ctx.Err() == nil && !store.IsStorageFault(err) { // the store logs those
		s.log.Error("reading a held profile's provenance", "err", err)
	}
	return prov
}

// keepLease extends the claim's lease while the task runs, and cancels the task once
// the claim is no longer its (canceled or expired meanwhile).
func (s *Pool) keepLease(ctx context.Context, cancel context.CancelFunc, c *store.Claim) {
	tick := time.NewTicker(max(s.cfg.Lease/3, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			ok, err := s.db.ExtendLease(ctx, c, s.cfg.Lease)
			if err != nil && ctx.Err() == nil && !store.IsStorageFault(err) {
				s.log.Error("extending a lease", "task", c.TaskID, "err", err)
			}
			if err == nil && !ok {
				cancel()
				return
			}
		}
	}
}

// sharedGathering is what an ambiguous email lookup gathered, to be kept for a retry
// of the address with a hint, or nil when any of its asks went out with the
// organization's own vendor key: a gathering is kept by address for every
// organization, and what an organization's own key fetched is that organization's
// alone. Its retries then search again.
func sharedGathering(g *enrich.Gathering, tr enrich.Trace) *enrich.Gathering {
	for _, call := range tr.Sources {
		if call.OwnKey {
			return nil
		}
	}
	return g
}
