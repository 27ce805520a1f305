// Package wire builds enrichd's HTTP server (package server) and its background work
// (package worker) on one database and wires them, neither of which imports the other:
// serve, the benchmarks and the tests start enrichd through it.
package wire

import (
	"enrichd/server"
	"enrichd/store"
	"enrichd/worker"

	"github.com/VictoriaMetrics/metrics"
)

// New builds the HTTP server and the background work on one database, each told of
// the other through its Config: the server wakes the workers (server.Background), both
// count in one metrics set (cfg.Metrics, or a new one), and the workers read batch rows
// back as the API does (server.RowRequest), give the rate limiter its share among the
// replicas, and tell GET /v1/sources whose key each source uses (cfg.KeyInfos, unless
// set).
func New(db *store.DB, cfg server.Config) (*server.Server, *worker.Pool) {
	var srv *server.Server
	wcfg := WorkerConfig(cfg)
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	wcfg.Metrics = cfg.Metrics
	wcfg.SetReplicas = func(live int) int { return srv.SetReplicas(live) }
	work := worker.New(db, wcfg)
	cfg.Background = work
	if cfg.KeyInfos == nil {
		cfg.KeyInfos = work.KeyInfos()
	}
	srv = server.New(db, cfg)
	return srv, work
}

// WorkerConfig is the background's share of serve's configuration: the fields of the
// same names.
func WorkerConfig(cfg server.Config) worker.Config {
	return worker.Config{
		Workers: cfg.Workers, TaskTTL: cfg.TaskTTL, MaxBacklog: cfg.MaxBacklog, Freshness: cfg.Freshness,
		Lease: cfg.Lease, PollInterval: cfg.PollInterval, SweepInterval: cfg.SweepInterval,
		EmailMaxRetrievals: cfg.EmailMaxRetrievals, Sources: cfg.Sources, SourceBudgets: cfg.SourceBudgets,
		Secrets: cfg.Secrets, HubSpotURL: cfg.HubSpotURL, OrgKeyRefresh: cfg.OrgKeyRefresh, Fill: cfg.Fill,
		WebhookPolicy: cfg.WebhookPolicy, DeliveryConcurrency: cfg.DeliveryConcurrency,
		DeliveryPerLoop: cfg.DeliveryPerLoop, DeliveryTimeout: cfg.DeliveryTimeout, Logger: cfg.Logger,
		ShutdownGrace: cfg.ShutdownGrace, Retain: cfg.Retain, RetainRecords: cfg.RetainRecords,
		RetainCandidates: cfg.RetainCandidates, RetainAudit: cfg.RetainAudit, WatchInterval: cfg.WatchInterval,
		MaintenanceInterval: cfg.MaintenanceInterval, IdleRelease: cfg.IdleRelease, SessionIdle: cfg.SessionIdle,
		RowRequest: server.RowRequest(cfg.NetworkHost),
	}
}
