package server

import (
	"net/http"
	"strings"

	"enrichd/enrich"
	"enrichd/store"
)

// addRoutes is the whole API surface. A path's :id is an object's id, a UUID (see
// Router): /v1/watches/import is no watch's.
func addRoutes(r *Router, s *Server) {
	r.Handler(http.MethodPost, "/v1/companies/enrich", s.route("enrich_company", s.authed(handleEnrichCompany(s))))
	r.Handler(http.MethodPost, "/v1/people/enrich", s.route("enrich_person", s.authed(handleEnrichPerson(s))))
	r.Handler(http.MethodGet, "/v1/tasks", s.route("list_tasks", s.authed(handleListTasks(s))))
	r.Handler(http.MethodGet, "/v1/tasks/:id", s.route("get_task", s.authed(handleGetTask(s))))
	r.Handler(http.MethodPost, "/v1/tasks/:id/cancel", s.route("cancel_task", s.authed(handleCancelTask(s))))
	r.Handler(http.MethodPost, "/v1/batches", s.route("create_batch", s.authed(handleCreateBatch(s))))
	r.Handler(http.MethodGet, "/v1/batches", s.route("list_batches", s.authed(handleListBatches(s))))
	r.Handler(http.MethodGet, "/v1/batches/:id", s.route("get_batch", s.authed(handleGetBatch(s))))
	r.Handler(http.MethodGet, "/v1/batches/:id/results", s.route("batch_results", s.authed(handleBatchResults(s))))
	r.Handler(http.MethodGet, "/v1/status", s.route("status", s.authed(handleStatus(s))))
	r.Handler(http.MethodGet, "/v1/sources", s.route("sources", s.authed(handleSources(s))))
	r.Handler(http.MethodPost, "/mcp", s.route("mcp", s.authed(handleMCP(s))))
	r.Handler(http.MethodGet, "/v1/openapi.json", s.route("openapi", s.limitIP(handleOpenAPI())))

	r.Handler(http.MethodPost, "/v1/loops", s.route("create_loop", s.authed(handleCreateLoop(s))))
	r.Handler(http.MethodGet, "/v1/loops", s.route("list_loops", s.authed(handleListLoops(s))))
	r.Handler(http.MethodGet, "/v1/loops/:id", s.route("get_loop", s.authed(handleGetLoop(s))))
	r.Handler(http.MethodPatch, "/v1/loops/:id", s.route("update_loop", s.authed(handleUpdateLoop(s))))
	r.Handler(http.MethodDelete, "/v1/loops/:id", s.route("delete_loop", s.authed(handleDeleteLoop(s))))
	r.Handler(http.MethodPost, "/v1/loops/:id/run", s.route("run_loop", s.authed(handleRunLoop(s))))
	r.Handler(http.MethodPost, "/v1/loops/:id/test", s.route("test_loop", s.authed(handleTestLoop(s))))
	r.Handler(http.MethodGet, "/v1/loops/:id/deliveries", s.route("list_deliveries", s.authed(handleListDeliveries(s))))
	r.Handler(http.MethodPost, "/v1/deliveries/:id/retry", s.route("retry_delivery", s.authed(handleRetryDelivery(s))))

	r.Handler(http.MethodPost, "/v1/suppressions", s.route("create_suppression", s.authed(handleCreateSuppression(s))))
	r.Handler(http.MethodGet, "/v1/suppressions", s.route("list_suppressions", s.authed(handleListSuppressions(s))))
	r.Handler(http.MethodGet, "/v1/suppressions/:id", s.route("get_suppression", s.authed(handleGetSuppression(s))))
	r.Handler(http.MethodDelete, "/v1/suppressions/:id", s.route("delete_suppression", s.authed(handleDeleteSuppression(s))))

	r.Handler(http.MethodGet, "/v1/audit", s.route("list_audit", s.authed(handleListAudit(s))))
	r.Handler(http.MethodPost, "/v1/erasures", s.route("create_erasure", s.authed(handleCreateErasure(s))))
	r.Handler(http.MethodGet, "/v1/erasures", s.route("list_erasures", s.authed(handleListErasures(s))))
	r.Handler(http.MethodGet, "/v1/erasures/:id", s.route("get_erasure", s.authed(handleGetErasure(s))))
	r.Handler(http.MethodGet, "/v1/people/export", s.route("export_person", s.authed(handleExportPerson(s))))

	r.Handler(http.MethodPost, "/v1/watches", s.route("create_watch", s.authed(handleCreateWatch(s))))
	r.Handler(http.MethodGet, "/v1/watches", s.route("list_watches", s.authed(handleListWatches(s))))
	r.Handler(http.MethodGet, "/v1/watches/:id", s.route("get_watch", s.authed(handleGetWatch(s))))
	r.Handler(http.MethodPatch, "/v1/watches/:id", s.route("update_watch", s.authed(handleUpdateWatch(s))))
	r.Handler(http.MethodDelete, "/v1/watches/:id", s.route("delete_watch", s.authed(handleDeleteWatch(s))))
	r.Handler(http.MethodPost, "/v1/watches/:id/run", s.route("run_watch", s.authed(handleRunWatch(s))))
	r.Handler(http.MethodPost, "/v1/watches/import", s.route("import_watches", s.authed(handleImportWatches(s))))

	// The dashboard (package server/dashboard; its handlers are named in its routes.go):
	// pages for people signed in with a session cookie, which never authenticates /v1,
	// as an API key never authenticates these. Its routes:
	//   GET  /dashboard
	//   GET  /
	//   GET  /favicon.ico
	//   GET  /dashboard/static/*file
	//   GET  /dashboard/login
	//   POST /dashboard/login
	//   POST /dashboard/logout
	//   GET  /dashboard/setup
	//   POST /dashboard/setup
	//   GET  /dashboard/install
	//   POST /dashboard/install
	//   GET  /dashboard/
	//   GET  /dashboard/settings/keys
	//   POST /dashboard/settings/keys
	//   POST /dashboard/settings/keys/:id/revoke
	//   GET  /dashboard/sources
	//   GET  /dashboard/settings/sources
	//   POST /dashboard/settings/sources
	//   POST /dashboard/settings/sources/:source
	//   POST /dashboard/settings/sources/:source/clear
	//   GET  /dashboard/credits
	//   GET  /dashboard/credits.csv
	//   GET  /dashboard/tasks
	//   GET  /dashboard/tasks/:id
	//   POST /dashboard/tasks/:id/cancel
	//   GET  /dashboard/try
	//   POST /dashboard/try
	//   GET  /dashboard/loops
	//   POST /dashboard/loops
	//   GET  /dashboard/loops/:id
	//   POST /dashboard/loops/:id
	//   POST /dashboard/loops/:id/destination
	//   POST /dashboard/loops/:id/rotate
	//   POST /dashboard/loops/:id/test
	//   POST /dashboard/loops/:id/run
	//   POST /dashboard/loops/:id/delete
	//   GET  /dashboard/watches
	//   POST /dashboard/watches
	//   POST /dashboard/watches/:id/pause
	//   POST /dashboard/watches/:id/resume
	//   POST /dashboard/watches/:id/run
	//   POST /dashboard/watches/:id/delete
	//   GET  /dashboard/suppressions
	//   POST /dashboard/suppressions
	//   POST /dashboard/suppressions/:id/lift
	//   GET  /dashboard/audit
	//   GET  /dashboard/audit.jsonl
	//   GET  /dashboard/erasures
	//   POST /dashboard/erasures
	//   POST /dashboard/erasures/export
	//   GET  /dashboard/batches
	//   POST /dashboard/batches
	//   POST /dashboard/batches/preview
	//   GET  /dashboard/batches/:id
	//   GET  /dashboard/batches/:id/results
	//   GET  /dashboard/deliveries/:id
	//   POST /dashboard/deliveries/:id/retry
	if s.pages != nil {
		s.pages.Mount(r)
	}
}

// objectNotFound is what a route of an object answers for an id that cannot be one:
// what it answers for an id of no object, by the path's prefix.
var objectNotFound = []struct {
	prefix string
	err    func() error
}{
	{"/v1/tasks/", store.TaskNotFound},
	{"/v1/loops/", store.LoopNotFound},
	{"/v1/deliveries/", store.DeliveryNotFound},
	{"/v1/watches/", store.WatchNotFound},
	{"/v1/batches/", store.BatchNotFound},
	{"/v1/suppressions/", store.SuppressionNotFound},
	{"/v1/erasures/", store.ErasureNotFound},
	{"/dashboard/tasks/", store.TaskNotFound},
	{"/dashboard/loops/", store.LoopNotFound},
	{"/dashboard/deliveries/", store.DeliveryNotFound},
	{"/dashboard/watches/", store.WatchNotFound},
	{"/dashboard/batches/", store.BatchNotFound},
	{"/dashboard/suppressions/", store.SuppressionNotFound},
	{"/dashboard/erasures/", store.ErasureNotFound},
	{"/dashboard/settings/keys/", NoSuchKey},
}

// NoSuchKey is the dashboard's answer for a key its organization does not have.
func NoSuchKey() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "Your organization has no such key."}
}

// RefusedID is the answer to a request the router took to its route though its :id
// is no id (Router): the object not found, as for an id of no object; nil for any
// other request. The guards every route with an id goes through (authed, and the
// dashboard's session check) answer it once they know the client, so that a request
// without a key is 401 whatever its path, and the store never sees the id.
func RefusedID(r *http.Request) error {
	if !notAnID(r) {
		return nil
	}
	for _, o := range objectNotFound {
		if strings.HasPrefix(r.URL.Path, o.prefix) {
			return o.err()
		}
	}
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "not found: the id in the path is not an id"}
}

// unrouted answers a request that no route takes: 405 with the methods its path
// takes (Router.Allowed), else 404; a path under /dashboard/ as a page.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request, allow []string) {
	if len(allow) == 0 {
		s.notFound.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.notAllowed.ServeHTTP(w, r)
}

// unroutedAnswers makes the handlers of unrouted: a 404 and a 405, each named in the
// log and rate-limited by address like any request.
func (s *Server) unroutedAnswers() {
	s.notFound = s.route("not_found", s.limitIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.pages != nil && strings.HasPrefix(r.URL.Path, "/dashboard/") {
			s.pages.Refuse(w, r, &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "There is no such page in the dashboard."})
			return
		}
		s.error(w, r, &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "no such endpoint: " + r.Method + " " + clip(r.URL.Path, 200)})
	})))
	s.notAllowed = s.route("method_not_allowed", s.limitIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow := w.Header().Get("Allow")
		if s.pages != nil && strings.HasPrefix(r.URL.Path, "/dashboard/") {
			s.pages.Refuse(w, r, &enrich.Error{Kind: enrich.KindMethodNotAllowed, Code: "method_not_allowed",
				Message: "This address takes " + allow + " only: the dashboard's own links, buttons and forms use it that way."})
			return
		}
		s.error(w, r, &enrich.Error{Kind: enrich.KindMethodNotAllowed, Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + clip(r.URL.Path, 200) + "; allowed: " + allow})
	})))
}
