// Package flatten turns an enrichment's outcome into the flat columns of a CSV row:
// `enrichd enrich --csv` and GET /v1/batches/{id}/results write the same columns, in
// the same order, from the result's JSON as the API gives it, so a file enriched
// either way reads the same. It imports nothing of enrichd, so that the client's
// programs and the server can both use it.
package flatten

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Object types, as the API names them. A mixed batch's rows are people and companies,
// or a person and the company beside it.
const (
	ObjectCompany = "company"
	ObjectPerson  = "person"
	ObjectMixed   = "mixed"
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

// companyPrefix sets a company's columns apart in a mixed row, after the person's:
// enrichd_company_status, enrichd_company_name, ...
const companyPrefix = "enrichd_company_"

// Columns are the result columns of objectType (ObjectCompany, ObjectPerson, or
// ObjectMixed: the person's, then the company's prefixed with companyPrefix).
func Columns(objectType string) []string {
	out := append([]string{}, commonColumns...)
	switch objectType {
	case ObjectCompany:
		return append(out, companyColumns...)
	case ObjectMixed:
		out = append(out, personColumns...)
		for _, c := range Columns(ObjectCompany) {
			out = append(out, companyPrefix+strings.TrimPrefix(c, "enrichd_"))
		}
		return out
	}
	return append(out, personColumns...)
}

// MixedRow is a mixed row's values for Columns(ObjectMixed): the person's outcome,
// then the company's. A lookup the row did not make is the zero Outcome: its columns
// are empty, its status too.
func MixedRow(person, company Outcome) []string {
	return append(Row(person, ObjectPerson), Row(company, ObjectCompany)...)
}

// Outcome is what became of one input: its status (a task status, or a word of the
// caller's such as "interrupted"), the error's code and message when it failed, the
// task, and the result's JSON (the API's Company or Person) when it succeeded.
type Outcome struct {
	Status  string
	Code    string
	Message string
	TaskID  string
	Data    json.RawMessage
}

// The fields of the API's results that the columns show.
type company struct {
	Name            string         `json:"name"`
	Domain          *string        `json:"domain"`
	NetworkURL      *string        `json:"network_url"`
	EmployeeCount   *int64         `json:"employee_count"`
	EmployeeRange   *string        `json:"employee_range"`
	PrimaryIndustry *string        `json:"primary_industry"`
	YearFounded     *int64         `json:"year_founded"`
	Headquarters    map[string]any `json:"headquarters"`
}

type person struct {
	FullName    *string `json:"full_name"`
	Headline    *string `json:"headline"`
	City        *string `json:"city"`
	CountryCode *string `json:"country_code"`
	NetworkURL  *string `json:"network_url"`
	Positions   []struct {
		Title       *string `json:"title"`
		CompanyName *string `json:"company_name"`
		IsCurrent   bool    `json:"is_current"`
	} `json:"positions"`
	EmailMatch *struct {
		Method string `json:"method"`
	} `json:"email_match"`
}

// Row is the outcome's values for Columns(objectType), in that order. A result that
// is absent or cannot be read leaves its columns empty.
func Row(o Outcome, objectType string) []string {
	out := []string{o.Status, o.Code, o.Message, o.TaskID}
	if objectType == ObjectCompany {
		var c company
		if len(o.Data) == 0 || json.Unmarshal(o.Data, &c) != nil {
			return append(out, make([]string, len(companyColumns))...)
		}
		return append(out, c.Name, str(c.Domain), str(c.NetworkURL), num(c.EmployeeCount), str(c.EmployeeRange),
			str(c.PrimaryIndustry), num(c.YearFounded), anyStr(c.Headquarters["city"]), anyStr(c.Headquarters["country"]))
	}
	var p person
	if len(o.Data) == 0 || json.Unmarshal(o.Data, &p) != nil {
		return append(out, make([]string, len(personColumns))...)
	}
	var title, employer, method string
	for _, pos := range p.Positions { // current roles come first
		if pos.IsCurrent {
			title, employer = str(pos.Title), str(pos.CompanyName)
			break
		}
	}
	if p.EmailMatch != nil {
		method = p.EmailMatch.Method
	}
	return append(out, str(p.FullName), str(p.Headline), title, employer, str(p.City), str(p.CountryCode), str(p.NetworkURL), method)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func num(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

func anyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

// SpreadsheetSafe is v as a CSV cell that a spreadsheet shows as text: a cell starting
// with = + - @, a tab or a carriage return is run as a formula when the file is opened
// (a company name such as =HYPERLINK(...) from a source, or a CRM field), so it gets
// a leading apostrophe. A plain number (-12.5) cannot be a formula and stays as it is.
func SpreadsheetSafe(v string) string {
	if v == "" || !strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return v
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return v
	}
	return "'" + v
}

// SpreadsheetSafeRow is SpreadsheetSafe of every value of row, in place.
func SpreadsheetSafeRow(row []string) []string {
	for i, v := range row {
		row[i] = SpreadsheetSafe(v)
	}
	return row
}
