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

// A task answer's provenance becomes one row a field, in the result's order, each
// with its value in a line and its source; its sources, one row a source asked.
func TestTraceFromATaskAnswer(t *testing.T) {
	answer := `{"task":{"id":"t1","status":"succeeded"},
		"data":{"name":"Acme","domain":"acme.com","employee_count":120,"slogan":"` + strings.Repeat("Widgets for all ", 10) + `",
			"headquarters":{"city":"Berlin"},"about":null,"future_field":[1,2,3]},
		"provenance":{"slogan":"enrichlayer","name":"pdl","employee_count":"pdl","domain":"pdl","headquarters":"enrichlayer","future_field":"pdl"},
		"sources":[{"name":"pdl","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":120},
			{"name":"enrichlayer","outcome":"hit","vendor_calls":2,"vendor_credits":3,"ms":340},
			{"name":"apollo","outcome":"skipped","reason":"filled","vendor_calls":0,"ms":0}]}`
	tr := traceFrom(enrich.ObjectCompany, []byte(answer))
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
	tr = traceFrom(enrich.ObjectCompany, []byte(`{"data":{"name":"Acme"},"provenance":{"name":"pdl"},"sources":[]}`))
	if tr == nil || !tr.Asked || len(tr.Sources) != 0 || !reflect.DeepEqual(tr.Fields, []tracedField{{"name", "Acme", "pdl"}}) {
		t.Errorf("store hit %+v", tr)
	}
	// A task from before either was kept shows neither.
	if tr := traceFrom(enrich.ObjectCompany, []byte(`{"task":{},"data":{"name":"Acme"}}`)); tr != nil {
		t.Errorf("no trace wanted, got %+v", tr)
	}
}

// The task page shows each field beside its source, and the sources asked with their
// outcome and cost; a store hit says no source was asked.
func TestTaskPageShowsEachFieldsSource(t *testing.T) {
	page := parseDashboardPages()["task"]
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	task := &store.Task{ID: "t1", ObjectType: enrich.ObjectCompany, Status: store.StatusSucceeded, CreatedAt: now, FinishedAt: &now,
		Data: []byte(`{"name":"Acme","slogan":"Widgets"}`)}
	render := func(answer string) string {
		t.Helper()
		var buf bytes.Buffer
		p := taskPage{Task: task, Trace: traceFrom(task.ObjectType, []byte(answer))}
		if err := page.ExecuteTemplate(&buf, "#task-live", view{Data: p, Now: now}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	html := render(`{"data":{"name":"Acme","slogan":"Widgets"},"provenance":{"name":"pdl","slogan":"enrichlayer"},
		"sources":[{"name":"pdl","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":12},{"name":"enrichlayer","outcome":"hit","vendor_calls":1,"vendor_credits":1,"ms":30},{"name":"apollo","outcome":"skipped","reason":"filled","vendor_calls":0,"vendor_credits":0,"ms":0}]}`)
	for _, want := range []string{
		`<tr class="field" id="field-name"><td><code>name</code></td><td class="value">Acme</td><td class="source"><code>pdl</code></td></tr>`,
		`<tr class="field" id="field-slogan"><td><code>slogan</code></td><td class="value">Widgets</td><td class="source"><code>enrichlayer</code></td></tr>`,
		`<table id="task-sources">`,
		`<td><code>apollo</code></td><td><span class="outcome skipped">skipped</span> <span class="muted">(filled)</span></td><td>0</td><td>0</td><td>0 ms</td>`,
		`<td><code>enrichlayer</code></td><td><span class="outcome hit">hit</span></td><td>1</td><td>1</td><td>30 ms</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	html = render(`{"data":{"name":"Acme"},"provenance":{"name":"pdl"},"sources":[]}`)
	if !strings.Contains(html, `<p class="muted" id="task-sources">None: the answer came from the store`) || !strings.Contains(html, `id="field-name"`) {
		t.Errorf("a store hit's page:\n%s", html)
	}
	html = render(`{"data":{"name":"Acme"}}`)
	if strings.Contains(html, "task-provenance") || strings.Contains(html, "task-sources") {
		t.Errorf("a task without a trace shows one:\n%s", html)
	}
}
