package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"enrichd/flatten"

	"github.com/matryer/is"
)

// contact is a row of a CRM's export of contacts, and what its lookups should come to.
type contact struct {
	first, last, email, domain, owner string
	// malformed rows are refused at the upload; raw is the line as written when the
	// row is not even of the header's width.
	malformed bool
	raw       string
	// What the lookups find: a person (by the email) and a company (by the domain).
	personFound, companyFound bool
}

// contactCompanies are the companies of the contacts' network, co0.com to co6.com.
const contactCompanies = 7

var contactNames = [][2]string{
	{"ann", "lee"}, {"bob", "stone"}, {"cara", "park"}, {"dan", "wood"}, {"eve", "hill"}, {"finn", "ford"},
	{"gail", "reed"}, {"hugo", "shaw"}, {"ida", "vale"}, {"jon", "ross"}, {"kim", "moss"}, {"liam", "nash"},
	{"mia", "lowe"}, {"ned", "pike"}, {"olga", "hale"}, {"paul", "dunn"}, {"quinn", "webb"}, {"rosa", "cole"},
	{"sam", "kerr"}, {"tina", "tate"}, {"uma", "lamb"}, {"vic", "bell"}, {"wes", "cook"}, {"yara", "dean"},
	{"zoe", "east"}, {"alan", "frye"}, {"beth", "gray"}, {"carl", "hart"}, {"dora", "ives"}, {"emil", "jett"},
	{"fay", "knox"}, {"glen", "lund"}, {"hana", "mays"}, {"ivan", "noel"}, {"june", "orr"},
}

// contactExport is 51 contacts as a CRM exports them: 20 with an email and their
// company's domain (two of the people unknown, one company's domain unknown), 15 with
// an email alone (one unknown), 11 with a domain alone (two unknown), and 5 malformed,
// spread among them. Every known person works at a company of the network.
func contactExport(e *env) []contact {
	for i := range contactCompanies {
		e.net.addCompany(company(fmt.Sprintf("Co%d", i), fmt.Sprintf("co%d.com", i)))
	}
	person := 0
	withEmail := func(found bool) contact {
		n := contactNames[person]
		co := person % contactCompanies
		person++
		c := contact{first: n[0], last: n[1], email: n[0] + "." + n[1] + "@" + fmt.Sprintf("co%d.com", co), owner: "sales", personFound: found}
		if found {
			e.net.addPerson(employee(n[0]+"-"+n[1], strings.ToUpper(n[0][:1])+n[0][1:], strings.ToUpper(n[1][:1])+n[1][1:],
				fmt.Sprintf("https://www.linkedin.com/company/co%d", co), "Engineer", "Berlin", "DE", false))
		}
		return c
	}
	var both, emails, domains []contact
	for i := range 20 {
		c := withEmail(i != 3 && i != 11)
		c.domain, c.companyFound = c.email[strings.IndexByte(c.email, '@')+1:], true
		if i == 7 {
			c.domain, c.companyFound = "old-employer.example", false
		}
		both = append(both, c)
	}
	for i := range 15 {
		emails = append(emails, withEmail(i != 5))
	}
	for i := range 11 {
		c := contact{domain: fmt.Sprintf("co%d.com", i%contactCompanies), owner: "marketing", companyFound: true}
		if i == 2 {
			c.domain = "https://www.Co2.com/about"
		}
		if i == 4 || i == 9 {
			c.domain, c.companyFound = fmt.Sprintf("nobody%d.example", i), false
		}
		domains = append(domains, c)
	}
	malformed := []contact{
		{first: "Ann", email: "ann.lee at co0.com", malformed: true},
		{first: "Nobody", owner: "sales", malformed: true},
		{domain: "not a domain!", malformed: true},
		{raw: "Cy,Short,cy@co1.com", malformed: true},
		{first: "Bob", email: "bob@@co1.com", domain: "co1.com", malformed: true},
	}
	var out []contact
	for len(both)+len(emails)+len(domains) > 0 {
		for _, g := range []*[]contact{&both, &emails, &domains, &both} {
			if len(*g) > 0 {
				out, *g = append(out, (*g)[0]), (*g)[1:]
			}
		}
	}
	for k, at := range []int{3, 12, 25, 38, 50} {
		out = slices.Insert(out, at, malformed[k])
	}
	return out
}

// contactsCSV writes the contacts as the CRM does: a header, then a line each.
func contactsCSV(contacts []contact) string {
	var b strings.Builder
	b.WriteString("First Name,Last Name,email,domain,Owner\n")
	for _, c := range contacts {
		if c.raw != "" {
			b.WriteString(c.raw + "\n")
			continue
		}
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s\n", c.first, c.last, c.email, c.domain, c.owner)
	}
	return b.String()
}

// ledgerByTask is the organization's ledger by task: what each was charged and
// refunded. A task's charge or refund split over grants is added up.
func (e *env) ledgerByTask(org string) map[string][2]int64 {
	e.t.Helper()
	out := map[string][2]int64{}
	for _, en := range e.ledgerOf(org) {
		if en.TaskID == nil {
			continue
		}
		v := out[*en.TaskID]
		switch en.Kind {
		case "charge":
			v[0] += en.Amount
		case "refund":
			v[1] += en.Amount
		default:
			e.t.Fatalf("a ledger row of kind %s for task %s", en.Kind, *en.TaskID)
		}
		out[*en.TaskID] = v
	}
	return out
}

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
	is := is.New(t)
	e := newEnv(t)
	contacts := contactExport(e)
	is.Equal(len(contacts), 51)
	file := contactsCSV(contacts)
	if _, err := e.db.GrantCredits(t.Context(), "acme", 200, nil); err != nil {
		t.Fatal(err)
	}
	e.startWorkers()

	var malformedRows []any
	for i, c := range contacts {
		if c.malformed {
			malformedRows = append(malformedRows, float64(i+1))
		}
	}
	is.Equal(len(malformedRows), 5)

	// All or nothing, by default: the five rows are listed, nothing is made.
	r := e.uploadCSV(file, "?name=contacts.csv")
	is.Equal(r.status, http.StatusBadRequest)
	is.Equal(r.str("code"), "invalid_input")
	is.True(strings.Contains(r.str("error"), "5 of 51 rows are refused"))
	var listed []any
	for _, row := range r.get("rows").([]any) {
		m := row.(map[string]any)
		listed = append(listed, m["row"])
		is.Equal(m["line"], m["row"].(float64)+1) // a line each, after the header
	}
	is.Equal(listed, malformedRows)
	is.Equal(e.do("GET", "/v1/batches", nil).get("total"), float64(0))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), float64(0))
	is.Equal(e.balance("acme").Balance, int64(300))

	// Skipped: the others go ahead, each what it has.
	r = e.uploadCSV(file, "?name=contacts.csv&on_error=skip")
	is.Equal(r.status, http.StatusAccepted)
	id := r.str("data.id")
	is.Equal(r.str("data.object_type"), "mixed")
	is.Equal(r.get("data.rows"), float64(51))
	is.Equal(count(r, "skipped"), 5)
	is.Equal(count(r, "pending"), 46)
	is.Equal(r.get("data.credits_estimate"), float64(20*3+15*3+11*1)) // the domains of the email rows are not looked up
	var skipped []any
	for _, row := range r.get("data.skipped_rows").([]any) {
		m := row.(map[string]any)
		skipped = append(skipped, m["row"])
		is.Equal(m["line"], m["row"].(float64)+1)
		is.True(m["error"].(string) != "")
	}
	is.Equal(skipped, malformedRows)

	done := e.waitBatchDone(id)
	is.Equal(count(done, "succeeded"), 18+14+9)
	is.Equal(count(done, "failed"), 2+1+2)
	is.Equal(count(done, "skipped"), 5)
	is.Equal(count(done, "pending"), 0)
	is.Equal(done.get("data.skipped_rows"), r.get("data.skipped_rows"))
	spent := int64(18*3 + 14*3 + 9*1)
	is.Equal(done.get("data.credits_spent"), float64(spent))
	is.Equal(e.balance("acme").Balance, int64(300)-spent)
	// The list counts the skipped rows, and lists them only on the batch.
	list := e.do("GET", "/v1/batches", nil)
	is.Equal(list.get("data").([]any)[0].(map[string]any)["counts"].(map[string]any)["skipped"], float64(5))
	is.True(!strings.Contains(string(list.raw), "skipped_rows"))

	res := e.do("GET", "/v1/batches/"+id+"/results", nil)
	is.Equal(res.status, 200)
	recs := readCSV(t, res.raw)
	is.Equal(len(recs), 52)
	head := recs[0]
	is.Equal(head, append([]string{"First Name", "Last Name", "email", "domain", "Owner"}, flatten.Columns("mixed")...))
	status, code, msg, task := column(t, head, "enrichd_status"), column(t, head, "enrichd_error_code"), column(t, head, "enrichd_error_message"), column(t, head, "enrichd_task_id")
	cStatus, cTask, cName := column(t, head, "enrichd_company_status"), column(t, head, "enrichd_company_task_id"), column(t, head, "enrichd_company_name")
	ledger := e.ledgerByTask("acme")
	is.Equal(len(ledger), 46) // a task each, and nothing else charged
	for i, c := range contacts {
		rec := recs[i+1]
		switch {
		case c.malformed:
			is.Equal(rec[status], "skipped")
			is.Equal(rec[code], "invalid_input")
			is.True(rec[msg] != "")
			is.Equal(rec[cStatus], "skipped")
			is.Equal(rec[task], "")
		case c.email != "":
			is.Equal(rec[:5], []string{c.first, c.last, c.email, c.domain, c.owner}) // the input as uploaded
			is.Equal(rec[cStatus], "")                                               // its domain is not looked up
			want := [2]int64{3, 0}
			if c.personFound {
				is.Equal(rec[status], "succeeded")
				is.Equal(rec[column(t, head, "enrichd_email_match_method")], "resolved")
			} else {
				is.Equal(rec[status], "failed")
				want[1] = 3
			}
			is.Equal(ledger[rec[task]], want)
			taskBody := e.do("GET", "/v1/tasks/"+rec[task], nil)
			is.Equal(taskBody.str("task.idempotency_key"), fmt.Sprintf("batch:%s:%d", id, i+1))
		default:
			is.Equal(rec[status], "")
			is.Equal(rec[task], "")
			want := [2]int64{1, 0}
			if c.companyFound {
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
	key := e.uploadCSV(file, "?on_error=skip", "Idempotency-Key", "contacts-1")
	is.Equal(key.status, 202)
	e.waitBatchDone(key.str("data.id"))
	is.Equal(e.uploadCSV(file, "?on_error=skip", "Idempotency-Key", "contacts-1").header.Get("Idempotent-Replayed"), "true")
	is.Equal(e.uploadCSV(file, "?on_error=skip&enrich=company,person", "Idempotency-Key", "contacts-1").str("code"), "idempotency_key_reused")
}

// enrich=company,person: a contact with an email and a domain gets its person and its
// company, two tasks in one result row, each charged and refunded on its own terms: a
// company that is not found is refunded while its person is kept.
func TestBatchOfContactsEnrichesPersonAndCompany(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	contacts := contactExport(e)
	file := contactsCSV(contacts)
	if _, err := e.db.GrantCredits(t.Context(), "acme", 200, nil); err != nil {
		t.Fatal(err)
	}
	e.startWorkers()

	r := e.uploadCSV(file, "?enrich=company,person&on_error=skip")
	is.Equal(r.status, http.StatusAccepted)
	id := r.str("data.id")
	is.Equal(r.str("data.object_type"), "mixed")
	is.Equal(count(r, "pending"), 20*2+15+11)
	estimate := int64(20*(3+1) + 15*3 + 11*1)
	is.Equal(r.get("data.credits_estimate"), float64(estimate))

	done := e.waitBatchDone(id)
	is.Equal(count(done, "succeeded"), (18+19)+14+9)
	is.Equal(count(done, "failed"), (2+1)+1+2)
	is.Equal(count(done, "skipped"), 5)
	refunded := int64(2*3+1) + 1*3 + 2*1
	is.Equal(done.get("data.credits_spent"), float64(estimate-refunded))
	is.Equal(e.balance("acme").Balance, 300-estimate+refunded)

	recs := readCSV(t, e.do("GET", "/v1/batches/"+id+"/results", nil).raw)
	head := recs[0]
	status, task := column(t, head, "enrichd_status"), column(t, head, "enrichd_task_id")
	cStatus, cTask, cDomain := column(t, head, "enrichd_company_status"), column(t, head, "enrichd_company_task_id"), column(t, head, "enrichd_company_domain")
	ledger := e.ledgerByTask("acme")
	is.Equal(len(ledger), 20*2+15+11)
	for i, c := range contacts {
		rec := recs[i+1]
		if c.malformed || c.email == "" || c.domain == "" {
			continue
		}
		// A contact row: both lookups, each its own task and key.
		person, company := [2]int64{3, 0}, [2]int64{1, 0}
		if !c.personFound {
			person[1] = 3
			is.Equal(rec[status], "failed")
		} else {
			is.Equal(rec[status], "succeeded")
		}
		if !c.companyFound {
			company[1] = 1
			is.Equal(rec[cStatus], "failed")
			is.Equal(rec[column(t, head, "enrichd_company_error_code")], "not_found")
		} else {
			is.Equal(rec[cStatus], "succeeded")
			is.Equal(rec[cDomain], c.domain)
		}
		is.Equal(ledger[rec[task]], person)
		is.Equal(ledger[rec[cTask]], company)
		is.Equal(e.do("GET", "/v1/tasks/"+rec[cTask], nil).str("task.idempotency_key"), fmt.Sprintf("batch:%s:%d:company", id, i+1))
	}
}

// A company whose task cannot be made when its turn comes (the credits were spent
// meanwhile) fails alone, uncharged, and the person beside it is kept.
func TestBatchCompanyFailsAloneWhenCreditsRunOut(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	contacts := contactExport(e)
	var file strings.Builder
	file.WriteString("email,domain\n")
	var c contact
	for _, c = range contacts {
		if c.personFound && c.companyFound && c.email != "" && c.domain != "" {
			break
		}
	}
	fmt.Fprintf(&file, "%s,%s\n", c.email, c.domain)
	r := e.uploadCSV(file.String(), "?enrich=company,person")
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.get("data.credits_estimate"), float64(4))
	// 97 credits are spent, on lookups that succeed, before the feeder runs: 3 are
	// left, the person's price, and none for its company.
	for i := range 97 {
		domain := fmt.Sprintf("spend%d.example", i)
		e.net.addCompany(company(fmt.Sprintf("Spend%d", i), domain))
		is.Equal(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": domain}).status, http.StatusAccepted)
	}
	e.startWorkers()
	done := e.waitBatchDone(r.str("data.id"))
	is.Equal(count(done, "succeeded"), 1)
	is.Equal(count(done, "failed"), 1)
	is.Equal(done.get("data.credits_spent"), float64(3))
	recs := readCSV(t, e.do("GET", "/v1/batches/"+r.str("data.id")+"/results", nil).raw)
	head := recs[0]
	is.Equal(recs[1][column(t, head, "enrichd_status")], "succeeded")
	is.Equal(recs[1][column(t, head, "enrichd_company_status")], "failed")
	is.Equal(recs[1][column(t, head, "enrichd_company_error_code")], "insufficient_credits")
	is.Equal(recs[1][column(t, head, "enrichd_company_task_id")], "")
	is.Equal(e.balance("acme").Balance, int64(0))
	is.Equal(len(e.ledgerByTask("acme")), 97+1) // the company's lookup never reached the ledger
}

// The parameters of an upload are checked before its file is read; a file of which
// every row is refused makes no batch, skipped or not.
func TestBatchAskRefusals(t *testing.T) {
	e := newEnv(t)
	e.startWorkers()
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
		r := e.uploadCSV(c.body, c.query)
		if r.status != http.StatusBadRequest || r.str("code") != "invalid_input" || !strings.Contains(r.str("error"), c.says) {
			t.Errorf("%s: %d %s", c.name, r.status, r.raw)
		}
	}
	is := is.New(t)
	is.Equal(e.do("GET", "/v1/batches", nil).get("total"), float64(0))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), float64(0))
	is.Equal(e.balance("acme").Balance, int64(100))

	// object_type and enrich naming one kind are the same ask.
	r := e.uploadCSV("domain\nacme.com\n", "?object_type=company&enrich=company")
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.str("data.object_type"), "company")
}

// Each row decides, but a file whose rows are all of one kind is a batch of that kind,
// with the columns it always had: a row with a profile is a person, a row with a
// company page a company, whatever the file's first row is.
func TestBatchRowsOfOneKindKeepTheirColumns(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.net.addCompany(company("Acme", "acme.com"))
	e.net.addPerson(employee("ann-lee", "Ann", "Lee", "https://www.linkedin.com/company/acme", "CTO", "Berlin", "DE", false))
	e.startWorkers()

	r := e.uploadCSV("networkUrl\nhttps://www.linkedin.com/company/acme\nhttps://www.linkedin.com/in/ann-lee\n", "")
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.str("data.object_type"), "mixed") // the first URL no longer decides for all
	done := e.waitBatchDone(r.str("data.id"))
	is.Equal(count(done, "succeeded"), 2)
	recs := readCSV(t, e.do("GET", "/v1/batches/"+r.str("data.id")+"/results", nil).raw)
	head := recs[0]
	is.Equal(recs[1][column(t, head, "enrichd_company_name")], "Acme")
	is.Equal(recs[2][column(t, head, "enrichd_full_name")], "Ann Lee")

	// A contact file whose every row has an email is a person batch, as it was.
	r = e.uploadCSV("email,domain\nann@acme.com,acme.com\n", "")
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.str("data.object_type"), "person")
	is.Equal(r.get("data.credits_estimate"), float64(3))
}
