package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"enrichd/flatten"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// column finds a column of a results file's header.
func column(t *testing.T, header []string, name string) int {
	t.Helper()
	i := slices.Index(header, name)
	if i < 0 {
		t.Fatalf("no column %s in %q", name, header)
	}
	return i
}

// A CRM's export of contacts, of both kinds and with malformed rows, is refused whole
// by default, every malformed row listed; with on_error=skip the other rows go ahead,
// each deciding what it enriches, and the skipped ones are listed in the answer, in
// GET /v1/batches/{id} and in the results, uncharged. Every lookup is charged and
// refunded on its own terms, and the ledger says so, task by task.
func TestBatchOfContactsEachRowDecides(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	contacts := servertest.ContactExport(e)
	is.Equal(len(contacts), 51)
	file := servertest.ContactsCSV(contacts)
	if _, err := e.DB.GrantCredits(t.Context(), "acme", 200, nil); err != nil {
		t.Fatal(err)
	}
	e.StartWorkers()

	var malformedRows []any
	for i, c := range contacts {
		if c.Malformed {
			malformedRows = append(malformedRows, float64(i+1))
		}
	}
	is.Equal(len(malformedRows), 5)

	// All or nothing, by default: the five rows are listed, nothing is made.
	r := e.UploadCSV(file, "?name=contacts.csv")
	is.Equal(r.Status, http.StatusBadRequest)
	is.Equal(r.Str("code"), "invalid_input")
	is.True(strings.Contains(r.Str("error"), "5 of 51 rows are refused"))
	var listed []any
	for _, row := range r.Get("rows").([]any) {
		m := row.(map[string]any)
		listed = append(listed, m["row"])
		is.Equal(m["line"], m["row"].(float64)+1) // a line each, after the header
	}
	is.Equal(listed, malformedRows)
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(0))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), float64(0))
	is.Equal(e.Balance("acme").Balance, int64(300))

	// Skipped: the others go ahead, each what it has.
	r = e.UploadCSV(file, "?name=contacts.csv&on_error=skip")
	is.Equal(r.Status, http.StatusAccepted)
	id := r.Str("data.id")
	is.Equal(r.Str("data.object_type"), "mixed")
	is.Equal(r.Get("data.rows"), float64(51))
	is.Equal(servertest.Count(r, "skipped"), 5)
	is.Equal(servertest.Count(r, "pending"), 46)
	is.Equal(r.Get("data.credits_estimate"), float64(20*3+15*3+11*1)) // the domains of the email rows are not looked up
	var skipped []any
	for _, row := range r.Get("data.skipped_rows").([]any) {
		m := row.(map[string]any)
		skipped = append(skipped, m["row"])
		is.Equal(m["line"], m["row"].(float64)+1)
		is.True(m["error"].(string) != "")
	}
	is.Equal(skipped, malformedRows)

	done := e.WaitBatchDone(id)
	is.Equal(servertest.Count(done, "succeeded"), 18+14+9)
	is.Equal(servertest.Count(done, "failed"), 2+1+2)
	is.Equal(servertest.Count(done, "skipped"), 5)
	is.Equal(servertest.Count(done, "pending"), 0)
	is.Equal(done.Get("data.skipped_rows"), r.Get("data.skipped_rows"))
	spent := int64(18*3 + 14*3 + 9*1)
	is.Equal(done.Get("data.credits_spent"), float64(spent))
	is.Equal(e.Balance("acme").Balance, int64(300)-spent)
	// The list counts the skipped rows, and lists them only on the batch.
	list := e.Do("GET", "/v1/batches", nil)
	is.Equal(list.Get("data").([]any)[0].(map[string]any)["counts"].(map[string]any)["skipped"], float64(5))
	is.True(!strings.Contains(string(list.Raw), "skipped_rows"))

	res := e.Do("GET", "/v1/batches/"+id+"/results", nil)
	is.Equal(res.Status, 200)
	recs := servertest.ReadCSV(t, res.Raw)
	is.Equal(len(recs), 52)
	head := recs[0]
	is.Equal(head, append([]string{"First Name", "Last Name", "email", "domain", "Owner"}, flatten.Columns("mixed")...))
	status, code, msg, task := column(t, head, "enrichd_status"), column(t, head, "enrichd_error_code"), column(t, head, "enrichd_error_message"), column(t, head, "enrichd_task_id")
	cStatus, cTask, cName := column(t, head, "enrichd_company_status"), column(t, head, "enrichd_company_task_id"), column(t, head, "enrichd_company_name")
	ledger := e.LedgerByTask("acme")
	is.Equal(len(ledger), 46) // a task each, and nothing else charged
	for i, c := range contacts {
		rec := recs[i+1]
		switch {
		case c.Malformed:
			is.Equal(rec[status], "skipped")
			is.Equal(rec[code], "invalid_input")
			is.True(rec[msg] != "")
			is.Equal(rec[cStatus], "skipped")
			is.Equal(rec[task], "")
		case c.Email != "":
			is.Equal(rec[:5], []string{c.First, c.Last, c.Email, c.Domain, c.Owner}) // the input as uploaded
			is.Equal(rec[cStatus], "")                                               // its domain is not looked up
			want := [2]int64{3, 0}
			if c.PersonFound {
				is.Equal(rec[status], "succeeded")
				is.Equal(rec[column(t, head, "enrichd_email_match_method")], "resolved")
			} else {
				is.Equal(rec[status], "failed")
				want[1] = 3
			}
			is.Equal(ledger[rec[task]], want)
			taskBody := e.Do("GET", "/v1/tasks/"+rec[task], nil)
			is.Equal(taskBody.Str("task.idempotency_key"), fmt.Sprintf("batch:%s:%d", id, i+1))
		default:
			is.Equal(rec[status], "")
			is.Equal(rec[task], "")
			want := [2]int64{1, 0}
			if c.CompanyFound {
				is.Equal(rec[cStatus], "succeeded")
				is.True(strings.HasPrefix(rec[cName], "Co"))
			} else {
				is.Equal(rec[cStatus], "failed")
				want[1] = 1
			}
			is.Equal(ledger[rec[cTask]], want)
		}
	}

	// The same file again with another on_error is another request for its key.
	key := e.UploadCSV(file, "?on_error=skip", "Idempotency-Key", "contacts-1")
	is.Equal(key.Status, 202)
	e.WaitBatchDone(key.Str("data.id"))
	is.Equal(e.UploadCSV(file, "?on_error=skip", "Idempotency-Key", "contacts-1").Header.Get("Idempotent-Replayed"), "true")
	is.Equal(e.UploadCSV(file, "?on_error=skip&enrich=company,person", "Idempotency-Key", "contacts-1").Str("code"), "idempotency_key_reused")
}

// enrich=company,person: a contact with an email and a domain gets its person and its
// company, two tasks in one result row, each charged and refunded on its own terms: a
// company that is not found is refunded while its person is kept.
func TestBatchOfContactsEnrichesPersonAndCompany(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	contacts := servertest.ContactExport(e)
	file := servertest.ContactsCSV(contacts)
	if _, err := e.DB.GrantCredits(t.Context(), "acme", 200, nil); err != nil {
		t.Fatal(err)
	}
	e.StartWorkers()

	r := e.UploadCSV(file, "?enrich=company,person&on_error=skip")
	is.Equal(r.Status, http.StatusAccepted)
	id := r.Str("data.id")
	is.Equal(r.Str("data.object_type"), "mixed")
	is.Equal(servertest.Count(r, "pending"), 20*2+15+11)
	estimate := int64(20*(3+1) + 15*3 + 11*1)
	is.Equal(r.Get("data.credits_estimate"), float64(estimate))

	done := e.WaitBatchDone(id)
	is.Equal(servertest.Count(done, "succeeded"), (18+19)+14+9)
	is.Equal(servertest.Count(done, "failed"), (2+1)+1+2)
	is.Equal(servertest.Count(done, "skipped"), 5)
	refunded := int64(2*3+1) + 1*3 + 2*1
	is.Equal(done.Get("data.credits_spent"), float64(estimate-refunded))
	is.Equal(e.Balance("acme").Balance, 300-estimate+refunded)

	recs := servertest.ReadCSV(t, e.Do("GET", "/v1/batches/"+id+"/results", nil).Raw)
	head := recs[0]
	status, task := column(t, head, "enrichd_status"), column(t, head, "enrichd_task_id")
	cStatus, cTask, cDomain := column(t, head, "enrichd_company_status"), column(t, head, "enrichd_company_task_id"), column(t, head, "enrichd_company_domain")
	ledger := e.LedgerByTask("acme")
	is.Equal(len(ledger), 20*2+15+11)
	for i, c := range contacts {
		rec := recs[i+1]
		if c.Malformed || c.Email == "" || c.Domain == "" {
			continue
		}
		// A contact row: both lookups, each its own task and key.
		person, company := [2]int64{3, 0}, [2]int64{1, 0}
		if !c.PersonFound {
			person[1] = 3
			is.Equal(rec[status], "failed")
		} else {
			is.Equal(rec[status], "succeeded")
		}
		if !c.CompanyFound {
			company[1] = 1
			is.Equal(rec[cStatus], "failed")
			is.Equal(rec[column(t, head, "enrichd_company_error_code")], "not_found")
		} else {
			is.Equal(rec[cStatus], "succeeded")
			is.Equal(rec[cDomain], c.Domain)
		}
		is.Equal(ledger[rec[task]], person)
		is.Equal(ledger[rec[cTask]], company)
		is.Equal(e.Do("GET", "/v1/tasks/"+rec[cTask], nil).Str("task.idempotency_key"), fmt.Sprintf("batch:%s:%d:company", id, i+1))
	}
}

// A company whose task cannot be made when its turn comes (the credits were spent
// meanwhile) fails alone, uncharged, and the person beside it is kept.
func TestBatchCompanyFailsAloneWhenCreditsRunOut(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	contacts := servertest.ContactExport(e)
	var file strings.Builder
	file.WriteString("email,domain\n")
	var c servertest.Contact
	for _, c = range contacts {
		if c.PersonFound && c.CompanyFound && c.Email != "" && c.Domain != "" {
			break
		}
	}
	fmt.Fprintf(&file, "%s,%s\n", c.Email, c.Domain)
	r := e.UploadCSV(file.String(), "?enrich=company,person")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Get("data.credits_estimate"), float64(4))
	// 97 credits are spent, on lookups that succeed, before the feeder runs: 3 are
	// left, the person's price, and none for its company.
	for i := range 97 {
		domain := fmt.Sprintf("spend%d.example", i)
		e.Net.AddCompany(servertest.Company(fmt.Sprintf("Spend%d", i), domain))
		is.Equal(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": domain}).Status, http.StatusAccepted)
	}
	e.StartWorkers()
	done := e.WaitBatchDone(r.Str("data.id"))
	is.Equal(servertest.Count(done, "succeeded"), 1)
	is.Equal(servertest.Count(done, "failed"), 1)
	is.Equal(done.Get("data.credits_spent"), float64(3))
	recs := servertest.ReadCSV(t, e.Do("GET", "/v1/batches/"+r.Str("data.id")+"/results", nil).Raw)
	head := recs[0]
	is.Equal(recs[1][column(t, head, "enrichd_status")], "succeeded")
	is.Equal(recs[1][column(t, head, "enrichd_company_status")], "failed")
	is.Equal(recs[1][column(t, head, "enrichd_company_error_code")], "insufficient_credits")
	is.Equal(recs[1][column(t, head, "enrichd_company_task_id")], "")
	is.Equal(e.Balance("acme").Balance, int64(0))
	is.Equal(len(e.LedgerByTask("acme")), 97+1) // the company's lookup never reached the ledger
}

// The parameters of an upload are checked before its file is read; a file of which
// every row is refused makes no batch, skipped or not.
func TestBatchAskRefusals(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	e.StartWorkers()
	for _, c := range []struct {
		name, query, body string
		says              string
	}{
		{"enrich unknown", "?enrich=robots", "domain\nacme.com\n", "enrich must be company, person, or company,person"},
		{"enrich twice", "?enrich=person,person", "domain\nacme.com\n", "enrich names person twice"},
		{"enrich empty part", "?enrich=company,", "domain\nacme.com\n", "enrich must be"},
		{"object_type against enrich", "?object_type=company&enrich=company,person", "domain\nacme.com\n", "ask for different things"},
		{"on_error unknown", "?on_error=ignore", "domain\nacme.com\n", "on_error must be fail"},
		{"every row refused, skipped", "?on_error=skip", "domain,email\n,\nbad!,\n", "2 of 2 rows are refused"},
	} {
		r := e.UploadCSV(c.body, c.query)
		if r.Status != http.StatusBadRequest || r.Str("code") != "invalid_input" || !strings.Contains(r.Str("error"), c.says) {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Raw)
		}
	}
	is := is.New(t)
	is.Equal(e.Do("GET", "/v1/batches", nil).Get("total"), float64(0))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), float64(0))
	is.Equal(e.Balance("acme").Balance, int64(100))

	// object_type and enrich naming one kind are the same ask.
	r := e.UploadCSV("domain\nacme.com\n", "?object_type=company&enrich=company")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Str("data.object_type"), "company")
}

// Each row decides, but a file whose rows are all of one kind is a batch of that kind,
// with the columns it always had: a row with a profile is a person, a row with a
// company page a company, whatever the file's first row is.
func TestBatchRowsOfOneKindKeepTheirColumns(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	e.Net.AddPerson(servertest.Employee("ann-lee", "Ann", "Lee", "https://www.linkedin.com/company/acme", "CTO", "Berlin", "DE", false))
	e.StartWorkers()

	r := e.UploadCSV("networkUrl\nhttps://www.linkedin.com/company/acme\nhttps://www.linkedin.com/in/ann-lee\n", "")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Str("data.object_type"), "mixed") // the first URL no longer decides for all
	done := e.WaitBatchDone(r.Str("data.id"))
	is.Equal(servertest.Count(done, "succeeded"), 2)
	recs := servertest.ReadCSV(t, e.Do("GET", "/v1/batches/"+r.Str("data.id")+"/results", nil).Raw)
	head := recs[0]
	is.Equal(recs[1][column(t, head, "enrichd_company_name")], "Acme")
	is.Equal(recs[2][column(t, head, "enrichd_full_name")], "Ann Lee")

	// A contact file whose every row has an email is a person batch, as it was.
	r = e.UploadCSV("email,domain\nann@acme.com,acme.com\n", "")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Str("data.object_type"), "person")
	is.Equal(r.Get("data.credits_estimate"), float64(3))
}
