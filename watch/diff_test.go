package watch_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/watch"

	"github.com/matryer/is"
)

// change is a Change written compactly for the tables: "path: before -> after".
func change(c watch.Change) string {
	return c.Path + ": " + string(c.Before) + " -> " + string(c.After)
}

func TestDiff(t *testing.T) {
	person := func(positions string) string {
		return `{"network_url":"https://net/in/jane","full_name":"Jane Doe","enrichment_status":"enriched",
			"last_enriched_at":"2026-01-01T00:00:00Z","positions":` + positions + `}`
	}
	cases := []struct {
		name       string
		objectType string
		before     string
		after      string
		fields     []string
		want       []string
	}{
		{
			name:       "the same record: nothing",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme","employee_count":10,"domain":"acme.com"}`,
			after:      `{"domain":"acme.com","name":"Acme","employee_count":10}`,
		},
		{
			name:       "a scalar changed",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme","employee_count":10}`,
			after:      `{"name":"Acme","employee_count":12}`,
			want:       []string{"employee_count: 10 -> 12"},
		},
		{
			name:       "volatile fields are ignored",
			objectType: enrich.ObjectCompany,
			before: `{"name":"Acme","enrichment_status":"pending","created_at":"2025-01-01T00:00:00Z",
				"updated_at":"2025-01-01T00:00:00Z","redirect":{"from":"a.com","to":"acme.com","confirmed":true}}`,
			after: `{"name":"Acme","enrichment_status":"enriched","created_at":"2026-01-01T00:00:00Z",
				"updated_at":"2026-02-01T00:00:00Z"}`,
		},
		{
			name:       "volatile fields of a person: last_enriched_at and email_match",
			objectType: enrich.ObjectPerson,
			before:     `{"full_name":"Jane","last_enriched_at":"2025-01-01T00:00:00Z","email_match":{"method":"exact","email":"j@a.com","pattern":null}}`,
			after:      `{"full_name":"Jane","last_enriched_at":"2026-01-01T00:00:00Z"}`,
		},
		{
			name:       "absent and null are the same",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme","slogan":null}`,
			after:      `{"name":"Acme"}`,
		},
		{
			name:       "a field added and one removed",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme","slogan":"Boom"}`,
			after:      `{"name":"Acme","about":"We make anvils"}`,
			want:       []string{`about: null -> "We make anvils"`, `slogan: "Boom" -> null`},
		},
		{
			name:       "nested objects recurse",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme","headquarters":{"city":"Lyon","country":"FR"}}`,
			after:      `{"name":"Acme","headquarters":{"city":"Paris","country":"FR","zip":"75001"}}`,
			want:       []string{`headquarters.city: "Lyon" -> "Paris"`, `headquarters.zip: null -> "75001"`},
		},
		{
			name:       "an object that becomes a scalar is one change",
			objectType: enrich.ObjectCompany,
			before:     `{"headquarters":{"city":"Lyon"}}`,
			after:      `{"headquarters":null}`,
			want:       []string{`headquarters: {"city":"Lyon"} -> null`},
		},
		{
			name:       "scalar arrays are sets: order does not matter",
			objectType: enrich.ObjectCompany,
			before:     `{"tags":["b","a","c"]}`,
			after:      `{"tags":["c","a","b","a"]}`,
		},
		{
			name:       "scalar arrays are sets: added and removed items",
			objectType: enrich.ObjectCompany,
			before:     `{"domains":["acme.com","acme.fr",3]}`,
			after:      `{"domains":["acme.fr","acme.io",4]}`,
			want: []string{`domains[+4]: null -> 4`, `domains[+acme.io]: null -> "acme.io"`,
				`domains[-3]: 3 -> null`, `domains[-acme.com]: "acme.com" -> null`},
		},
		{
			name:       "positions are matched by identity, not position",
			objectType: enrich.ObjectPerson,
			before: person(`[{"company_name":"Old Co","company_network_url":"https://net/company/old","title":"Engineer","is_current":false,"start_date":"2019-01-01"},
				{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Engineer","is_current":true,"start_date":"2021-03-01"}]`),
			after: person(`[{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Staff Engineer","is_current":true,"start_date":"2021-03-01"},
				{"company_name":"Old Co","company_network_url":"https://net/company/old","title":"Engineer","is_current":false,"start_date":"2019-01-01"}]`),
			want: []string{`positions[https://net/company/acme@2021-03-01].title: "Engineer" -> "Staff Engineer"`},
		},
		{
			name:       "a new job: the old position ends, a new one is added",
			objectType: enrich.ObjectPerson,
			before:     person(`[{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Engineer","is_current":true,"start_date":"2021-03-01"}]`),
			after: person(`[{"company_name":"Globex","company_network_url":"https://net/company/globex","title":"CTO","is_current":true,"start_date":"2026-01-01"},
				{"company_name":"Acme","company_network_url":"https://net/company/acme","title":"Engineer","is_current":false,"start_date":"2021-03-01","end_date":"2025-12-01"}]`),
			want: []string{
				`positions[https://net/company/acme@2021-03-01].end_date: null -> "2025-12-01"`,
				`positions[https://net/company/acme@2021-03-01].is_current: true -> false`,
				`positions[https://net/company/globex@2026-01-01]: null -> {"company_name":"Globex","company_network_url":"https://net/company/globex","is_current":true,"start_date":"2026-01-01","title":"CTO"}`,
			},
		},
		{
			name:       "a position without a page is named by its company's name in lower case",
			objectType: enrich.ObjectPerson,
			before:     person(`[{"company_name":"ACME Corp","title":"Engineer","is_current":true}]`),
			after:      person(`[{"company_name":"Acme Corp","title":"Lead","is_current":true}]`),
			want: []string{
				`positions[acme corp].company_name: "ACME Corp" -> "Acme Corp"`,
				`positions[acme corp].title: "Engineer" -> "Lead"`,
			},
		},
		{
			name:       "two roles at one company are told apart by start date",
			objectType: enrich.ObjectPerson,
			before: person(`[{"company_name":"Acme","title":"Engineer","is_current":false,"start_date":"2018-01-01"},
				{"company_name":"Acme","title":"Manager","is_current":true,"start_date":"2022-01-01"}]`),
			after: person(`[{"company_name":"Acme","title":"Director","is_current":true,"start_date":"2022-01-01"},
				{"company_name":"Acme","title":"Engineer","is_current":false,"start_date":"2018-01-01"}]`),
			want: []string{`positions[acme@2022-01-01].title: "Manager" -> "Director"`},
		},
		{
			name:       "an item with no identity is named by its JSON",
			objectType: enrich.ObjectPerson,
			before:     person(`[{"title":"Volunteer","is_current":true}]`),
			after:      person(`[{"title":"Volunteer","is_current":false}]`),
			want: []string{
				`positions[{"is_current":false,"title":"Volunteer"}]: null -> {"is_current":false,"title":"Volunteer"}`,
				`positions[{"is_current":true,"title":"Volunteer"}]: {"is_current":true,"title":"Volunteer"} -> null`,
			},
		},
		{
			name:       "the same identity twice: numbered in order",
			objectType: enrich.ObjectPerson,
			before:     person(`[{"company_name":"Acme","title":"A"},{"company_name":"Acme","title":"B"}]`),
			after:      person(`[{"company_name":"Acme","title":"A"},{"company_name":"Acme","title":"C"}]`),
			want:       []string{`positions[acme#2].title: "B" -> "C"`},
		},
		{
			name:       "the fields filter: only the watched top-level fields",
			objectType: enrich.ObjectPerson,
			before:     person(`[{"company_name":"Acme","title":"Engineer","is_current":true}]`),
			after:      `{"network_url":"https://net/in/jane","full_name":"Jane Smith","positions":[{"company_name":"Acme","title":"Engineer","is_current":true}]}`,
			fields:     []string{"positions"},
		},
		{
			name:       "the fields filter lets a watched field's change through",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme","employee_count":10,"about":"x"}`,
			after:      `{"name":"Acme Inc","employee_count":20,"about":"y"}`,
			fields:     []string{"employee_count", "name"},
			want:       []string{"employee_count: 10 -> 20", `name: "Acme" -> "Acme Inc"`},
		},
		{
			name:       "an empty fields list watches nothing",
			objectType: enrich.ObjectCompany,
			before:     `{"name":"Acme"}`,
			after:      `{"name":"Acme Inc"}`,
			fields:     []string{},
		},
		{
			name:       "numbers are compared as written, without float rounding",
			objectType: enrich.ObjectCompany,
			before:     `{"network_followers":9007199254740993}`,
			after:      `{"network_followers":9007199254740992}`,
			want:       []string{"network_followers: 9007199254740993 -> 9007199254740992"},
		},
		{
			name:       "HTML characters are kept as they are",
			objectType: enrich.ObjectCompany,
			before:     `{"slogan":"A & B"}`,
			after:      `{"slogan":"<A & B>"}`,
			want:       []string{`slogan: "A & B" -> "<A & B>"`},
		},
		{
			name:       "null before: everything is added",
			objectType: enrich.ObjectCompany,
			before:     `null`,
			after:      `{"name":"Acme"}`,
			want:       []string{`name: null -> "Acme"`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			changes, err := watch.Diff(c.objectType, json.RawMessage(c.before), json.RawMessage(c.after), c.fields)
			is.NoErr(err)
			got := []string{}
			for _, ch := range changes {
				got = append(got, change(ch))
			}
			if c.want == nil {
				c.want = []string{}
			}
			is.Equal(got, c.want)
		})
	}
}

func TestDiffIsDeterministic(t *testing.T) {
	is := is.New(t)
	before := `{"name":"Acme","domains":["a.com","b.com","c.com","d.com"],"headquarters":{"city":"Lyon","zip":"1","street":"x"},"employee_count":1}`
	after := `{"name":"Acme 2","domains":["e.com","f.com","g.com","h.com"],"headquarters":{"city":"Paris","zip":"2","street":"y"},"employee_count":2}`
	first, err := watch.Diff(enrich.ObjectCompany, json.RawMessage(before), json.RawMessage(after), nil)
	is.NoErr(err)
	is.Equal(len(first), 13)
	is.True(slices.IsSortedFunc(first, func(a, b watch.Change) int { return strings.Compare(a.Path, b.Path) }))
	for range 20 { // map order differs from run to run; the answer must not
		again, err := watch.Diff(enrich.ObjectCompany, json.RawMessage(before), json.RawMessage(after), nil)
		is.NoErr(err)
		is.Equal(again, first)
	}
}

func TestDiffRefusesWhatIsNotARecord(t *testing.T) {
	for _, c := range []struct{ objectType, before, after string }{
		{"widget", `{}`, `{}`},
		{enrich.ObjectCompany, `[1]`, `{}`},
		{enrich.ObjectCompany, `{}`, `"x"`},
		{enrich.ObjectCompany, `{`, `{}`},
	} {
		_, err := watch.Diff(c.objectType, json.RawMessage(c.before), json.RawMessage(c.after), nil)
		if err == nil {
			t.Errorf("Diff(%s, %s, %s) gave no error", c.objectType, c.before, c.after)
		}
	}
}

func TestDiffChangeJSON(t *testing.T) {
	is := is.New(t)
	changes, err := watch.Diff(enrich.ObjectCompany, json.RawMessage(`{"slogan":"x"}`), json.RawMessage(`{}`), nil)
	is.NoErr(err)
	raw, err := json.Marshal(changes)
	is.NoErr(err)
	is.Equal(string(raw), `[{"path":"slogan","before":"x","after":null}]`)
}

func TestJobChanged(t *testing.T) {
	pos := func(name, url, title, start string, current bool) string {
		p := map[string]any{"company_name": name, "title": title, "is_current": current}
		if url != "" {
			p["company_network_url"] = url
		}
		if start != "" {
			p["start_date"] = start
		}
		raw, _ := json.Marshal(p)
		return string(raw)
	}
	person := func(positions ...string) json.RawMessage {
		return json.RawMessage(`{"full_name":"Jane","positions":[` + strings.Join(positions, ",") + `]}`)
	}
	acme := pos("Acme", "https://net/company/acme", "Engineer", "2021-01-01", true)
	cases := []struct {
		name      string
		before    json.RawMessage
		after     json.RawMessage
		changed   bool
		from, to  string // the company names, "" for none
		fromTitle string
	}{
		{"same employer, same title", person(acme), person(acme), false, "Acme", "Acme", "Engineer"},
		{"a title change alone is no job change", person(acme),
			person(pos("Acme", "https://net/company/acme", "Staff Engineer", "2021-01-01", true)), false, "Acme", "Acme", "Engineer"},
		{"a new employer", person(acme),
			person(pos("Globex", "https://net/company/globex", "CTO", "2026-01-01", true), pos("Acme", "https://net/company/acme", "Engineer", "2021-01-01", false)),
			true, "Acme", "Globex", "Engineer"},
		{"the same page under a new name is the same employer", person(acme),
			person(pos("Acme Inc", "https://net/company/acme", "Engineer", "2021-01-01", true)), false, "Acme", "Acme Inc", "Engineer"},
		{"without pages, names compare in any case", person(pos("ACME", "", "Engineer", "", true)),
			person(pos("acme ", "", "Engineer", "", true)), false, "ACME", "acme ", "Engineer"},
		{"without pages, another name is another employer", person(pos("Acme", "", "Engineer", "", true)),
			person(pos("Globex", "", "Engineer", "", true)), true, "Acme", "Globex", "Engineer"},
		{"left: no current position", person(acme),
			person(pos("Acme", "https://net/company/acme", "Engineer", "2021-01-01", false)), true, "Acme", "", "Engineer"},
		{"started: a first current position", person(), person(acme), true, "", "Acme", ""},
		{"no job either time", person(), person(), false, "", "", ""},
		{"among several current positions the latest start wins",
			person(pos("Side", "https://net/company/side", "Advisor", "2015-01-01", true), acme),
			person(acme, pos("Side", "https://net/company/side", "Advisor", "2015-01-01", true)), false, "Acme", "Acme", "Engineer"},
		{"a further role while keeping the job is no job change",
			person(acme),
			person(acme, pos("Board Co", "https://net/company/board", "Advisor", "2026-02-01", true)), false, "Acme", "Board Co", "Engineer"},
		{"listed in another order, with no dates, the same jobs are no job change",
			person(pos("Acme", "", "CTO", "", true), pos("Board", "", "Advisor", "", true)),
			person(pos("Board", "", "Advisor", "", true), pos("Acme", "", "CTO", "", true)), false, "Acme", "Board", "CTO"},
		{"leaving the job while keeping a further role is a job change",
			person(acme, pos("Board Co", "https://net/company/board", "Advisor", "2020-02-01", true)),
			person(pos("Acme", "https://net/company/acme", "Engineer", "2021-01-01", false), pos("Board Co", "https://net/company/board", "Advisor", "2020-02-01", true)),
			true, "Acme", "Board Co", "Engineer"},
		{"a new job beside the old, the old one ended, is a job change to the new",
			person(acme),
			person(pos("Acme", "https://net/company/acme", "Engineer", "2021-01-01", false), pos("Globex", "https://net/company/globex", "CTO", "2026-02-01", true),
				pos("Board Co", "https://net/company/board", "Advisor", "2019-01-01", true)),
			true, "Acme", "Globex", "Engineer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			from, to, changed := watch.JobChanged(c.before, c.after)
			is.Equal(changed, c.changed)
			name := func(e *watch.Employer) string {
				if e == nil || e.CompanyName == nil {
					return ""
				}
				return *e.CompanyName
			}
			is.Equal(name(from), c.from)
			is.Equal(name(to), c.to)
			if c.fromTitle != "" {
				is.Equal(*from.Title, c.fromTitle)
			}
		})
	}
}

func TestCurrentEmployerOfWhatIsNotAPerson(t *testing.T) {
	is := is.New(t)
	is.True(watch.CurrentEmployer(nil) == nil)
	is.True(watch.CurrentEmployer(json.RawMessage(`null`)) == nil)
	is.True(watch.CurrentEmployer(json.RawMessage(`{"positions":"x"}`)) == nil)
	raw, err := json.Marshal(watch.CurrentEmployer(json.RawMessage(`{"positions":[{"company_name":"Acme","is_current":true}]}`)))
	is.NoErr(err)
	is.Equal(string(raw), `{"company_name":"Acme","company_network_url":null,"title":null}`)
}

func TestKnownFields(t *testing.T) {
	is := is.New(t)
	company := watch.KnownFields(enrich.ObjectCompany)
	person := watch.KnownFields(enrich.ObjectPerson)
	is.True(slices.Contains(company, "employee_count"))
	is.True(slices.Contains(company, "headquarters"))
	is.True(slices.Contains(person, "positions"))
	is.True(slices.Contains(person, "full_name"))
	for _, volatile := range []string{"enrichment_status", "last_enriched_at", "created_at", "updated_at", "email_match", "redirect"} {
		is.True(!slices.Contains(company, volatile))
		is.True(!slices.Contains(person, volatile))
	}
	is.True(!slices.Contains(company, "positions"))
	is.True(watch.KnownFields("widget") == nil)
}
