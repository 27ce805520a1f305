package e2e

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardHubSpotLoopInABrowser: an admin creates a HubSpot Loop on the Loops
// page in a real browser, choosing HubSpot in the Loop form, against a serve asking a
// fake HubSpot: the token is checked with HubSpot, and the Loop's page and the list
// show its last four characters, never the token, which no page, log or file holds in
// clear.
func TestDashboardHubSpotLoopInABrowser(t *testing.T) {
	chromium := findChromium(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	defer cancel()
	const token = "pat-na1-browser-0000-7f3e"
	hubspot := &crm{token: token, next: 100, objects: map[string]map[string]map[string]string{"companies": {}, "contacts": {}}}
	srv := httptest.NewServer(hubspot)
	defer srv.Close()
	db := newDB(t)
	b, logs, _ := adminSignedIn(t, ctx, chromium, db, nil, "--sources", "dataset", "--hubspot-url", srv.URL)

	b.open("/dashboard/loops", "form#create-loop")
	b.fill("form#create-loop", "name", "HubSpot companies")
	b.click(`form#create-loop input[name=kind][value=hubspot]`)
	b.fill("form#create-loop", "token", token)
	b.step("choosing companies", chromedp.SetValue(chromedp.CSS(`form#create-loop select[name=object_type]`), "company"))
	b.check(`form#create-loop input[name=enabled]`)
	b.submit("form#create-loop")
	b.waitText(".notice", "HubSpot accepted its token")
	b.waitText("#hubspot-destination", "…7f3e")
	if strings.Contains(b.text("main"), token) {
		t.Errorf("the Loop's page shows the token")
	}
	b.axe("loop (HubSpot)")

	b.open("/dashboard/loops", "tr.loop")
	contains(t, b.text("tr.loop"), "HubSpot companies")
	contains(t, b.text("tr.loop .destination-hubspot"), "HubSpot")
	contains(t, b.text("tr.loop"), "…7f3e")
	if strings.Contains(b.text("main"), token) {
		t.Errorf("the Loops page shows the token")
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log holds the token")
	}
	notInFiles(t, filepath.Dir(db), token)
	b.checkConsole()
}
