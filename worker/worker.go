// Package worker is enrichd's background work, apart from the HTTP surface: the task
// workers that claim queued tasks, run the enrichment pipeline and settle them, the
// sweep of expired tasks and lost claims, the webhook sender that delivers the Loops'
// events, the batch feeder that makes the tasks of batches' rows, the watch
// scheduler, retention and the WAL checkpoint, the completer of erasures, the replica
// heartbeat and the release of idle memory. It calls store and enrich, as package
// server does; neither imports the other. Package wire builds both on one database and
// wires them: the server tells the Pool what it made (Wake*) and counts requests as
// activity (Active); the Pool makes the tasks of watches and batch rows through the
// store, as the API does, and tells the server how many replicas share a key's rate
// limit (Config.SetReplicas).
package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"enrichd/enrich"
	"enrichd/hubspot"
	"enrichd/netguard"
	"enrichd/secret"
	"enrichd/store"
	"enrichd/webhook"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"
)

// Config is how the background work behaves. wire.WorkerConfig fills it from
// server.Config, serve's flags (the fields of the same names mean the same); a zero
// value takes the default of DefaultConfig, except where a field says otherwise.
type Config struct {
	Workers       int           // task workers
	TaskTTL       time.Duration // a task unsettled this long after creation fails as timed_out
	MaxBacklog    int64         // queued tasks an organization may have
	Freshness     time.Duration // stored records younger than this are served without a fetch
	Lease         time.Duration // how long a claim lasts without being extended
	PollInterval  time.Duration // how often idle workers look for work they were not woken for
	SweepInterval time.Duration // how often expired tasks and abandoned claims are handled
	// EmailMaxRetrievals bounds the profiles one email lookup retrieves.
	EmailMaxRetrievals int
	Sources            []enrich.Source
	// SourceBudgets are the installation's monthly caps of vendor credits, by source
	// name, beside those set in the database: the lower applies.
	SourceBudgets map[string]int64
	// Secrets opens the organizations' own vendor keys; nil: no organization's own key
	// is used. OrgKeyRefresh is how long what was read of one is used before it is read
	// again (OrgKeyRefresh when 0).
	Secrets *secret.Box
	// HubSpotURL is HubSpot's API, which HubSpot Loops write into (hubspot.DefaultURL
	// when "").
	HubSpotURL    string
	OrgKeyRefresh time.Duration
	// Fill is the default of the fields the waterfall fills, per object type; an
	// organization's own list replaces it.
	Fill enrich.FillLists
	// WebhookPolicy says which webhook URLs are reached. DeliveryConcurrency caps the
	// deliveries in flight, DeliveryPerLoop those to one Loop, DeliveryTimeout one
	// attempt; zero takes the sender's defaults.
	WebhookPolicy       netguard.Policy
	DeliveryConcurrency int
	DeliveryPerLoop     int
	DeliveryTimeout     time.Duration
	Logger              *slog.Logger
	// ShutdownGrace is how long tasks already claimed may run on once RunWorkers' context
	// ends; those still running then go back to the queue. Zero puts them back at once.
	ShutdownGrace time.Duration
	// Retain is how long settled tasks and delivery history are kept, RetainRecords
	// stored records no source refreshed; zero keeps them for ever (and is not
	// replaced by a default).
	Retain        time.Duration
	RetainRecords time.Duration
	// RetainCandidates is how long what an ambiguous email lookup gathered is kept and
	// read, at most the freshness window (KeepGathered); zero leaves the freshness
	// window alone to bound it.
	RetainCandidates time.Duration
	// RetainAudit is how long the audit log's entries are kept; zero keeps them for
	// ever (and is not replaced by a default).
	RetainAudit time.Duration
	// WatchInterval is how often the watches that are due are looked for.
	WatchInterval time.Duration
	// MaintenanceInterval is how often retention and the WAL checkpoint run.
	MaintenanceInterval time.Duration
	// IdleRelease is how long the service is idle before the database's writer cache is
	// given back to the system.
	IdleRelease time.Duration
	// SessionIdle is how long an unused dashboard session lives: maintenance deletes
	// the rows of those past it.
	SessionIdle time.Duration

	// Metrics is the set the background's counters are kept in: wire passes the one
	// the server's /metrics writes (server.Config.Metrics). nil: a set of the Pool's
	// own.
	Metrics *metrics.Set
	// RowRequest reads a batch row's stored request back into the input and the
	// request its endpoint would have made (server.RowRequest), so that a row's task is
	// made exactly as that endpoint makes one. nil: batches are not fed.
	RowRequest func(objectType string, raw json.RawMessage) (enrich.Input, any, error)
	// SetReplicas is told how many replicas are alive at each heartbeat, and returns
	// how many it was told before (server.Server.SetReplicas: each replica enforces its
	// share of a key's rate limit). nil: nobody is told.
	SetReplicas func(live int) (previous int)
}

// DefaultConfig returns the defaults documented in docs/cli.md, those of
// server.DefaultConfig for the fields of the same names.
func DefaultConfig() Config {
	return Config{
		Workers:             16,
		TaskTTL:             10 * time.Minute,
		MaxBacklog:          10000,
		Freshness:           30 * 24 * time.Hour,
		Lease:               30 * time.Second,
		PollInterval:        500 * time.Millisecond,
		SweepInterval:       time.Second,
		Logger:              slog.Default(),
		Retain:              90 * 24 * time.Hour,
		RetainRecords:       3 * 365 * 24 * time.Hour,
		MaintenanceInterval: time.Minute,
		WatchInterval:       10 * time.Second,
		IdleRelease:         10 * time.Second,
		EmailMaxRetrievals:  enrich.DefaultMaxRetrievals,
		SessionIdle:         12 * time.Hour,
	}
}

// KeepGathered is how long what an ambiguous email lookup gathered is kept and read:
// RetainCandidates, or the freshness window when that is shorter or RetainCandidates
// is zero (server.Config.KeepGathered, the same rule).
func (c Config) KeepGathered() time.Duration {
	w := c.Freshness
	if w <= 0 {
		w = DefaultConfig().Freshness
	}
	if c.RetainCandidates > 0 && c.RetainCandidates < w {
		w = c.RetainCandidates
	}
	return w
}

// replicaShare tells the server's rate limits of API keys how many replicas share
// them (Config.SetReplicas), and returns how many it told them before.
type replicaShare func(live int) (previous int)

func (f replicaShare) setShare(live int) int {
	if f == nil {
		return live // nobody to tell
	}
	return f(live)
}

// Pool is the background work over one database. Its methods' receiver is named s, as
// when this work was the server's, so that the loops read as they did.
type Pool struct {
	cfg      Config
	db       *store.DB
	norm     enrich.Normalizer
	pipeline *enrich.Pipeline
	spend    *spendKeeper
	keys     *orgKeys
	log      *slog.Logger
	metrics  *workerMetrics
	wake     chan struct{} // an enqueue wakes an idle worker
	feedWake chan struct{} // a new batch wakes the feeder
	replica  string        // this process among the replicas that share the database
	// keyLimits are the server's rate limits of API keys, as far as the heartbeat tells
	// them how many replicas are alive.
	keyLimits replicaShare
	sender    *webhook.Sender
	// activity counts API requests (Active) and claims; maintenance reads it to find
	// quiet times.
	activity atomic.Uint64
	// erasuresWake wakes the completer of erasures (completeErasures).
	erasuresWake chan struct{}
	// stopping is closed when the running RunWorkers' context ends; nil before any.
	stopping atomic.Pointer[chan struct{}]
}

// New builds the background work. Call RunWorkers to run it.
func New(db *store.DB, cfg Config) *Pool {
	def := DefaultConfig()
	if cfg.Workers <= 0 {
		cfg.Workers = def.Workers
	}
	if cfg.TaskTTL <= 0 {
		cfg.TaskTTL = def.TaskTTL
	}
	if cfg.Freshness <= 0 {
		cfg.Freshness = def.Freshness
	}
	if cfg.Lease <= 0 {
		cfg.Lease = def.Lease
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = def.PollInterval
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = def.SweepInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = def.Logger
	}
	if cfg.EmailMaxRetrievals <= 0 {
		cfg.EmailMaxRetrievals = def.EmailMaxRetrievals
	}
	if cfg.MaintenanceInterval <= 0 {
		cfg.MaintenanceInterval = def.MaintenanceInterval
	}
	if cfg.WatchInterval <= 0 {
		cfg.WatchInterval = def.WatchInterval
	}
	if cfg.IdleRelease <= 0 {
		cfg.IdleRelease = def.IdleRelease
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = def.SessionIdle
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	m := newWorkerMetrics(cfg.Metrics)
	replica := replicaName()
	spend := newSpendKeeper(db, cfg.Logger, m, cfg.SourceBudgets, cfg.Sources, replica)
	keys := newOrgKeys(db, cfg.Secrets, cfg.Logger, cfg.OrgKeyRefresh)
	var s *Pool
	s = &Pool{
		cfg: cfg,
		db:  db,
		pipeline: &enrich.Pipeline{Sources: cfg.Sources, Logger: cfg.Logger, Held: db.Held(),
			MaxRetrievals: cfg.EmailMaxRetrievals, Freshness: cfg.Freshness, KeepGathered: cfg.KeepGathered(),
			Now: func() time.Time { return db.Now() }, Spend: spend,
			Keys: keys, Misses: missKeeper{db: db, log: cfg.Logger, metrics: m}},
		spend:     spend,
		keys:      keys,
		log:       cfg.Logger,
		wake:      make(chan struct{}, cfg.Workers),
		feedWake:  make(chan struct{}, 1),
		replica:   replica,
		keyLimits: replicaShare(cfg.SetReplicas),
		sender: webhook.NewSender(db, webhook.SenderConfig{Policy: cfg.WebhookPolicy, Concurrency: cfg.DeliveryConcurrency,
			PerLoop: cfg.DeliveryPerLoop, Timeout: cfg.DeliveryTimeout, Poll: cfg.PollInterval, Logger: cfg.Logger,
			Recorded: func(batch []store.Attempted) { m.recorded(batch); s.erasureEventsRecorded(batch) },
			Panicked: func() { m.counter("enrichd_panics_total", "in", "webhook attempt").Inc() },
			Destinations: map[string]webhook.Destination{store.KindHubSpot: &hubspot.Deliverer{DB: db, Box: cfg.Secrets,
				BaseURL: cfg.HubSpotURL, HTTP: hubspot.HTTPClient(cfg.DeliveryTimeout)}}}),
		metrics:      m,
		erasuresWake: make(chan struct{}, 1),
	}
	return s
}

// replicaName names this process among the replicas of one database: its host, its
// pid and a random part, since a restarted process must not count as the one before.
func replicaName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}

// WakeWorker has an idle worker look for a task: one was queued.
func (s *Pool) WakeWorker() { s.wakeWorker() }

// WakeFeeder has the batch feeder look for rows without a task: a batch was made.
func (s *Pool) WakeFeeder() { s.wakeFeeder() }

// WakeErasures has the completer look for erasures whose events are done.
func (s *Pool) WakeErasures() { s.wakeErasures() }

// WakeSender has the webhook sender look for deliveries due now.
func (s *Pool) WakeSender() { s.sender.Wake() }

// Active counts an API request as activity: maintenance checkpoints the WAL, and the
// idle memory is released, only in quiet times.
func (s *Pool) Active() { s.activity.Add(1) }

// Stopping is closed once the running RunWorkers' context ends: this process settles
// no more tasks. nil, which never fires, before the workers run.
func (s *Pool) Stopping() <-chan struct{} {
	if ch := s.stopping.Load(); ch != nil {
		return *ch
	}
	return nil
}

// KeyInfos tells whose vendor key each source uses for an organization, as the
// workers read it (GET /v1/sources and the dashboard show it).
func (s *Pool) KeyInfos() enrich.KeyInfos { return s.keys }

// Spend is the keeper of what sources cost, which the pipeline consults before and
// after each ask of a source.
func (s *Pool) Spend() enrich.Spend { return s.spend }

// Replica is this process's name among the replicas, which its asks on the books carry.
func (s *Pool) Replica() string { return s.replica }

// SettleDeadAsks is the sweep of the asks on the books of processes that are gone,
// which the heartbeat runs.
func (s *Pool) SettleDeadAsks(ctx context.Context) { s.settleDeadAsks(ctx) }

// FillFor is the fill list a worker reads for a claimed task.
func (s *Pool) FillFor(ctx context.Context, c *store.Claim) ([]string, error) {
	return s.fillFor(ctx, c)
}
