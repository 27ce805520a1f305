// Package server owns enrichd's HTTP API and its task workers: the listener that
// caps connections in all and per client address, routes, handlers, authentication,
// rate limits, JSON errors, the MCP endpoint that offers the same
// enrichments to AI agents as tools, the workers that claim queued tasks, run
// the enrichment pipeline and settle them, and the webhook sender beside them; and what
// an operator sees of it: health, readiness and metrics, and the maintenance that keeps
// the database bounded. It knows no SQL: all state is in store. The dashboard's pages
// are package server/dashboard's, mounted through Config.Dashboard.
package server

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"enrichd/enrich"
	"enrichd/hubspot"
	"enrichd/netguard"
	"enrichd/secret"
	"enrichd/store"
	"enrichd/webhook"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// Config is how the service behaves. Zero values take the defaults of DefaultConfig.
type Config struct {
	// Secrets opens the organizations' own vendor keys (package secret); nil when
	// serve has no secret key file, and then no organization's own key is used.
	Secrets *secret.Box
	// OrgKeyRefresh is how long what was read of an organization's own key is used
	// before it is read again; OrgKeyRefresh (5 s) when 0.
	OrgKeyRefresh time.Duration
	Workers       int           // task workers
	TaskTTL       time.Duration // a task unsettled this long after creation fails as timed_out
	MaxBacklog    int64         // queued tasks an organization may have
	Freshness     time.Duration // stored records younger than this are served without a fetch
	Lease         time.Duration // how long a claim lasts without being extended
	PollInterval  time.Duration // how often idle workers look for work they were not woken for
	SweepInterval time.Duration // how often expired tasks and abandoned claims are handled
	RateIP        Rate          // per client address; zero Limit disables
	RateKey       Rate          // per API key; zero Limit disables
	NetworkHost   string
	// EmailMaxRetrievals bounds the profiles one email lookup retrieves.
	EmailMaxRetrievals int
	Sources            []enrich.Source
	// SourceBudgets are the installation's monthly caps of vendor credits, by source
	// name (serve's --<vendor>-monthly-budget), beside those set in the database
	// (`enrichd sources budget`): the lower applies. CreditUSD is what one vendor
	// credit costs, by source (--<vendor>-credit-usd), to show spend in money.
	SourceBudgets map[string]int64
	CreditUSD     map[string]float64
	// KeyInfos tells whose vendor key each source uses for an organization; nil: the
	// installation's, for every organization.
	KeyInfos enrich.KeyInfos
	// Fill is the server-wide default of the fields the waterfall fills, per object
	// type; an organization's own list (store's FillLists) replaces it. Empty lists
	// keep first-hit-wins.
	Fill enrich.FillLists
	// WebhookPolicy says which webhook URLs are accepted and reached: https to public
	// addresses only, unless AllowPrivate (local development and tests).
	WebhookPolicy netguard.Policy
	// DeliveryConcurrency caps the webhook deliveries in flight; DeliveryPerLoop those
	// to one Loop. Zero takes the sender's defaults.
	DeliveryConcurrency int
	DeliveryPerLoop     int
	DeliveryTimeout     time.Duration // how long one attempt may take; 10 s
	// HubSpotURL is HubSpot's API, which HubSpot Loops write into (hubspot.DefaultURL
	// when ""; serve's --hubspot-url, ENRICHD_HUBSPOT_URL).
	HubSpotURL string
	Logger     *slog.Logger

	// ShutdownGrace is how long tasks already claimed may run on once RunWorkers' context
	// ends; those still running then go back to the queue. Zero puts them back at once.
	ShutdownGrace time.Duration
	// Retain is how long settled tasks and delivery history are kept; zero keeps them
	// for ever (unlike the other fields, zero is not replaced by the default).
	Retain time.Duration
	// RetainRecords is how long a stored record no source refreshed is kept; zero
	// keeps records for ever (and is not replaced by the default).
	RetainRecords time.Duration
	// RetainCandidates is how long what an ambiguous email lookup gathered (other
	// people's profiles, kept for a retry with a hint) is kept and read, at most the
	// freshness window; zero leaves the freshness window alone to bound it (and is not
	// replaced by the default).
	RetainCandidates time.Duration
	// WatchInterval is how often the watches that are due are looked for and their
	// tasks enqueued.
	WatchInterval time.Duration
	// MaintenanceInterval is how often retention and the WAL checkpoint run.
	MaintenanceInterval time.Duration
	// IdleRelease is how long the service is idle (no API request, no task claimed)
	// before the database's writer cache and Go's free heap are given back to the
	// system; it happens between one and two IdleRelease after the last activity.
	IdleRelease time.Duration
	// SeparateAdmin leaves /healthz, /readyz and /metrics to AdminHandler, off the API.
	SeparateAdmin bool

	// Database is the --db the service was started with ("" for the default file):
	// the dashboard's getting started commands name it, a URL's password left out, so
	// that they act on this database rather than on ./enrichd.db.
	Database string
	// SecretKeyFile is the --secret-key-file the service was started with ("" for the
	// default beside a SQLite database): the getting started commands that write data
	// about people name it too, since they must hash it under the same key.
	SecretKeyFile string

	// PublicURL is the address people reach the service at (https behind a proxy that
	// ends TLS): the dashboard's session cookie is Secure when it is https.
	PublicURL string
	// SessionIdle ends a dashboard session unused this long; SessionMax ends any
	// session this long after sign-in.
	SessionIdle time.Duration
	SessionMax  time.Duration
	// Dashboard makes the pages served beside the API under /dashboard/ (serve passes
	// dashboard.New); nil serves the API alone.
	Dashboard func(*Server) Pages

	// Addr is where serve listens for the API.
	Addr string
	// HTTP bounds what one connection may hold of the server, on the API's listener and
	// on the admin one.
	HTTP HTTPLimits
}

// HTTPLimits bounds the connections of a listener, so that no client can hold the
// server open: a connection is dropped when its request headers or body arrive too
// slowly, its response cannot be written in time, or it idles too long, and the
// connections open at once are capped, in all and per client address.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration // to read a request's headers
	// ReadTimeout is the time to read a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout runs from the end of the request headers to the end of the response:
	// it must cover reading the body (ReadTimeout) and the slowest handler, which is
	// creating or updating a Loop (a DNS lookup of up to 5 s, then a write that may wait
	// for the single writer connection).
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration // a keep-alive connection waiting for its next request
	MaxHeaderBytes int           // request line and headers
	// MaxConns caps the connections open at once; past it, the keep-alive connection
	// idle the longest is closed to make room, and with none idle new connections wait
	// in the kernel's backlog until one closes.
	MaxConns int
	// MaxConnsPerAddr caps the connections one client address (for IPv6, a /64) holds
	// open at once; one more is closed as soon as it is accepted (see Listener).
	MaxConnsPerAddr int
}

// DefaultShutdownGrace is serve's default Config.ShutdownGrace. DefaultConfig leaves
// the grace at zero (tasks go back to the queue at once), which is what a server built
// into a program or a test wants; serve, a process stopped by a signal, waits.
const DefaultShutdownGrace = 30 * time.Second

// Rate is a token bucket: Limit requests a second, bursts of up to Burst.
type Rate struct {
	Limit rate.Limit
	Burst int
}

// DefaultConfig returns the defaults documented in docs/cli.md.
func DefaultConfig() Config {
	return Config{
		Workers:       16,
		TaskTTL:       10 * time.Minute,
		MaxBacklog:    10000,
		Freshness:     30 * 24 * time.Hour,
		Lease:         30 * time.Second,
		PollInterval:  500 * time.Millisecond,
		SweepInterval: time.Second,
		RateIP:        Rate{Limit: 100, Burst: 200},
		RateKey:       Rate{Limit: 100, Burst: 200},
		NetworkHost:   enrich.DefaultNetworkHost,
		Logger:        slog.Default(),
		Retain:        90 * 24 * time.Hour,

		RetainRecords:    3 * 365 * 24 * time.Hour,
		RetainCandidates: 7 * 24 * time.Hour,

		MaintenanceInterval: time.Minute,
		WatchInterval:       10 * time.Second,
		IdleRelease:         10 * time.Second,

		EmailMaxRetrievals: enrich.DefaultMaxRetrievals,

		SessionIdle: 12 * time.Hour,
		SessionMax:  7 * 24 * time.Hour,

		Addr: "127.0.0.1:8080",
		HTTP: HTTPLimits{
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    32 << 10,
			MaxConns:          1024,
			MaxConnsPerAddr:   64,
		},
	}
}

// KeepGathered is how long what an ambiguous email lookup gathered is kept and read:
// RetainCandidates, or the freshness window when that is shorter or RetainCandidates
// is zero. A zero Freshness counts as DefaultConfig's, as New takes it.
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

// HTTPServer returns an http.Server for h bounded by the limits; a zero limit takes its
// default.
func (l HTTPLimits) HTTPServer(h http.Handler, errorLog *log.Logger) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := DefaultConfig().HTTP
	for _, f := range []struct{ v, def *time.Duration }{{&l.ReadHeaderTimeout, &def.ReadHeaderTimeout},
		{&l.ReadTimeout, &def.ReadTimeout}, {&l.WriteTimeout, &def.WriteTimeout}, {&l.IdleTimeout, &def.IdleTimeout}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = def.MaxHeaderBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = def.MaxConns
	}
	if l.MaxConnsPerAddr <= 0 {
		l.MaxConnsPerAddr = def.MaxConnsPerAddr
	}
	return l
}

// Server is the HTTP API and the task workers over one database.
type Server struct {
	cfg       Config
	db        *store.DB
	norm      enrich.Normalizer
	pipeline  *enrich.Pipeline
	spend     *spendKeeper
	log       *slog.Logger
	ipLimits  *limiter
	keyLimits *limiter
	wake      chan struct{} // an enqueue wakes an idle worker
	feedWake  chan struct{} // a new batch wakes the feeder
	replica   string        // this process among the replicas that share the database
	sender    *webhook.Sender
	handler   http.Handler
	metrics   *serverMetrics
	pages     Pages // the dashboard, when Config.Dashboard made one
	// notFound and notAllowed answer a request no route takes (unrouted).
	notFound, notAllowed http.Handler
	// activity counts API requests and claims; maintenance reads it to find quiet times.
	activity atomic.Uint64
	// listeners are those Listen made, whose open connections /metrics shows.
	listenersMu sync.Mutex
	listeners   []*Listener
	refusals    refusalLog
	settled     settledAnswers // answers of settled tasks (handleGetTask)
	// erasuresWake wakes the completer of erasures (completeErasures).
	erasuresWake chan struct{}
	// stopping is closed when the running RunWorkers' context ends; nil before any.
	stopping atomic.Pointer[chan struct{}]
}

// New builds the server. Call RunWorkers to process the queue.
func New(db *store.DB, cfg Config) *Server {
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
	if cfg.NetworkHost == "" {
		cfg.NetworkHost = def.NetworkHost
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
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = def.SessionMax
	}
	m := newServerMetrics()
	db.SetLogger(cfg.Logger) // the store reports storage failures there
	replica := replicaName()
	spend := newSpendKeeper(db, cfg.Logger, m, cfg.SourceBudgets, cfg.Sources, replica)
	keys := newOrgKeys(db, cfg.Secrets, cfg.Logger, cfg.OrgKeyRefresh)
	if cfg.KeyInfos == nil {
		cfg.KeyInfos = keys
	}
	var s *Server
	s = &Server{
		cfg:  cfg,
		db:   db,
		norm: enrich.Normalizer{NetworkHost: cfg.NetworkHost},
		pipeline: &enrich.Pipeline{Sources: cfg.Sources, Logger: cfg.Logger, Held: db.Held(),
			MaxRetrievals: cfg.EmailMaxRetrievals, Freshness: cfg.Freshness, KeepGathered: cfg.KeepGathered(),
			Now: func() time.Time { return db.Now() }, Spend: spend,
			Keys: keys, Misses: missKeeper{db: db, log: cfg.Logger, metrics: m}},
		spend:     spend,
		log:       cfg.Logger,
		ipLimits:  newLimiter(cfg.RateIP),
		keyLimits: newLimiter(cfg.RateKey),
		wake:      make(chan struct{}, cfg.Workers),
		feedWake:  make(chan struct{}, 1),
		replica:   replica,
		sender: webhook.NewSender(db, webhook.SenderConfig{Policy: cfg.WebhookPolicy, Concurrency: cfg.DeliveryConcurrency,
			PerLoop: cfg.DeliveryPerLoop, Timeout: cfg.DeliveryTimeout, Poll: cfg.PollInterval, Logger: cfg.Logger,
			Recorded: func(batch []store.Attempted) { m.recorded(batch); s.erasureEventsRecorded(batch) },
			Panicked: func() { m.counter("enrichd_panics_total", "in", "webhook attempt").Inc() },
			Destinations: map[string]webhook.Destination{store.KindHubSpot: &hubspot.Deliverer{DB: db, Box: cfg.Secrets,
				BaseURL: cfg.HubSpotURL, HTTP: hubspotClient(cfg.DeliveryTimeout)}}}),
		metrics:      m,
		erasuresWake: make(chan struct{}, 1),
	}
	s.settled.epoch = db.ErasureEpoch
	if cfg.Dashboard != nil {
		s.pages = cfg.Dashboard(s)
	}
	router := &Router{}
	addRoutes(router, s)
	if !cfg.SeparateAdmin {
		addAdminRoutes(router, s, true)
	}
	s.unroutedAnswers()
	s.handler = s.logRequests(router.handler(s.unrouted))
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// replicaName names this process among the replicas of one database: its host, its
// pid and a random part, since a restarted process must not count as the one before.
func replicaName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}
