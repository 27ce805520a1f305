// Package flatten turns an enrichment's outcome into the flat columns of a CSV row:
// `enrichd enrich --csv` and GET /v1/batches/{id}/results write the same columns, in
// the same order, from the API's JSON (package client's types), so a file enriched
// either way reads the same.
package flatten

import (
	"strconv"

	"enrichd/client"
)

// Result columns, after the input's. The prefix keeps them apart from input columns of
// the same name (a company file usually has a "domain" column already).
var (
	commonColumns  = []string{"enrichd_status", "enrichd_error_code", "enrichd_error_message", "enrichd_task_id"}
	companyColumns = []string{"enrichd_name", "enrichd_domain", "enrichd_network_url", "enrichd_employee_count",
		"enrichd_employee_range", "enrichd_industry", "enrichd_year_founded", "enrichd_hq_city", "enrichd_hq_country"}
	personColumns = []string{"enrichd_full_name", "enrichd_headline", "enrichd_current_title", "enrichd_current_company",
		"enrichd_city", "enrichd_country_code", "enrichd_network_url", "enrichd_email_match_method"}
)

// Columns are the result columns of objectType (client.ObjectCompany or
// client.ObjectPerson).
func Columns(objectType string) []string {
	out := append([]string{}, commonColumns...)
	if objectType == client.ObjectCompany {
		return append(out, companyColumns...)
	}
	return append(out, personColumns...)
}

// Outcome is what became of one input: its status (a task status, or a word of the
// caller's such as "interrupted"), the error's code and message when it failed, the
// task, and the result when it succeeded (Company or Person, by the object type).
type Outcome struct {
	Status  string
	Code    string
	Message string
	TaskID  string
	Company *client.Company
	Person  *client.Person
}

// Row is the outcome's values for Columns(objectType), in that order.
func Row(o Outcome, objectType string) []string {
	out := []string{o.Status, o.Code, o.Message, o.TaskID}
	if objectType == client.ObjectCompany {
		c := o.Company
		if c == nil {
			return append(out, make([]string, len(companyColumns))...)
		}
		return append(out, c.Name, str(c.Domain), str(c.NetworkURL), num(c.EmployeeCount), str(c.EmployeeRange),
			str(c.PrimaryIndustry), num(c.YearFounded), anyStr(c.Headquarters["city"]), anyStr(c.Headquarters["country"]))
	}
	p := o.Person
	if p == nil {
		return append(out, make([]string, len(personColumns))...)
	}
	var title, company, method string
	if pos := p.Current(); pos != nil {
		title, company = str(pos.Title), str(pos.CompanyName)
	}
	if p.EmailMatch != nil {
		method = p.EmailMatch.Method
	}
	return append(out, str(p.FullName), str(p.Headline), title, company, str(p.City), str(p.CountryCode), str(p.NetworkURL), method)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func num[T int | int64](p *T) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(int64(*p), 10)
}

func anyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
