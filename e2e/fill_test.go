package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/store"
)

// sources fill sets an organization's lists, keeps a list left out, clears one given
// empty back to the default, and with neither flag shows them; on both engines.
func TestSourcesFill(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			db := engineDB(t, engine)
			is := is.New(t)
			mustCLI(t, "orgs", "create", "acme", "--db", db)
			mustCLI(t, "orgs", "create", "globex", "--db", db)
			show := func(org string) []fillShown {
				t.Helper()
				var rows []fillShown
				is.NoErr(json.Unmarshal([]byte(mustCLI(t, "sources", "fill", "--org", org, "--json", "--db", db)), &rows))
				return rows
			}
			def := []fillShown{{"company", []string{}, true}, {"person", []string{}, true}}
			is.Equal(show("acme"), def)
			is.Equal(tableRows(t, mustCLI(t, "sources", "fill", "--org", "acme", "--db", db)), []string{
				"company\tthe server's default (serve --fill-company)",
				"person\tthe server's default (serve --fill-person)",
			})

			out := mustCLI(t, "sources", "fill", "--org", "acme", "--company", "slogan, employee_count,slogan", "--db", db)
			is.Equal(tableRows(t, out), []string{"company\tslogan,employee_count", "person\tthe server's default (serve --fill-person)"})
			mustCLI(t, "sources", "fill", "--org", "acme", "--person", "positions,about", "--db", db)
			is.Equal(show("acme"), []fillShown{{"company", []string{"slogan", "employee_count"}, false}, {"person", []string{"positions", "about"}, false}})
			is.Equal(show("globex"), def)

			mustCLI(t, "sources", "fill", "--org", "acme", "--company", "", "--db", db)
			is.Equal(show("acme"), []fillShown{{"company", []string{}, true}, {"person", []string{"positions", "about"}, false}})

			// What the worker reads: the organization's list over the default.
			st, err := store.Open(context.Background(), db, schema)
			is.NoErr(err)
			defer st.Close()
			org, err := st.FindOrg(context.Background(), "acme")
			is.NoErr(err)
			lists, err := st.FillLists(context.Background(), org.ID, enrich.FillLists{Company: []string{"name"}, Person: []string{"city"}})
			is.NoErr(err)
			is.Equal(lists, enrich.FillLists{Company: []string{"name"}, Person: []string{"positions", "about"}})

			// Refusals name the known fields and change nothing.
			for _, c := range []struct {
				args []string
				want []string
			}{
				{[]string{"--company", "name,sloagn"}, []string{"--company", `"sloagn"`, strings.Join(enrich.CompanyFields, ", ")}},
				{[]string{"--company", "name", "--person", "created_at"}, []string{"--person", `"created_at"`, strings.Join(enrich.PersonFields, ", ")}},
				{[]string{"--person", "employee_count"}, []string{`"employee_count"`, strings.Join(enrich.PersonFields, ", ")}},
			} {
				msg := failCLI(t, append([]string{"sources", "fill", "--org", "acme", "--db", db}, c.args...)...)
				for _, w := range c.want {
					contains(t, msg, w)
				}
			}
			contains(t, failCLI(t, "sources", "fill", "--org", "initech", "--company", "name", "--db", db), `no organization named "initech"`)
			contains(t, failCLI(t, "sources", "fill", "--company", "name", "--db", db), `"org" not set`)
			is.Equal(show("acme"), []fillShown{{"company", []string{}, true}, {"person", []string{"positions", "about"}, false}})
		})
	}
}

// fillShown is a row of `sources fill --json`.
type fillShown struct {
	Object  string   `json:"object"`
	Fields  []string `json:"fields"`
	Default bool     `json:"default"`
}

// A refused list opens no database: a mistyped field is not a new empty file.
func TestSourcesFillRefusesBeforeOpening(t *testing.T) {
	t.Parallel()
	db := newDBPath(t)
	contains(t, failCLI(t, "sources", "fill", "--org", "acme", "--company", "nope", "--db", db), `"nope"`)
	contains(t, failCLI(t, "sources", "fill", "--org", "acme", "--db", db), "no database at")
}

// serve refuses an unknown field of --fill-company or --fill-person, from a flag or
// the environment, naming the known ones, before it creates a database.
func TestServeRefusesAnUnknownFillField(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  [2]string
		want []string
	}{
		{[]string{"--fill-company", "name,sloagn"}, [2]string{}, []string{"--fill-company", `"sloagn"`, strings.Join(enrich.CompanyFields, ", ")}},
		{[]string{"--fill-person", "headline,enrichment_status"}, [2]string{}, []string{"--fill-person", `"enrichment_status"`, strings.Join(enrich.PersonFields, ", ")}},
		{nil, [2]string{"ENRICHD_FILL_PERSON", "slogan"}, []string{"--fill-person", `"slogan"`}},
	} {
		if c.env[0] != "" {
			t.Setenv(c.env[0], c.env[1])
		}
		db := newDBPath(t)
		msg := runServeExpectError(t, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, c.args...)...)
		for _, w := range c.want {
			contains(t, msg, w)
		}
		contains(t, failCLI(t, "orgs", "list", "--db", db), "no database at")
	}
}

// serve takes its default fill lists from the flags (or ENRICHD_FILL_*), read as
// `sources fill` reads them, and says them as it starts.
func TestServeTakesDefaultFillLists(t *testing.T) {
	t.Setenv("ENRICHD_FILL_PERSON", "positions, about")
	for _, c := range []struct {
		args []string
		want string // in the start's log line; "" for neither list
	}{
		{[]string{"--fill-company", " slogan,employee_count,slogan"}, `"fill_company":"slogan,employee_count","fill_person":"positions,about"`},
		{[]string{"--fill-person", ""}, ""},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		var stdout, stderr syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"serve", "--db", newDB(t), "--addr", "127.0.0.1:0"}, c.args...), &stdout, &stderr)
		}()
		waitListening(t, &stderr, done)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			if strings.Contains(stderr.String(), "fill_company") {
				t.Errorf("serve %v logged fill lists: %s", c.args, stderr.String())
			}
			continue
		}
		contains(t, stderr.String(), c.want)
	}
}
