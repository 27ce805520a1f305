package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/chromedp/chromedp"
)

// The dashboard's accessibility and small-screen checks, run by the browser test on
// the pages it opens: axe-core (vendored in testdata/axe, for tests only) finds what
// breaks use by screen reader or keyboard, and fitsWidth what a phone would clip.

var axeSource = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	return string(b), err
})

// evalIn evaluates a JavaScript expression on the page within stepBudget, failing the
// test with what was being done.
func evalIn[T any](b *browser, what, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepBudget)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// axeViolation is one rule axe-core found broken, with where.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// axe runs axe-core on the page shown and fails the test on any serious or critical
// violation; lesser ones are logged.
func (b *browser) axe(page string) {
	b.t.Helper()
	src, err := axeSource()
	if err != nil {
		b.t.Fatalf("axe-core: %v", err)
	}
	evalIn[chromedp.Void](b, "loading axe-core on "+page, `if (!window.axe) { `+src+"\n}")
	out := evalIn[string](b, "running axe-core on "+page,
		`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise)
	var found []axeViolation
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		b.t.Fatalf("axe-core on %s: %v in %.200s", page, err, out)
	}
	for _, v := range found {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprintf("%v: %s", n.Target, strings.ReplaceAll(n.Summary, "\n", " ")))
		}
		msg := fmt.Sprintf("axe-core on %s: %s (%s) %s at %d places:\n  %s", page, v.ID, v.Impact, v.Help, len(v.Nodes), strings.Join(where, "\n  "))
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Error(msg)
		} else {
			b.t.Log(msg)
		}
	}
}

// fitsWidth fails the test when the page shown is wider than the window, or when a
// table has columns beyond its frame: what is off the screen of a phone is not seen.
func (b *browser) fitsWidth(page string) {
	b.t.Helper()
	clipped := evalIn[[]string](b, "measuring "+page, `(() => {
		const out = [];
		const root = document.documentElement;
		if (root.scrollWidth > root.clientWidth + 1) out.push("the page is " + root.scrollWidth + " px wide in a " + root.clientWidth + " px window");
		for (const wrap of document.querySelectorAll(".table-wrap")) {
			if (wrap.scrollWidth > wrap.clientWidth + 1) {
				const t = wrap.querySelector("table");
				out.push("table " + (t && t.id ? "#" + t.id : "") + " is " + wrap.scrollWidth + " px wide in " + wrap.clientWidth + " px");
			}
		}
		return out;
	})()`)
	for _, c := range clipped {
		b.t.Errorf("%s at %d px: %s", page, phoneWidth, c)
	}
}

// look keeps a screenshot for a person to look at, in ENRICHD_BROWSER_ARTIFACTS when
// it is set: the pages at a phone's width, which the README does not show.
func (b *browser) look(name string) {
	b.t.Helper()
	dir := os.Getenv("ENRICHD_BROWSER_ARTIFACTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot "+name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
