package server

import (
	"net/http"
	"strings"

	"enrichd/enrich"

	"github.com/julienschmidt/httprouter"
)

// addRoutes is the whole API surface.
func addRoutes(r *httprouter.Router, s *Server) {
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

	r.Handler(http.MethodPost, "/v1/watches", s.route("create_watch", s.authed(handleCreateWatch(s))))
	r.Handler(http.MethodGet, "/v1/watches", s.route("list_watches", s.authed(handleListWatches(s))))
	r.Handler(http.MethodGet, "/v1/watches/:id", s.route("get_watch", s.authed(handleGetWatch(s))))
	r.Handler(http.MethodPatch, "/v1/watches/:id", s.route("update_watch", s.authed(handleUpdateWatch(s))))
	r.Handler(http.MethodDelete, "/v1/watches/:id", s.route("delete_watch", s.authed(handleDeleteWatch(s))))
	r.Handler(http.MethodPost, "/v1/watches/:id/run", s.route("run_watch", s.authed(handleRunWatch(s))))
	// POST /v1/watches/import: see handleWatchPost for why it is routed as an id.
	r.Handler(http.MethodPost, "/v1/watches/:id", s.route("import_watches", s.authed(handleWatchPost(s))))

	// The dashboard: pages for people signed in with a session cookie, which never
	// authenticates /v1, as an API key never authenticates these.
	r.Handler(http.MethodGet, "/dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
	// The site's root is the dashboard for whoever opens the address serve printed; a
	// 302, not a 301, so that no browser keeps it should the root ever answer itself.
	r.Handler(http.MethodGet, "/", s.route("root", s.limitIP(http.RedirectHandler("/dashboard/", http.StatusFound))))
	r.Handler(http.MethodGet, "/favicon.ico", s.route("favicon", s.limitIP(handleFavicon())))
	r.Handler(http.MethodGet, "/dashboard/static/*file", s.route("dashboard_static", serveDashboardStatic()))
	r.Handler(http.MethodGet, "/dashboard/login", s.dashPage("dashboard_login_page", anyone, handleLoginPage(s)))
	r.Handler(http.MethodPost, "/dashboard/login", s.dashPage("dashboard_login", anyone, handleLogin(s)))
	r.Handler(http.MethodPost, "/dashboard/logout", s.dashPage("dashboard_logout", anyone, handleLogout(s)))
	r.Handler(http.MethodGet, "/dashboard/setup", s.dashPage("dashboard_setup_page", anyone, handleSetupPage(s)))
	r.Handler(http.MethodPost, "/dashboard/setup", s.dashPage("dashboard_setup", anyone, handleSetup(s)))
	r.Handler(http.MethodGet, "/dashboard/install", s.dashPage("dashboard_install_page", anyone, handleInstallPage(s)))
	r.Handler(http.MethodPost, "/dashboard/install", s.dashPage("dashboard_install", anyone, handleInstall(s)))
	r.Handler(http.MethodGet, "/dashboard/", s.dashPage("dashboard_overview", viewer, handleOverview(s)))
	r.Handler(http.MethodGet, "/dashboard/settings/keys", s.dashPage("dashboard_keys", viewer, handleKeys(s)))
	r.Handler(http.MethodPost, "/dashboard/settings/keys", s.dashPage("dashboard_create_key", admin, handleCreateKey(s)))
	r.Handler(http.MethodPost, "/dashboard/settings/keys/:id/revoke", s.dashPage("dashboard_revoke_key", admin, handleRevokeKey(s)))
	r.Handler(http.MethodGet, "/dashboard/credits", s.dashPage("dashboard_credits", viewer, handleCredits(s)))
	r.Handler(http.MethodGet, "/dashboard/credits.csv", s.dashPage("dashboard_credits_csv", viewer, handleCreditsCSV(s)))
	r.Handler(http.MethodGet, "/dashboard/tasks", s.dashPage("dashboard_tasks", viewer, handleTaskList(s)))
	r.Handler(http.MethodGet, "/dashboard/tasks/:id", s.dashPage("dashboard_task", viewer, handleTaskPage(s)))
	r.Handler(http.MethodPost, "/dashboard/tasks/:id/cancel", s.dashPage("dashboard_cancel_task", admin, handleDashCancelTask(s)))
	r.Handler(http.MethodGet, "/dashboard/try", s.dashPage("dashboard_try_page", viewer, handleTryPage(s)))
	r.Handler(http.MethodPost, "/dashboard/try", s.dashPage("dashboard_try", admin, handleTry(s)))
	r.Handler(http.MethodGet, "/dashboard/loops", s.dashPage("dashboard_loops", viewer, handleLoopsPage(s)))
	r.Handler(http.MethodPost, "/dashboard/loops", s.dashPage("dashboard_create_loop", admin, handleCreateLoopForm(s)))
	r.Handler(http.MethodGet, "/dashboard/loops/:id", s.dashPage("dashboard_loop", viewer, handleLoopPage(s)))
	r.Handler(http.MethodPost, "/dashboard/loops/:id", s.dashPage("dashboard_update_loop", admin, handleEditLoopForm(s)))
	r.Handler(http.MethodPost, "/dashboard/loops/:id/destination", s.dashPage("dashboard_loop_destination", admin, handleLoopDestinationForm(s)))
	r.Handler(http.MethodPost, "/dashboard/loops/:id/rotate", s.dashPage("dashboard_rotate_loop_secret", admin, handleRotateLoopSecret(s)))
	r.Handler(http.MethodPost, "/dashboard/loops/:id/test", s.dashPage("dashboard_test_loop", admin, handleTestLoopForm(s)))
	r.Handler(http.MethodPost, "/dashboard/loops/:id/run", s.dashPage("dashboard_run_loop", admin, handleRunLoopForm(s)))
	r.Handler(http.MethodPost, "/dashboard/loops/:id/delete", s.dashPage("dashboard_delete_loop", admin, handleDeleteLoopForm(s)))
	r.Handler(http.MethodGet, "/dashboard/watches", s.dashPage("dashboard_watches", viewer, handleWatchesPage(s)))
	r.Handler(http.MethodPost, "/dashboard/watches", s.dashPage("dashboard_create_watch", admin, handleCreateWatchForm(s)))
	r.Handler(http.MethodPost, "/dashboard/watches/:id/pause", s.dashPage("dashboard_pause_watch", admin, handleSetWatchEnabled(s, false)))
	r.Handler(http.MethodPost, "/dashboard/watches/:id/resume", s.dashPage("dashboard_resume_watch", admin, handleSetWatchEnabled(s, true)))
	r.Handler(http.MethodPost, "/dashboard/watches/:id/run", s.dashPage("dashboard_run_watch", admin, handleRunWatchForm(s)))
	r.Handler(http.MethodPost, "/dashboard/watches/:id/delete", s.dashPage("dashboard_delete_watch", admin, handleDeleteWatchForm(s)))
	r.Handler(http.MethodGet, "/dashboard/batches", s.dashPage("dashboard_batches", viewer, handleBatchesPage(s)))
	r.Handler(http.MethodPost, "/dashboard/batches", s.dashPage("dashboard_create_batch", admin, handleCreateBatchForm(s)))
	r.Handler(http.MethodPost, "/dashboard/batches/preview", s.dashPage("dashboard_preview_batch", admin, handleBatchPreview(s)))
	r.Handler(http.MethodGet, "/dashboard/batches/:id", s.dashPage("dashboard_batch", viewer, handleBatchPage(s)))
	r.Handler(http.MethodGet, "/dashboard/batches/:id/results", s.dashPage("dashboard_batch_results", viewer, handleDashBatchResults(s)))
	r.Handler(http.MethodGet, "/dashboard/deliveries/:id", s.dashPage("dashboard_delivery", viewer, handleDeliveryPage(s)))
	r.Handler(http.MethodPost, "/dashboard/deliveries/:id/retry", s.dashPage("dashboard_retry_delivery", admin, handleRetryDeliveryForm(s)))

	r.NotFound = s.route("not_found", s.limitIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/dashboard/") {
			setDashHeaders(w)
			r = s.withSessionUser(r)
			s.dashError(w, r, &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "There is no such page in the dashboard."})
			return
		}
		s.error(w, r, &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})))
	r.MethodNotAllowed = s.route("method_not_allowed", s.limitIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The router lists OPTIONS, which the API does not answer.
		allow := strings.ReplaceAll(strings.ReplaceAll(w.Header().Get("Allow"), ", OPTIONS", ""), "OPTIONS, ", "")
		w.Header().Set("Allow", allow)
		if strings.HasPrefix(r.URL.Path, "/dashboard/") {
			setDashHeaders(w)
			r = s.withSessionUser(r)
			s.dashError(w, r, &enrich.Error{Kind: enrich.KindMethodNotAllowed, Code: "method_not_allowed",
				Message: "This address takes " + allow + " only: the dashboard's own links, buttons and forms use it that way."})
			return
		}
		s.error(w, r, &enrich.Error{Kind: enrich.KindMethodNotAllowed, Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + allow})
	})))
}
