package dashboard_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// dashboardPublicRoutes are the dashboard's routes that answer without a session: the
// sign-in, set-password and first-start pages, sign-out, the embedded files and the
// bare prefix.
var dashboardPublicRoutes = map[string]bool{
	"GET /dashboard":               true,
	"GET /dashboard/static/{file}": true,
	"GET /dashboard/login":         true,
	"POST /dashboard/login":        true,
	"POST /dashboard/logout":       true,
	"GET /dashboard/setup":         true,
	"POST /dashboard/setup":        true,
	"GET /dashboard/install":       true,
	"POST /dashboard/install":      true,
}

// dashboardMovedPages are the addresses of pages that moved, and where they are now.
var dashboardMovedPages = map[string]string{
	"/dashboard/settings/sources": "/dashboard/sources",
}

// TestDashboardEveryRouteIsGuarded holds every dashboard route registered in the
// server's source, so a route added later too, to the rules of the issue: a page for
// both roles, a change for admins only, no change from another site, nothing without
// a session, and another organization's object not found.
func TestDashboardEveryRouteIsGuarded(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	acmeLoop, _ := e.CreateLoop("Acme loop", "http://127.0.0.1:9/hook", "company")
	acme := map[string]string{
		"tasks":         e.EnrichCompany(map[string]string{"domain": "acme.com"}), // queued: no workers run
		"loops":         acmeLoop,
		"deliveries":    e.SendTestDelivery(acmeLoop),
		"settings/keys": e.KeyByPrefix("acme", e.Key).ID,
		// A source is no organization's object: one this server does not ask with a
		// key is not found, whoever asks.
		"settings/sources": "pdl",
	}
	otherKey, _ := e.NewOrg("other", 100)
	asOther := []string{"Authorization", "Bearer " + otherKey}
	r := e.Do("POST", "/v1/loops", map[string]any{"name": "Other loop", "webhook_url": "http://127.0.0.1:9/other", "object_type": "company"}, asOther...)
	if r.Status != http.StatusCreated {
		t.Fatalf("other's Loop: %d %s", r.Status, r.Raw)
	}
	otherLoop := r.Str("data.id")
	r = e.Do("POST", "/v1/loops/"+otherLoop+"/test", nil, asOther...)
	if r.Status != http.StatusAccepted {
		t.Fatalf("other's test event: %d %s", r.Status, r.Raw)
	}
	otherDelivery := r.Str("delivery.id")
	acme["watches"] = e.CreateWatch(map[string]any{"object_type": "company", "domain": "acme.com", "loop_id": acmeLoop}).Str("data.id")
	r = e.Do("POST", "/v1/watches", map[string]any{"object_type": "company", "domain": "other.com", "loop_id": otherLoop}, asOther...)
	if r.Status != http.StatusCreated {
		t.Fatalf("other's watch: %d %s", r.Status, r.Raw)
	}
	otherWatch := r.Str("data.id")
	acme["batches"] = e.UploadCSV("domain\nacme.com\n", "").Str("data.id")
	r = e.Do("POST", "/v1/batches", "domain\nother.com\n", append([]string{"Content-Type", "text/csv"}, asOther...)...)
	if r.Status != http.StatusAccepted {
		t.Fatalf("other's batch: %d %s", r.Status, r.Raw)
	}
	otherBatch := r.Str("data.id")
	acme["suppressions"] = e.Suppress(map[string]any{"email": "jane@acme.com"})
	r = e.Do("POST", "/v1/suppressions", map[string]any{"email": "jane@other.com"}, asOther...)
	if r.Status != http.StatusCreated {
		t.Fatalf("other's suppression: %d %s", r.Status, r.Raw)
	}
	otherSuppression := r.Str("data.id")
	r = e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, asOther...)
	if r.Status != http.StatusAccepted {
		t.Fatalf("other's task: %d %s", r.Status, r.Raw)
	}
	other := map[string]string{
		"tasks":            r.Str("task.id"),
		"loops":            otherLoop,
		"deliveries":       otherDelivery,
		"settings/keys":    e.KeyByPrefix("other", otherKey).ID,
		"settings/sources": "apollo",
		"watches":          otherWatch,
		"batches":          otherBatch,
		"suppressions":     otherSuppression,
	}
	e.Clock.Add(time.Hour) // a change to other's objects would show in their times
	otherBefore := e.OtherState(otherKey, otherLoop, other["tasks"])

	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")
	// withID fills a route's {id} (or {source}) with the object of ids its path names.
	withID := func(t *testing.T, route string, ids map[string]string) (string, bool) {
		t.Helper()
		before, param, ok := strings.Cut(route, "{")
		if !ok {
			return route, false
		}
		_, after, _ := strings.Cut(param, "}")
		kind := strings.Trim(strings.TrimPrefix(before, "/dashboard/"), "/")
		id, known := ids[kind]
		if !known {
			t.Fatalf("%s: no object to fill {id} with; add one of kind %q to this test", route, kind)
		}
		return before + id + after, true
	}

	var routes int
	for _, route := range servertest.RegisteredRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		if path != "/dashboard" && !strings.HasPrefix(path, "/dashboard/") {
			continue
		}
		routes++
		t.Run(route, func(t *testing.T) {
			is := is.New(t)
			if method == http.MethodPost {
				// Every form, the public ones too, is refused from another site.
				target, _ := withID(t, path, acme)
				for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "https://evil.example"}} {
					p := admin.Do(method, target, url.Values{}, h...)
					is.Equal(p.Status, http.StatusForbidden) // a form from another site
					is.True(p.Has("another site"))
				}
			}
			if dashboardPublicRoutes[route] {
				return
			}
			target, hasID := withID(t, path, acme)

			// Without a session, the dashboard sends to sign-in and does nothing.
			var p *servertest.WebPage
			if method == http.MethodGet {
				p = e.NewBrowser().Get(target)
			} else {
				p = e.NewBrowser().Post(target, url.Values{})
			}
			is.Equal(p.Status, http.StatusSeeOther)
			is.True(strings.HasPrefix(p.Location, "/dashboard/login"))

			switch method {
			case http.MethodGet:
				// Every page, for both roles, with the dashboard's headers.
				for _, b := range []*servertest.Browser{admin, viewer} {
					p := b.Get(target)
					if to, moved := dashboardMovedPages[path]; moved {
						// A page that moved leads to where it is now, for a signed-in user alone.
						is.Equal(p.Status, http.StatusMovedPermanently)
						is.Equal(p.Location, to)
						p = b.Get(to)
					}
					is.Equal(p.Status, http.StatusOK)
					is.True(strings.Contains(p.Header.Get("Content-Security-Policy"), "default-src 'self'"))
					is.Equal(p.Header.Get("Cache-Control"), "no-store")
					is.Equal(p.Header.Get("X-Frame-Options"), "DENY")
				}
			case http.MethodPost:
				// A viewer reads: every change is refused, before it is looked at.
				p := viewer.Post(target, url.Values{})
				is.Equal(p.Status, http.StatusForbidden)
				is.True(p.Has("Your role is viewer"))
			default:
				t.Fatalf("a dashboard route with method %s: add its rules to this test", method)
			}

			if hasID {
				// Another organization's object, or no object at all, is not found.
				for _, ids := range []map[string]string{other, {"tasks": "nope", "loops": "nope", "deliveries": "nope", "settings/keys": "nope", "settings/sources": "nope", "watches": "nope", "batches": "nope", "suppressions": "nope"}} {
					target, _ := withID(t, path, ids)
					var p *servertest.WebPage
					if method == http.MethodGet {
						p = admin.Get(target)
					} else {
						p = admin.Post(target, url.Values{"name": {"Taken over"}, "webhook_url": {"http://127.0.0.1:9/mine"}, "domain": {"acme.com"}})
					}
					is.Equal(p.Status, http.StatusNotFound)
					is.True(!p.Has("Other loop") && !p.Has("other.com"))
				}
			}
		})
	}
	if routes < 20 {
		t.Fatalf("only %d dashboard routes found in the source", routes)
	}
	is.New(t).Equal(e.OtherState(otherKey, otherLoop, other["tasks"]), otherBefore) // nothing of other's changed
}

// TestDashboardRoutesAreListedInRoutesGo holds the list of the dashboard's routes in
// routes.go, which mounts them from package dashboard, to the routes that package
// registers, both ways, so that routes.go still shows the whole surface.
func TestDashboardRoutesAreListedInRoutesGo(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(servertest.ServerDir, "routes.go"))
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile(`(?m)^\t//   (GET|POST|PUT|PATCH|DELETE) +(/\S*)$`).FindAllStringSubmatch(string(src), -1)
	var inRoutesGo []string
	for _, m := range listed {
		inRoutesGo = append(inRoutesGo, m[1]+" "+servertest.OpenAPIPath(m[2]))
	}
	slices.Sort(inRoutesGo)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	registered := servertest.RoutesIn(t, files)
	if len(registered) < 20 {
		t.Fatalf("only %d routes found in package dashboard", len(registered))
	}
	if !slices.Equal(inRoutesGo, registered) {
		t.Errorf("routes.go lists the dashboard's routes as\n%s\nbut package dashboard registers\n%s",
			strings.Join(inRoutesGo, "\n"), strings.Join(registered, "\n"))
	}
}
