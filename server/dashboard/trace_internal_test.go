package dashboard

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// traced is a settled company task keeping data, provenance and sources as given.
func traced(status, data, provenance, sources string) *store.Task {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	t := &store.Task{ID: "t1", ObjectType: enrich.ObjectCompany, Status: status, CreatedAt: now, FinishedAt: &now}
	for _, f := range []struct {
		dst *[]byte
		v   string
	}{{(*[]byte)(&t.Data), data}, {(*[]byte)(&t.Provenance), provenance}, {(*[]byte)(&t.Sources), sources}} {
		if f.v != "" {
			*f.dst = []byte(f.v)
		}
	}
	return t
}

// A task's provenance becomes one row a field, in the result's order, each with its
// value in a line and its source; its sources, one row a source asked.
func TestTraceOfATask(t *testing.T) {
	data := `{"name":"Acme","domain":"acme.com","employee_count":120,"slogan":"` + strings.Repeat("Widgets for all ", 10) + `",
		"headquarters":{"city":"Berlin"},"about":null,"future_field":[1,2,3]}`
	tr := traceOf(traced(store.StatusSucceeded, data,
		`{"slogan":"enrichlayer","name":"pdl","employee_count":"pdl","domain":"pdl","headquarters":"enrichlayer","future_field":"pdl"}`,
		`[{"name":"pdl","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":120},
			{"name":"enrichlayer","outcome":"hit","vendor_calls":2,"vendor_credits":3,"ms":340},
			{"name":"apollo","outcome":"skipped","reason":"filled","vendor_calls":0,"ms":0}]`))
	if tr == nil || !tr.Asked {
		t.Fatalf("trace %+v", tr)
	}
	want := []tracedField{
		{"name", "Acme", "pdl"},
		{"domain", "acme.com", "pdl"},
		{"employee_count", "120", "pdl"},
		{"slogan", strings.Repeat("Widgets for all ", 5)[:79] + "…", "enrichlayer"},
		{"headquarters", `{"city":"Berlin"}`, "enrichlayer"},
		{"future_field", "3 items", "pdl"},
	}
	if !reflect.DeepEqual(tr.Fields, want) {
		t.Errorf("fields\n%q, want\n%q", tr.Fields, want)
	}
	if len(tr.Sources) != 3 || tr.Sources[2].Reason != enrich.ReasonFilled || tr.Sources[1].Credits != 3 {
		t.Errorf("sources %+v", tr.Sources)
	}

	// A store hit asked nothing, and keeps the provenance it was stored with.
	tr = traceOf(traced(store.StatusSucceeded, `{"name":"Acme"}`, `{"name":"pdl"}`, `[]`))
	if tr == nil || !tr.Asked || len(tr.Sources) != 0 || !reflect.DeepEqual(tr.Fields, []tracedField{{"name", "Acme", "pdl"}}) {
		t.Errorf("store hit %+v", tr)
	}
	// A failed task shows what was asked, and no data's provenance.
	tr = traceOf(traced(store.StatusFailed, "", `{"name":"pdl"}`, `[{"name":"pdl","outcome":"miss","vendor_calls":1,"ms":3}]`))
	if tr == nil || tr.Fields != nil || len(tr.Sources) != 1 {
		t.Errorf("failed %+v", tr)
	}
	// A task from before either was kept, or not run yet, shows neither.
	if tr := traceOf(traced(store.StatusSucceeded, `{"name":"Acme"}`, "", "")); tr != nil {
		t.Errorf("no trace wanted, got %+v", tr)
	}
	if tr := traceOf(traced(store.StatusQueued, "", "", "")); tr != nil {
		t.Errorf("no trace wanted, got %+v", tr)
	}
}

// The task page shows each field beside its source, and the sources asked with their
// outcome and cost; a store hit says no source was asked.
func TestTaskPageShowsEachFieldsSource(t *testing.T) {
	page := parseDashboardPages()["task"]
	render := func(task *store.Task) string {
		t.Helper()
		var buf bytes.Buffer
		p := taskPage{Task: task, Trace: traceOf(task)}
		if err := page.ExecuteTemplate(&buf, "#task-live", view{Data: p, Now: *task.FinishedAt}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	html := render(traced(store.StatusSucceeded, `{"name":"Acme","slogan":"Widgets"}`, `{"name":"pdl","slogan":"enrichlayer"}`,
		`[{"name":"pdl","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":12},{"name":"enrichlayer","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":30},{"name":"apollo","outcome":"skipped","reason":"filled","vendor_calls":0,"vendor_credits":0,"ms":0}]`))
	for _, want := range []string{
		`<tr class="field" id="field-name"><td class="lead"><code class="nobreak">name</code></td><td class="value">Acme</td><td class="source st"><code class="nobreak">pdl</code></td></tr>`,
		`<tr class="field" id="field-slogan"><td class="lead"><code class="nobreak">slogan</code></td><td class="value">Widgets</td><td class="source st"><code class="nobreak">enrichlayer</code></td></tr>`,
		`<table id="task-sources">`,
		`<td><code class="nobreak">apollo</code></td><td><span class="outcome skipped">skipped</span> <span class="muted">(filled)</span></td><td>0</td><td>0</td><td>0 ms</td>`,
		`<td><code class="nobreak">enrichlayer</code></td><td><span class="outcome hit">hit</span></td><td>1</td><td>1</td><td>30 ms</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	html = render(traced(store.StatusSucceeded, `{"name":"Acme"}`, `{"name":"pdl"}`, `[]`))
	if !strings.Contains(html, `<p class="muted" id="task-sources">None: the answer came from records enrichd already held, and its fields keep the sources they came from.`) || !strings.Contains(html, `id="field-name"`) {
		t.Errorf("a store hit's page:\n%s", html)
	}
	html = render(traced(store.StatusSucceeded, `{"name":"Acme"}`, "", ""))
	if strings.Contains(html, "task-provenance") || strings.Contains(html, "task-sources") {
		t.Errorf("a task without a trace shows one:\n%s", html)
	}
}
