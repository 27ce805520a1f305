// Package server owns enrichd's HTTP API: the listener that caps connections in all and
// per client address, routes, handlers, authentication, rate limits, JSON errors, the
// MCP endpoint that offers the same enrichments to AI agents as tools; and what an
// operator sees of it: health, readiness and metrics. It knows no SQL: all state is in
// store. The background work (the task workers, the webhook sender, the batch feeder,
// the watch scheduler, retention) is package worker's: the server imports none of it,
// and tells it what it made through Config.Background, which serve fills with the
// worker.Pool it runs. The dashboard's pages are package server/dashboard's, mounted
// through Config.Dashboard. The HTTP tests (package server_test) run it through
// server/servertest, which the dashboard's tests share.
package server

import (
	"log"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/netguard"
	"enrichd/secret"
	"enrichd/store"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/time/rate"
)

// Config is how the service behaves: serve's flags. The server reads the HTTP
// surface's fields; wire.WorkerConfig passes the background's (Workers, Lease,
// ShutdownGrace, the retention and the intervals, the sources and the deliveries) on
// to package worker. Zero values take the defaults of DefaultConfig.
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
	// KeyInfos tells whose vendor key each source uses for an organization (wire.New
	// passes the workers'); nil: as the database says.
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

	// ShutdownGrace is how long tasks already claimed may run on once the workers' context
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
	// RetainAudit is how long the audit log's entries are kept, whatever the other
	// settings: a chain is cut to it once a day. Zero keeps them for ever (and is not
	// replaced by the default).
	RetainAudit time.Duration
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

	// Background is told what the API made: a task queued, a batch, an erasure, a
	// delivery due; serve passes the worker.Pool it runs. nil: nobody is told, and no
	// task is run (a server without workers).
	Background Background
	// Metrics is the set the server's metrics are kept in, shared with the background
	// work so that /metrics shows its counters too; nil: a set of its own.
	Metrics *metrics.Set

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
		RetainAudit:      3 * 365 * 24 * time.Hour,

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

// Server is the HTTP API over one database.
type Server struct {
	cfg       Config
	db        *store.DB
	norm      enrich.Normalizer
	log       *slog.Logger
	ipLimits  *limiter
	keyLimits *limiter
	bg        Background
	handler   http.Handler
	metrics   *serverMetrics
	pages     Pages // the dashboard, when Config.Dashboard made one
	// notFound and notAllowed answer a request no route takes (unrouted).
	notFound, notAllowed http.Handler
	// listeners are those Listen made, whose open connections /metrics shows.
	listenersMu sync.Mutex
	listeners   []*Listener
	refusals    refusalLog
	settled     settledAnswers // answers of settled tasks (handleGetTask)
}

// Background is what the server tells the work that runs beside it (package worker's
// Pool), and what it asks of it.
type Background interface {
	WakeWorker()   // a task was queued
	WakeFeeder()   // a batch was made, whose rows want their tasks
	WakeErasures() // an erasure may be ready to complete
	WakeSender()   // a delivery may be due
	Active()       // an API request: the service is not idle
	// Stopping is closed once the workers stop claiming: this process settles no
	// more tasks; nil before they run.
	Stopping() <-chan struct{}
}

// noBackground is the Background of a server without workers.
type noBackground struct{}

func (noBackground) WakeWorker()               {}
func (noBackground) WakeFeeder()               {}
func (noBackground) WakeErasures()             {}
func (noBackground) WakeSender()               {}
func (noBackground) Active()                   {}
func (noBackground) Stopping() <-chan struct{} { return nil }

// New builds the server. The queue is processed by package worker's Pool, which serve
// passes as cfg.Background.
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
	if cfg.Background == nil {
		cfg.Background = noBackground{}
	}
	m := newServerMetrics(cfg.Metrics)
	db.SetLogger(cfg.Logger) // the store reports storage failures there
	if cfg.KeyInfos == nil {
		cfg.KeyInfos = keyInfos{db}
	}
	s := &Server{
		cfg:       cfg,
		db:        db,
		norm:      enrich.Normalizer{NetworkHost: cfg.NetworkHost},
		log:       cfg.Logger,
		ipLimits:  newLimiter(cfg.RateIP),
		keyLimits: newLimiter(cfg.RateKey),
		bg:        cfg.Background,
		metrics:   m,
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

// SetReplicas gives each API key's limiter its share of the limit with live replicas
// alive (the heartbeat's count, worker.Config.SetReplicas), and returns the count it
// had before.
func (s *Server) SetReplicas(live int) (previous int) { return s.keyLimits.setShare(live) }

// Metrics is the set the server's metrics are kept in (Config.Metrics, or its own).
func (s *Server) Metrics() *metrics.Set { return s.metrics.set }

func (s *Server) wakeWorker()   { s.bg.WakeWorker() }
func (s *Server) wakeFeeder()   { s.bg.WakeFeeder() }
func (s *Server) wakeErasures() { s.bg.WakeErasures() }
func (s *Server) wakeSender()   { s.bg.WakeSender() }
