package flatten

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRowFollowsColumns(t *testing.T) {
	company := json.RawMessage(`{"name":"Acme","domain":"acme.com","network_url":"https://www.linkedin.com/company/acme",
		"employee_count":42,"employee_range":"11-50","primary_industry":"Software","year_founded":1999,
		"headquarters":{"city":"Lyon","country":"FR"},"about":"not a column"}`)
	person := json.RawMessage(`{"full_name":"Jane Doe","headline":"CTO at Acme","city":"Berlin","country_code":"DE",
		"network_url":"https://www.linkedin.com/in/jane-doe",
		"positions":[{"title":"Advisor","company_name":"Old Co","is_current":false},{"title":"CTO","company_name":"Acme","is_current":true}],
		"email_match":{"method":"resolved"}}`)
	for _, c := range []struct {
		object string
		o      Outcome
		want   []string
	}{
		{ObjectCompany, Outcome{Status: "succeeded", TaskID: "t1", Data: company},
			[]string{"succeeded", "", "", "t1", "Acme", "acme.com", "https://www.linkedin.com/company/acme", "42", "11-50", "Software", "1999", "Lyon", "FR"}},
		{ObjectPerson, Outcome{Status: "succeeded", TaskID: "t2", Data: person},
			[]string{"succeeded", "", "", "t2", "Jane Doe", "CTO at Acme", "CTO", "Acme", "Berlin", "DE", "https://www.linkedin.com/in/jane-doe", "resolved"}},
		{ObjectCompany, Outcome{Status: "failed", Code: "not_found", Message: "nobody knows it", TaskID: "t3"},
			[]string{"failed", "not_found", "nobody knows it", "t3", "", "", "", "", "", "", "", "", ""}},
		{ObjectPerson, Outcome{Status: "succeeded", Data: json.RawMessage(`not json`)},
			[]string{"succeeded", "", "", "", "", "", "", "", "", "", "", ""}},
	} {
		got := Row(c.o, c.object)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s:\n got %q\nwant %q", c.object, c.o.Status, got, c.want)
		}
		if len(got) != len(Columns(c.object)) {
			t.Errorf("%s: %d values for %d columns", c.object, len(got), len(Columns(c.object)))
		}
	}
}

// A mixed row is the person's columns, then the company's under their own prefix: a
// lookup the row did not make leaves its columns empty, its status too.
func TestMixedRowFollowsColumns(t *testing.T) {
	cols := Columns(ObjectMixed)
	want := append(Columns(ObjectPerson), "enrichd_company_status", "enrichd_company_error_code", "enrichd_company_error_message",
		"enrichd_company_task_id", "enrichd_company_name", "enrichd_company_domain", "enrichd_company_network_url",
		"enrichd_company_employee_count", "enrichd_company_employee_range", "enrichd_company_industry",
		"enrichd_company_year_founded", "enrichd_company_hq_city", "enrichd_company_hq_country")
	if !reflect.DeepEqual(cols, want) {
		t.Fatalf("columns:\n got %q\nwant %q", cols, want)
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c] {
			t.Errorf("the column %s twice", c)
		}
		seen[c] = true
	}
	company := Outcome{Status: "succeeded", TaskID: "t1", Data: json.RawMessage(`{"name":"Acme","domain":"acme.com"}`)}
	person := Outcome{Status: "failed", Code: "not_found", Message: "no one", TaskID: "t2"}
	got := MixedRow(person, company)
	if len(got) != len(cols) {
		t.Fatalf("%d values for %d columns", len(got), len(cols))
	}
	at := func(name string) string {
		for i, c := range cols {
			if c == name {
				return got[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	for name, v := range map[string]string{"enrichd_status": "failed", "enrichd_error_code": "not_found", "enrichd_task_id": "t2",
		"enrichd_full_name": "", "enrichd_company_status": "succeeded", "enrichd_company_task_id": "t1",
		"enrichd_company_name": "Acme", "enrichd_company_domain": "acme.com"} {
		if at(name) != v {
			t.Errorf("%s = %q, want %q", name, at(name), v)
		}
	}
	onlyCompany := MixedRow(Outcome{}, company)
	if !reflect.DeepEqual(onlyCompany[:len(Columns(ObjectPerson))], make([]string, len(Columns(ObjectPerson)))) {
		t.Errorf("a row without a person fills the person's columns: %q", onlyCompany)
	}
}

func TestSpreadsheetSafe(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"Acme":             "Acme",
		"=1+1":             "'=1+1",
		"+33 1 23":         "'+33 1 23",
		"-2+3+cmd|' /C'!A": "'-2+3+cmd|' /C'!A",
		"@SUM(A1)":         "'@SUM(A1)",
		"\t=1":             "'\t=1",
		"\r=1":             "'\r=1",
		"-12.5":            "-12.5",
		"+7":               "+7",
		"a=b":              "a=b",
	} {
		if got := SpreadsheetSafe(in); got != want {
			t.Errorf("SpreadsheetSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
