package dashboard

import (
	"net/http"

	"enrichd/enrich"
	"enrichd/server"
)

// Mount adds the dashboard's pages to the server's router: server/routes.go lists
// their paths beside the API's.
func (s *Dashboard) Mount(r *server.Router) {
	r.Handler(http.MethodGet, "/dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
	// The site's root is the dashboard for whoever opens the address serve printed; a
	// 302, not a 301, so that no browser keeps it should the root ever answer itself.
	r.Handler(http.MethodGet, "/", s.srv.Route("root", s.srv.LimitIP(http.RedirectHandler("/dashboard/", http.StatusFound))))
	r.Handler(http.MethodGet, "/favicon.ico", s.srv.Route("favicon", s.srv.LimitIP(handleFavicon())))
	r.Handler(http.MethodGet, "/dashboard/static/*file", s.srv.Route("dashboard_static", serveDashboardStatic()))
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
	r.Handler(http.MethodGet, "/dashboard/sources", s.dashPage("dashboard_sources", viewer, handleSourcesPage(s)))
	r.Handler(http.MethodGet, "/dashboard/settings/sources", s.dashPage("dashboard_fill_lists", viewer, handleOldSourcesSettings()))
	r.Handler(http.MethodPost, "/dashboard/settings/sources", s.dashPage("dashboard_set_fill_lists", admin, handleSetFillLists(s)))
	r.Handler(http.MethodPost, "/dashboard/settings/sources/:source", s.dashPage("dashboard_set_source_key", admin, handleSetSourceKey(s)))
	r.Handler(http.MethodPost, "/dashboard/settings/sources/:source/clear", s.dashPage("dashboard_clear_source_key", admin, handleClearSourceKey(s)))
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
	r.Handler(http.MethodGet, "/dashboard/suppressions", s.dashPage("dashboard_suppressions", viewer, handleSuppressionsPage(s)))
	r.Handler(http.MethodPost, "/dashboard/suppressions", s.dashPage("dashboard_add_suppressions", admin, handleAddSuppressions(s)))
	r.Handler(http.MethodPost, "/dashboard/suppressions/:id/lift", s.dashPage("dashboard_lift_suppression", admin, handleLiftSuppression(s)))
	r.Handler(http.MethodGet, "/dashboard/audit", s.dashPage("dashboard_audit", viewer, handleAuditPage(s)))
	r.Handler(http.MethodGet, "/dashboard/audit.jsonl", s.dashPage("dashboard_audit_download", viewer, handleAuditDownload(s)))
	r.Handler(http.MethodGet, "/dashboard/erasures", s.dashPage("dashboard_erasures", viewer, handleErasuresPage(s)))
	r.Handler(http.MethodPost, "/dashboard/erasures", s.dashPage("dashboard_erase", admin, handleErase(s)))
	r.Handler(http.MethodPost, "/dashboard/erasures/export", s.dashPage("dashboard_export_person", admin, handleExport(s)))
	r.Handler(http.MethodGet, "/dashboard/batches", s.dashPage("dashboard_batches", viewer, handleBatchesPage(s)))
	r.Handler(http.MethodPost, "/dashboard/batches", s.dashPage("dashboard_create_batch", admin, handleCreateBatchForm(s)))
	r.Handler(http.MethodPost, "/dashboard/batches/preview", s.dashPage("dashboard_preview_batch", admin, handleBatchPreview(s)))
	r.Handler(http.MethodGet, "/dashboard/batches/:id", s.dashPage("dashboard_batch", viewer, handleBatchPage(s)))
	r.Handler(http.MethodGet, "/dashboard/batches/:id/results", s.dashPage("dashboard_batch_results", viewer, handleDashBatchResults(s)))
	r.Handler(http.MethodGet, "/dashboard/deliveries/:id", s.dashPage("dashboard_delivery", viewer, handleDeliveryPage(s)))
	r.Handler(http.MethodPost, "/dashboard/deliveries/:id/retry", s.dashPage("dashboard_retry_delivery", admin, handleRetryDeliveryForm(s)))
}

// Refuse answers a request under /dashboard/ that no page takes (no such page, no such
// method) as a page, showing the navigation to someone signed in.
func (s *Dashboard) Refuse(w http.ResponseWriter, r *http.Request, err *enrich.Error) {
	setDashHeaders(w)
	r = s.withSessionUser(r)
	s.dashError(w, r, err)
}
