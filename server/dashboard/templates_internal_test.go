package dashboard

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardTemplatesKeepToTheCSP reads every template for what the pages'
// Content-Security-Policy (default-src 'self') would block in a browser, where no
// handler test would see it: inline scripts and styles, event handler attributes,
// javascript: URLs, and htmx's inline handlers and eval.
func TestDashboardTemplatesKeepToTheCSP(t *testing.T) {
	blocked := map[string]*regexp.Regexp{
		"an inline script":         regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]`),
		"a script not from 'self'": regexp.MustCompile(`(?i)<script[^>]*\ssrc="(https?:)?//`),
		"a style element":          regexp.MustCompile(`(?i)<style[\s>]`),
		"a style attribute":        regexp.MustCompile(`(?i)\sstyle=`),
		"an event handler":         regexp.MustCompile(`(?i)\son[a-z]+=`),
		"an htmx inline handler":   regexp.MustCompile(`(?i)\s(data-)?hx-on`),
		"a javascript: URL":        regexp.MustCompile(`(?i)javascript:`),
		"a stylesheet elsewhere":   regexp.MustCompile(`(?i)<link[^>]*\shref="(https?:)?//`),
	}
	files, err := fs.Glob(dashboardFiles, "templates/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	for _, name := range files {
		raw, err := fs.ReadFile(dashboardFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		for what, re := range blocked {
			if m := re.Find(raw); m != nil {
				t.Errorf("%s has %s (%q), which the CSP blocks", name, what, m)
			}
		}
	}
	// htmx would otherwise add a <style> element of its own, and evaluate hx-on.
	layout, err := fs.ReadFile(dashboardFiles, "templates/_layout.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"includeIndicatorStyles": false`, `"allowEval": false`} {
		if !strings.Contains(string(layout), want) {
			t.Errorf("the layout's htmx-config lacks %s", want)
		}
	}
}

// TestDashboardHtmxTargetsHaveFragments checks that every element htmx swaps has a
// fragment of its page that render sends alone when htmx names it in HX-Target;
// without one, htmx would swap the whole page into the element.
func TestDashboardHtmxTargetsHaveFragments(t *testing.T) {
	pages := parseDashboardPages()
	target := regexp.MustCompile(`hx-target="([^"]*)"`)
	idOf := regexp.MustCompile(`\sid="([^"{]+)"`)
	found := 0
	for name := range pages {
		raw, err := fs.ReadFile(dashboardFiles, "templates/"+name+".html")
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range regexp.MustCompile(`<[a-z]+\s[^>]*hx-(get|post)="[^>]*>`).FindAll(raw, -1) {
			found++
			m := target.FindSubmatch(tag)
			if m == nil {
				t.Errorf("%s: %s names no hx-target: htmx would swap the page into the element itself", name, tag)
				continue
			}
			id := strings.TrimPrefix(string(m[1]), "#")
			if id == "this" {
				idm := idOf.FindSubmatch(tag)
				if idm == nil {
					t.Errorf("%s: %s targets itself but has no id for HX-Target to name", name, tag)
					continue
				}
				id = string(idm[1])
			}
			if pages[name].Lookup("#"+id) == nil {
				t.Errorf("%s: %s targets #%s, but the page defines no fragment \"#%s\"", name, tag, id, id)
			}
			if !strings.Contains(string(raw), `id="`+id+`"`) {
				t.Errorf("%s: no element of id %q for %s to swap", name, id, tag)
			}
		}
	}
	if found == 0 {
		t.Fatal("no htmx requests found in the templates")
	}
}
