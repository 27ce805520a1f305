package servertest

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// UploadCSV posts a CSV file as a batch; query is added to the path as is.
func (e *Env) UploadCSV(file, query string, headers ...string) *Response {
	e.T.Helper()
	return e.Do("POST", "/v1/batches"+query, file, append([]string{"Content-Type", "text/csv"}, headers...)...)
}

// WaitBatchDone polls a batch until every row's task has settled.
func (e *Env) WaitBatchDone(id string) *Response {
	e.T.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		r := e.Do("GET", "/v1/batches/"+id, nil)
		if r.Status != 200 {
			e.T.Fatalf("GET batch %s: %d %s", id, r.Status, r.Raw)
		}
		if r.Str("data.status") == "done" {
			return r
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("batch %s did not finish: %s", id, r.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func Count(r *Response, status string) int {
	n, _ := r.Get("data.counts." + status).(float64)
	return int(n)
}

func ReadCSV(t *testing.T, raw []byte) [][]string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		t.Fatalf("results are not CSV: %v\n%s", err, raw)
	}
	return recs
}

// WideHeader is a CSV header of n distinct columns, domain the first.
func WideHeader(n int) string {
	cols := []string{"domain"}
	for i := 1; i < n; i++ {
		cols = append(cols, fmt.Sprintf("c%d", i))
	}
	return strings.Join(cols, ",")
}

// Contact is a row of a CRM's export of contacts, and what its lookups should come to.
type Contact struct {
	First, Last, Email, Domain, Owner string
	// malformed rows are refused at the upload; raw is the line as written when the
	// row is not even of the header's width.
	Malformed bool
	raw       string
	// What the lookups find: a person (by the email) and a company (by the domain).
	PersonFound, CompanyFound bool
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

// ContactExport is 51 contacts as a CRM exports them: 20 with an email and their
// company's domain (two of the people unknown, one company's domain unknown), 15 with
// an email alone (one unknown), 11 with a domain alone (two unknown), and 5 malformed,
// spread among them. Every known person works at a company of the network.
func ContactExport(e *Env) []Contact {
	for i := range contactCompanies {
		e.Net.AddCompany(Company(fmt.Sprintf("Co%d", i), fmt.Sprintf("co%d.com", i)))
	}
	person := 0
	withEmail := func(found bool) Contact {
		n := contactNames[person]
		co := person % contactCompanies
		person++
		c := Contact{First: n[0], Last: n[1], Email: n[0] + "." + n[1] + "@" + fmt.Sprintf("co%d.com", co), Owner: "sales", PersonFound: found}
		if found {
			e.Net.AddPerson(Employee(n[0]+"-"+n[1], strings.ToUpper(n[0][:1])+n[0][1:], strings.ToUpper(n[1][:1])+n[1][1:],
				fmt.Sprintf("https://www.linkedin.com/company/co%d", co), "Engineer", "Berlin", "DE", false))
		}
		return c
	}
	var both, emails, domains []Contact
	for i := range 20 {
		c := withEmail(i != 3 && i != 11)
		c.Domain, c.CompanyFound = c.Email[strings.IndexByte(c.Email, '@')+1:], true
		if i == 7 {
			c.Domain, c.CompanyFound = "old-employer.example", false
		}
		both = append(both, c)
	}
	for i := range 15 {
		emails = append(emails, withEmail(i != 5))
	}
	for i := range 11 {
		c := Contact{Domain: fmt.Sprintf("co%d.com", i%contactCompanies), Owner: "marketing", CompanyFound: true}
		if i == 2 {
			c.Domain = "https://www.Co2.com/about"
		}
		if i == 4 || i == 9 {
			c.Domain, c.CompanyFound = fmt.Sprintf("nobody%d.example", i), false
		}
		domains = append(domains, c)
	}
	malformed := []Contact{
		{First: "Ann", Email: "ann.lee at co0.com", Malformed: true},
		{First: "Nobody", Owner: "sales", Malformed: true},
		{Domain: "not a domain!", Malformed: true},
		{raw: "Cy,Short,cy@co1.com", Malformed: true},
		{First: "Bob", Email: "bob@@co1.com", Domain: "co1.com", Malformed: true},
	}
	var out []Contact
	for len(both)+len(emails)+len(domains) > 0 {
		for _, g := range []*[]Contact{&both, &emails, &domains, &both} {
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

// ContactsCSV writes the contacts as the CRM does: a header, then a line each.
func ContactsCSV(contacts []Contact) string {
	var b strings.Builder
	b.WriteString("First Name,Last Name,email,domain,Owner\n")
	for _, c := range contacts {
		if c.raw != "" {
			b.WriteString(c.raw + "\n")
			continue
		}
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s\n", c.First, c.Last, c.Email, c.Domain, c.Owner)
	}
	return b.String()
}

// LedgerByTask is the organization's ledger by task: what each was charged and
// refunded. A task's charge or refund split over grants is added up.
func (e *Env) LedgerByTask(org string) map[string][2]int64 {
	e.T.Helper()
	out := map[string][2]int64{}
	for _, en := range e.LedgerOf(org) {
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
			e.T.Fatalf("a ledger row of kind %s for task %s", en.Kind, *en.TaskID)
		}
		out[*en.TaskID] = v
	}
	return out
}
