package e2e

import (
	"context"
	"strings"
	"testing"
)

// TestDashboardSourcesInABrowser: an admin sets the organization's own PDL key on
// the Sources page in a real browser, against a serve asking a fake PDL: the key is
// checked with the vendor, shown by its last 4 characters, and cleared again; the
// page passes axe-core and fits a phone's width.
func TestDashboardSourcesInABrowser(t *testing.T) {
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	defer cancel()
	const good = "pdl-browser-own-key-0a1b9f3c"
	vendor := newKeyVendor(t, good)
	t.Setenv("PDL_API_KEY", "pdl-installation-key-7777")
	t.Setenv("ENRICHD_PDL_URL", vendor.URL)
	b, logs, base := adminSignedIn(t, ctx, chromium, newDB(t), nil, "--sources", "dataset,pdl")

	b.open("/dashboard/sources", "tr#key-pdl")
	contains(t, b.text("tr#key-pdl .whose"), "the installation's")
	b.click("tr#key-pdl details summary")
	b.mu.Lock()
	b.expected[base+"/dashboard/settings/sources/pdl"] = true // the refused key's 422
	b.mu.Unlock()
	b.fill("form#set-key-pdl", "key", "pdl-wrong-key-0000")
	b.submit("form#set-key-pdl")
	b.waitText("form#set-key-pdl p.error", "pdl refused the key, so it was not stored")
	b.fill("form#set-key-pdl", "key", good)
	b.check(`form#set-key-pdl input[name=allow_fallback]`)
	b.submit("form#set-key-pdl")
	b.waitText(".notice", "your organization now uses its own key")
	contains(t, b.text("tr#key-pdl .whose"), "your own key …9f3c")
	contains(t, b.text("tr#key-pdl"), "the installation's key is used")
	if strings.Contains(b.text("main"), good) {
		t.Errorf("the page shows the key")
	}
	b.axe("sources")
	b.viewport(phoneWidth, phoneHeight, "light")
	b.open("/dashboard/sources", "tr#key-pdl")
	b.fitsWidth("sources")
	b.viewport(desktopWidth, desktopHeight, "light")

	b.click(`tr#key-pdl details.confirm:last-of-type summary`)
	b.submit(`form[action="/dashboard/settings/sources/pdl/clear"]`)
	b.waitText(".notice", "uses the installation's key again")
	contains(t, b.text("tr#key-pdl .whose"), "the installation's")
	if strings.Contains(logs.String(), good) {
		t.Errorf("the key is in serve's log")
	}
	b.checkConsole()
}
