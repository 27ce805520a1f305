package dashboard

import (
	"encoding/json"
	"html/template"
	"reflect"
	"testing"

	"enrichd/enrich"
	"enrichd/store"
)

// TestResultCardOfACompany: the card shows what the JSON holds, worded for people,
// and offers links of the web's schemes only.
func TestResultCardOfACompany(t *testing.T) {
	c := enrich.Company{Name: "Globex", Domain: enrich.Ptr("globex.com"), NetworkURL: enrich.Ptr("javascript:alert(1)"),
		EmployeeCount: enrich.Ptr[int64](2400), EmployeeRange: enrich.Ptr("1001-5000"), PrimaryIndustry: enrich.Ptr("Software"),
		YearFounded: enrich.Ptr(1989), Headquarters: map[string]any{"country": "US", "city": "Springfield", "region": "OR", "zip": 97477.0},
		Redirect: &enrich.Redirect{From: "globex.io", To: "globex.com"}}
	card := newResultCard(succeeded(t, enrich.ObjectCompany, c))
	if card == nil || card.Company == nil || card.Person != nil {
		t.Fatalf("card %+v", card)
	}
	want := &companyCard{Name: "Globex", Domain: "globex.com", Industry: "Software", Size: "2,400 employees (1001-5000)",
		Headquarters: "Springfield, OR, US", Founded: "1989", Redirect: "globex.io stands for globex.com (not confirmed)",
		Links: []cardLink{{"Website", "https://globex.com"}}} // the javascript: page is not a link
	if !reflect.DeepEqual(card.Company, want) {
		t.Errorf("card\n%+v, want\n%+v", card.Company, want)
	}

	// Nothing known but the name: a card of dashes, not an error.
	card = newResultCard(succeeded(t, enrich.ObjectCompany, enrich.Company{Name: "Bare"}))
	if card.Company.Name != "Bare" || card.Company.Size != "" || card.Company.Links != nil {
		t.Errorf("bare card %+v", card.Company)
	}
}

// TestResultCardOfAPerson: current roles first, then the history latest first, dates
// as precise as they are known, and how the email matched.
func TestResultCardOfAPerson(t *testing.T) {
	p := enrich.Person{FirstName: enrich.Ptr("Jane"), LastName: enrich.Ptr("Doe"), Headline: enrich.Ptr("CTO at Acme"),
		City: enrich.Ptr("Berlin"), CountryCode: enrich.Ptr("DE"), NetworkURL: enrich.Ptr("https://www.linkedin.com/in/jane-doe"),
		Positions: []enrich.Position{
			{Title: enrich.Ptr("Engineer"), CompanyName: enrich.Ptr("Initech"), StartDate: enrich.Ptr("2010-06-01"), StartDatePrecision: enrich.Ptr("month"),
				EndDate: enrich.Ptr("2014-01-01"), EndDatePrecision: enrich.Ptr("year")},
			{Title: enrich.Ptr("CTO"), Company: &enrich.PositionCompany{Name: enrich.Ptr("Acme"), Domain: enrich.Ptr("acme.com")},
				StartDate: enrich.Ptr("2020-01-01"), StartDatePrecision: enrich.Ptr("year"), IsCurrent: true},
			{Title: enrich.Ptr("Manager"), CompanyName: enrich.Ptr("Globex"), StartDate: enrich.Ptr("2015-03-04"), StartDatePrecision: enrich.Ptr("day"),
				EndDate: enrich.Ptr("2019-12-31")},
			{Title: enrich.Ptr("Intern")},
		},
		EmailMatch: &enrich.EmailMatch{Method: "resolved", Email: "jane@acme.com", Pattern: enrich.Ptr("first")}}
	card := newResultCard(succeeded(t, enrich.ObjectPerson, p))
	if card == nil || card.Person == nil {
		t.Fatalf("card %+v", card)
	}
	got := card.Person
	if got.Name != "Jane Doe" || got.Location != "Berlin, DE" || got.Headline != "CTO at Acme" ||
		!reflect.DeepEqual(got.Links, []cardLink{{"Profile", "https://www.linkedin.com/in/jane-doe"}}) {
		t.Errorf("person %+v", got)
	}
	if want := []roleCard{{Title: "CTO", Company: "Acme", CompanyDomain: "acme.com", From: "2020", To: "now"}}; !reflect.DeepEqual(got.Current, want) {
		t.Errorf("current %+v, want %+v", got.Current, want)
	}
	want := []roleCard{
		{Title: "Manager", Company: "Globex", From: "Mar 4, 2015", To: "Dec 31, 2019"},
		{Title: "Engineer", Company: "Initech", From: "Jun 2010", To: "2014"},
		{Title: "Intern"},
	}
	if !reflect.DeepEqual(got.History, want) {
		t.Errorf("history\n%+v, want\n%+v", got.History, want)
	}
	if m := got.EmailMatch; m == nil || m.Email != "jane@acme.com" || m.Method != "resolved" || m.Pattern != "first" || m.Explained == "" {
		t.Errorf("email match %+v", m)
	}

	// Unsettled, failed, or a result the card cannot read: no card, the JSON alone.
	task := succeeded(t, enrich.ObjectPerson, p)
	task.Status = store.StatusRunning
	if newResultCard(task) != nil {
		t.Error("a card for a running task")
	}
	task = succeeded(t, enrich.ObjectPerson, p)
	task.Data = json.RawMessage(`{"positions": "not a list"}`)
	if newResultCard(task) != nil {
		t.Error("a card for a result it cannot read")
	}
}

func succeeded(t *testing.T, objectType string, v any) *store.Task {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Task{ObjectType: objectType, Status: store.StatusSucceeded, Data: data}
}

// TestProse: a message's `quoted` parts are code, everything else escaped text, and a
// quote left open is shown as it is.
func TestProse(t *testing.T) {
	for in, want := range map[string]template.HTML{
		"start it with `enrichd serve --allow-private-webhooks`": "start it with <code>enrichd serve --allow-private-webhooks</code>",
		"`a<b>` & `c`":  "<code>a&lt;b&gt;</code> &amp; <code>c</code>",
		"one ` quote":   "one ` quote",
		"no quotes <i>": "no quotes &lt;i&gt;",
		"empty `` pair": "empty  pair",
	} {
		if got := prose(in); got != want {
			t.Errorf("prose(%q) = %q, want %q", in, got, want)
		}
	}
	if plural(1, "watch", "watches") != "1 watch" || plural(int64(2), "watch", "watches") != "2 watches" || plural(0, "watch", "watches") != "0 watches" {
		t.Error("plural")
	}
}
