package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// The dashboard at a phone's width, checked by what a person would see go wrong: a
// page wider than the screen, a word broken across lines (a table's column narrower
// than a name in it, a command broken inside a flag), a navigation that fills the
// screen before the page does.

// longestUnbrokenWord is the longest word the layout must keep on one line: longer
// ones (an id, a URL, a path) may break where they must.
const longestUnbrokenWord = 24

// phoneLayout fails the test on what the page shown, at a phone's width, lays out
// badly: the document wider than the window, a word of up to longestUnbrokenWord
// characters in the content broken across lines, or the header (the name, the menu,
// the user) taking more than one row, or showing the navigation's links with its
// menu closed.
func (b *browser) phoneLayout(page string) {
	b.t.Helper()
	found := evalIn[[]string](b, "laying out "+page, fmt.Sprintf(`(() => {
		const out = [];
		const root = document.documentElement;
		if (root.scrollWidth > root.clientWidth + 1) out.push("the document is " + root.scrollWidth + " px wide in a " + root.clientWidth + " px window");
		const visible = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden"; };
		const where = e => { const c = e.closest("[id]"); return "<" + e.tagName.toLowerCase() + ">" + (c ? " in #" + c.id : ""); };

		// Words broken across lines: a word's text taking two line boxes.
		const main = document.querySelector("main");
		const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
		const range = document.createRange();
		const broken = new Set();
		for (let n = walker.nextNode(); n; n = walker.nextNode()) {
			const el = n.parentElement;
			if (!el || !visible(el) || el.closest("pre")) continue; // a pre scrolls; it never wraps
			for (const m of n.data.matchAll(/\S+/g)) {
				if (m[0].length > %d) continue;
				range.setStart(n, m.index);
				range.setEnd(n, m.index + m[0].length);
				const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.bottom)));
				if (lines.size > 1 && !broken.has(m[0])) {
					broken.add(m[0]);
					out.push("the word " + JSON.stringify(m[0]) + " is broken across " + lines.size + " lines in " + where(el) +
						" (" + Math.round(el.getBoundingClientRect().width) + " px wide)");
				}
			}
		}

		// The header: one row, the navigation's links behind its menu.
		const header = document.querySelector("header.top");
		const parts = [...header.children].filter(visible);
		const rects = parts.map(e => e.getBoundingClientRect());
		const top = Math.max(...rects.map(r => r.top)), bottom = Math.min(...rects.map(r => r.bottom));
		if (rects.length && top >= bottom) out.push("the header takes more than one row: " + parts.map(e => where(e) + " at " + Math.round(e.getBoundingClientRect().top)).join(", "));
		const links = [...header.querySelectorAll("nav a")].filter(visible);
		if (links.length) out.push("the menu is closed, yet the header shows " + links.length + " navigation links");
		return out;
	})()`, longestUnbrokenWord))
	for _, f := range found {
		b.t.Errorf("%s at %d px: %s", page, phoneWidth, f)
	}
}

// TestDashboardOnAPhoneInABrowser uses the dashboard at 390 px as a person with a
// phone would, in a real Chromium, on a serve asking the sim source: the header keeps
// to one row with the navigation behind a menu, which opens, fits and leads on; an
// email that fits several people offers the retry with the hints that tell them
// apart, which finds the person; a company's fields and their sources read whole; a
// demo batch from `enrichd sim sample` is previewed and followed; and the Sources
// page, its chart titled and named, reads at a phone's width and at a desk's. Every
// page is checked by phoneLayout and axe-core; at 1280 px the menu's button is not
// shown and the navigation is.
func TestDashboardOnAPhoneInABrowser(t *testing.T) {
	chromium := findChromium(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), browserBudget)
	defer cancel()
	db := newDB(t)
	// Signed in at a phone's width.
	b, _, _ := adminSignedIn(t, ctx, chromium, db, func(b *browser) { b.viewport(phoneWidth, phoneHeight, "light") },
		"--sources", "sim", "--sim-credits", "1")
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	b.phoneLayout("overview")
	b.axe("overview, the menu closed (phone)")

	// The menu: open, every page's link shown in the window, one a row; it leads on.
	b.click("header .menu-button")
	b.waitUntil("the menu is open", `document.querySelector("#main-nav").matches(":popover-open")`)
	problems := evalIn[[]string](b, "measuring the open menu", `(() => {
		const out = [], links = [...document.querySelectorAll("#main-nav a")];
		let last = -1;
		for (const a of links) {
			const r = a.getBoundingClientRect();
			if (r.width === 0 || r.left < 0 || r.right > window.innerWidth || r.bottom > window.innerHeight) out.push(a.textContent + " is not in the window");
			if (r.top < last + r.height / 2) out.push(a.textContent + " shares a row");
			last = r.top;
		}
		if (links.length !== 12) out.push(links.length + " links, want 12");
		return out;
	})()`)
	for _, p := range problems {
		t.Errorf("the open menu at %d px: %s", phoneWidth, p)
	}
	b.axe("overview, the menu open (phone)")
	b.shot("menu-phone")
	b.click(`#main-nav a[href="/dashboard/try"]`)
	b.waitPath("/dashboard/try")
	b.phoneLayout("try")

	// An address two sim employees fit: the answer offers the retry with a hint.
	b.click(`form#try input[name=kind][value=person_email]`)
	b.fill("form#try", "email", "edsger@acme.com")
	b.submit("form#try")
	b.waitPath("/dashboard/tasks/")
	b.waitText("#task-status", "failed")
	b.waitText("#task-error", "ambiguous")
	b.waitVisible("form#retry-hints input[name=fullName]")
	b.phoneLayout("an ambiguous answer")
	b.axe("an ambiguous answer (phone)")
	b.shot("ambiguous-phone")
	b.fill("form#retry-hints", "fullName", "Edsger Dijkstra")
	b.submit("form#retry-hints")
	b.waitPath("/dashboard/tasks/")
	b.waitText("#task-status", "succeeded")
	b.waitText("#person-card h3", "Edsger Dijkstra")
	contains(t, b.text("#email-match"), "edsger@acme.com")

	// A company: each field beside its source, whole, on a card of its own.
	b.open("/dashboard/try", "form#try")
	b.click(`form#try input[name=kind][value=company_domain]`)
	b.fill("form#try", "domain", "northwind.com")
	b.submit("form#try")
	b.waitPath("/dashboard/tasks/")
	b.waitText("#task-status", "succeeded")
	b.waitText("#task-provenance #field-employee_count", "sim")
	b.phoneLayout("task (company)")
	b.axe("task (company) (phone)")
	b.shot("task-phone")

	// A demo batch: the people `enrichd sim sample` prints, previewed and followed.
	list := filepath.Join(t.TempDir(), "people.csv")
	if err := os.WriteFile(list, []byte(mustCLI(t, "sim", "sample", "--count", "3")), 0o600); err != nil {
		t.Fatal(err)
	}
	b.open("/dashboard/batches", "form#upload")
	b.phoneLayout("upload")
	b.step("choosing the file", chromedp.SetUploadFiles(chromedp.CSS(`form#upload input[name=file]`), []string{list}))
	b.submit("form#upload")
	b.waitPath("/dashboard/batches/preview")
	b.waitText("#preview-columns", "read as email")
	b.phoneLayout("upload: check and confirm")
	b.axe("upload: check and confirm (phone)")
	b.submit("form#confirm-upload")
	b.waitUntil("the batch's page is open", `/^\/dashboard\/batches\/[0-9a-f]{8}-/.test(location.pathname) && document.readyState === "complete"`)
	b.waitText("#batch-status", "done")
	b.waitText("#batch-done", "3 of 3")
	b.phoneLayout("a batch")
	b.axe("a batch (phone)")

	// Sources: one page; its chart has a title, a unit and an accessible name.
	b.open("/dashboard/settings/sources", "section#source-sim") // the old address leads there
	b.waitPath("/dashboard/sources")
	name := evalIn[string](b, "naming the chart", `(() => {
		const svg = document.querySelector("#source-sim svg.chart");
		return svg.getAttribute("aria-labelledby").split(" ").map(id => document.getElementById(id).textContent.trim()).join(" ");
	})()`)
	contains(t, name, "sim")
	contains(t, name, "Vendor credits per day")
	contains(t, evalIn[string](b, "reading the chart's unit", `document.querySelector("#source-sim svg.chart text.unit").textContent`), "credits")
	b.phoneLayout("sources")
	b.axe("sources (phone)")
	b.viewport(desktopWidth, desktopHeight, "light")
	b.open("/dashboard/sources", "section#source-sim")
	b.axe("sources")
	if evalIn[bool](b, "looking for the menu's button", `getComputedStyle(document.querySelector("header .menu-button")).display !== "none"`) ||
		!evalIn[bool](b, "looking at the navigation", `[...document.querySelectorAll("#main-nav a")].every(a => a.getBoundingClientRect().width > 0)`) {
		t.Errorf("at %d px the header shows the menu's button, or hides the navigation", desktopWidth)
	}
	b.shot("sources-page")

	b.checkConsole()
	if !t.Failed() {
		dir := t.TempDir()
		if os.Getenv("ENRICHD_UPDATE_SCREENSHOTS") == "1" {
			dir = filepath.Join("..", "docs", "screenshots")
		}
		b.saveShots(dir)
	}
}
