package postgres

// Domain rules copied from package store, where they are unexported today. The lead's
// split exports them from store so that both drivers call the same code: this file is
// then deleted and the calls pointed at store's. Every function here is a copy, with
// its name in store given beside it; nothing here touches the database.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// taskOperation: store.taskOperation.
const taskOperation = "enrich"

// Record origins: store.originStore, store.originDataset.
const (
	originStore   = "store"
	originDataset = "dataset"
)

// recordKey: store.recordKey.
func recordKey(lookup enrich.Lookup, target string) string {
	switch lookup {
	case enrich.LookupDomain:
		return "domain:" + target
	case enrich.LookupCompanyURL:
		return "company:" + target
	case enrich.LookupPersonURL:
		return "person:" + target
	}
	return "email:" + enrich.AddressKey(target)
}

// recordKeys: store.recordKeys.
type recordKeys map[string]sql.NullInt64

// identityKey: store.identityKey.
func identityKey(res enrich.Result, fallback string) string {
	if c := res.Company; c != nil && c.NetworkURL != nil {
		return "company:" + *c.NetworkURL
	}
	if c := res.Company; c != nil && c.Domain != nil {
		return "domain:" + *c.Domain
	}
	if p := res.Person; p != nil && p.NetworkURL != nil {
		return "person:" + *p.NetworkURL
	}
	return fallback
}

// recordResult: store.record.result, on the record's fields.
func recordResult(objectType string, data []byte, redirect sql.NullInt64, in enrich.Input) (enrich.Result, error) {
	if objectType == enrich.ObjectPerson {
		var p enrich.Person
		err := json.Unmarshal(data, &p)
		if in.Lookup == enrich.LookupEmail {
			p.EmailMatch = &enrich.EmailMatch{Method: enrich.MatchExact, Email: in.Target}
		}
		return enrich.Result{Person: &p}, err
	}
	var c enrich.Company
	if err := json.Unmarshal(data, &c); err != nil {
		return enrich.Result{}, err
	}
	if in.Lookup == enrich.LookupDomain && c.Domain != nil && *c.Domain != in.Target {
		c.Redirect = &enrich.Redirect{From: in.Target, To: *c.Domain, Confirmed: redirect.Valid && redirect.Int64 == 1}
	}
	return enrich.Result{Company: &c}, nil
}

// resultJSON: store.resultJSON.
func resultJSON(res enrich.Result) (json.RawMessage, error) {
	if res.Person != nil {
		return json.Marshal(res.Person)
	}
	return json.Marshal(res.Company)
}

// bodyHash: store.bodyHash.
func bodyHash(h string) []byte {
	if len(h) == 2*sha256.Size {
		if b, err := hex.DecodeString(h); err == nil {
			return b
		}
	}
	return []byte(h)
}

// idempotencyMismatch is the decision of store.findIdempotent once the key's binding is
// read: nil when the request is the one the key was first used for, the 422
// idempotency_key_reused otherwise.
func idempotencyMismatch(endpoint sql.NullString, hash []byte, nt store.NewTask) error {
	switch first := endpoint.String; {
	case bytes.Equal(hash, bodyHash(nt.BodyHash)):
		return nil
	case first != "" && nt.Endpoint != "" && !strings.EqualFold(first, nt.Endpoint):
		return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
			Message: fmt.Sprintf("this Idempotency-Key was first used on %s, not on %s; a key names one request: send a new key for this one",
				first, nt.Endpoint)}
	case first == "":
		return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was first used with another request (another endpoint or body); send a new key for a new request"}
	default:
		return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was first used on " + first + " with a different request body; send that body again to get the original task back, or a new key for a new request"}
	}
}

// queueFull: the error of store.checkBacklog.
func queueFull(queued int64) error {
	return &enrich.Error{Kind: enrich.KindTooManyRequests, Code: "queue_full", QueuedTasks: &queued, RetryAfter: 10,
		Message: fmt.Sprintf("your organization already has %d queued tasks, the most it may have; let them drain and try again", queued)}
}

// taskNotFound: store.taskNotFound.
func taskNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "task not found"}
}

// taskSettled: the 409 of store.CancelTask.
func taskSettled(status string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "task_settled",
		Message: fmt.Sprintf("the task has already %s and can no longer be canceled", status)}
}

// timedOut and gaveUp: the errors of store.ExpireTasks and store.RequeueAbandoned.
var (
	timedOut = enrich.TaskError{Code: enrich.CodeTimedOut,
		Message: "the enrichment did not finish within the task's lifetime; retrying is safe"}
	gaveUp = enrich.TaskError{Code: enrich.CodeInternalError, Message: fmt.Sprintf(
		"the task was started %d times and each time its claim ran out before it finished (the service stopped, or could not extend its lease); it is not tried again", store.MaxTaskAttempts)}
)

// fetchedRecord is the domain half of store.storeFetched: what a fetched result is
// stored as (stored), what the task shows (shown), and the keys it is saved under.
func fetchedRecord(in enrich.Input, res enrich.Result, byTarget bool, fetchedAt, now time.Time) (stored, shown enrich.Result, keys recordKeys) {
	keys = recordKeys{}
	if byTarget {
		keys[recordKey(in.Lookup, in.Target)] = sql.NullInt64{}
	}
	if c := res.Company; c != nil {
		c = ptrCopy(c)
		c.EnrichmentStatus = enrich.StatusEnriched
		if c.CreatedAt == nil {
			c.CreatedAt = &now
		}
		if c.UpdatedAt == nil {
			c.UpdatedAt = &now
		}
		addCompanyKeys(keys, c)
		if in.Lookup == enrich.LookupDomain && (c.Domain == nil || *c.Domain != in.Target) {
			keys["domain:"+in.Target] = sql.NullInt64{Valid: true, Int64: boolInt(c.Redirect != nil && c.Redirect.Confirmed)}
		}
		shown = enrich.Result{Company: c}
		c = ptrCopy(c)
		c.Redirect = nil // belongs to the domain looked up, not to the company
		stored = enrich.Result{Company: c}
	}
	if p := res.Person; p != nil {
		p = ptrCopy(p)
		p.EnrichmentStatus, p.LastEnrichedAt = enrich.StatusEnriched, &fetchedAt
		if p.Positions == nil {
			p.Positions = []enrich.Position{}
		}
		if p.NetworkURL != nil {
			keys["person:"+*p.NetworkURL] = sql.NullInt64{}
		}
		shown = enrich.Result{Person: p}
		p = ptrCopy(p)
		p.EmailMatch = nil // belongs to the address looked up, not to the person
		stored = enrich.Result{Person: p}
	}
	return stored, shown, keys
}

// addCompanyKeys: store.addCompanyKeys.
func addCompanyKeys(keys recordKeys, c *enrich.Company) {
	if c.Domain != nil {
		keys["domain:"+*c.Domain] = sql.NullInt64{}
	}
	if c.NetworkURL != nil {
		keys["company:"+*c.NetworkURL] = sql.NullInt64{}
	}
}

// ptrCopy: store.ptrCopy.
func ptrCopy[T any](v *T) *T { c := *v; return &c }

// boolInt: store.boolInt.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// importLine is one parsed line of an import: store.Import's parsed.
type importLine struct {
	res          enrich.Result
	keys         recordKeys
	lastEnriched *time.Time
}

type importCompany struct {
	Type string `json:"type"`
	enrich.Company
	Domains []string `json:"domains"`
}

type importPerson struct {
	Type string `json:"type"`
	enrich.Person
	Emails []string `json:"emails"`
}

// parseImport is the checking half of store.Import: every line read and checked, none
// written.
func parseImport(r io.Reader, norm enrich.Normalizer) ([]importLine, store.ImportStats, error) {
	var lines []importLine
	var stats store.ImportStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		lineErr := func(format string, args ...any) error {
			return enrich.Errorf(enrich.KindInvalid, "line %d: %s", n, fmt.Sprintf(format, args...))
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return nil, store.ImportStats{}, lineErr("not a JSON object: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		p := importLine{keys: recordKeys{}}
		switch head.Type {
		case enrich.ObjectCompany:
			var c importCompany
			if err := dec.Decode(&c); err != nil {
				return nil, store.ImportStats{}, lineErr("%v", err)
			}
			if strings.TrimSpace(c.Name) == "" {
				return nil, store.ImportStats{}, lineErr("a company needs a name")
			}
			if c.Domain == nil && c.NetworkURL == nil {
				return nil, store.ImportStats{}, lineErr("a company needs a domain or a network_url")
			}
			if err := normalizeCompany(norm, &c.Company); err != nil {
				return nil, store.ImportStats{}, lineErr("%v", err)
			}
			addCompanyKeys(p.keys, &c.Company)
			for _, alias := range c.Domains {
				d, err := norm.Domain(alias)
				if err != nil {
					return nil, store.ImportStats{}, lineErr("domains: %v", err)
				}
				if c.Domain == nil || d != *c.Domain {
					p.keys["domain:"+d] = sql.NullInt64{Valid: true, Int64: 0}
				}
			}
			c.Redirect = nil
			p.res, p.lastEnriched = enrich.Result{Company: &c.Company}, c.UpdatedAt
			stats.Companies++
		case enrich.ObjectPerson:
			var ps importPerson
			if err := dec.Decode(&ps); err != nil {
				return nil, store.ImportStats{}, lineErr("%v", err)
			}
			if ps.NetworkURL == nil {
				return nil, store.ImportStats{}, lineErr("a person needs a network_url")
			}
			if err := normalizePerson(norm, &ps.Person); err != nil {
				return nil, store.ImportStats{}, lineErr("%v", err)
			}
			p.keys["person:"+*ps.NetworkURL] = sql.NullInt64{}
			for _, e := range ps.Emails {
				addr, err := norm.Email(e)
				if err != nil {
					return nil, store.ImportStats{}, lineErr("emails: %v", err)
				}
				p.keys[recordKey(enrich.LookupEmail, addr)] = sql.NullInt64{}
			}
			ps.EmailMatch = nil
			p.res, p.lastEnriched = enrich.Result{Person: &ps.Person}, ps.LastEnrichedAt
			stats.People++
		default:
			return nil, store.ImportStats{}, lineErr(`"type" must be "company" or "person", not %q`, head.Type)
		}
		lines = append(lines, p)
	}
	if err := sc.Err(); err != nil {
		return nil, store.ImportStats{}, fmt.Errorf("reading the import: %w", err)
	}
	return lines, stats, nil
}

// normalizeCompany: store.normalizeCompany.
func normalizeCompany(norm enrich.Normalizer, c *enrich.Company) error {
	if c.Domain != nil {
		d, err := norm.Domain(*c.Domain)
		if err != nil {
			return err
		}
		c.Domain = &d
	}
	if c.NetworkURL != nil {
		u, err := norm.CompanyURL(*c.NetworkURL)
		if err != nil {
			return err
		}
		c.NetworkURL = &u
	}
	if c.EnrichmentStatus == "" {
		c.EnrichmentStatus = enrich.StatusEnriched
	}
	return nil
}

// normalizePerson: store.normalizePerson.
func normalizePerson(norm enrich.Normalizer, p *enrich.Person) error {
	u, err := norm.PersonURL(*p.NetworkURL)
	if err != nil {
		return err
	}
	p.NetworkURL = &u
	if p.EnrichmentStatus == "" {
		p.EnrichmentStatus = enrich.StatusEnriched
	}
	if p.Positions == nil {
		p.Positions = []enrich.Position{}
	}
	for i := range p.Positions {
		pos := &p.Positions[i]
		if pos.CompanyNetworkURL != nil {
			u, err := norm.CompanyURL(*pos.CompanyNetworkURL)
			if err != nil {
				return fmt.Errorf("positions[%d].company_network_url: %v", i, err)
			}
			pos.CompanyNetworkURL = &u
		}
		if pos.Company != nil && pos.Company.Domain != nil {
			d, err := norm.Domain(*pos.Company.Domain)
			if err != nil {
				return fmt.Errorf("positions[%d].company.domain: %v", i, err)
			}
			pos.Company.Domain = &d
		}
		for _, d := range []struct {
			name            string
			date, precision *string
		}{{"start_date", pos.StartDate, pos.StartDatePrecision}, {"end_date", pos.EndDate, pos.EndDatePrecision}} {
			if d.date != nil && !validDate(*d.date) {
				return fmt.Errorf("positions[%d].%s %q is not a YYYY-MM-DD date", i, d.name, *d.date)
			}
			if d.precision != nil && *d.precision != "year" && *d.precision != "month" && *d.precision != "day" {
				return fmt.Errorf("positions[%d].%s_precision must be year, month or day", i, d.name)
			}
		}
	}
	return nil
}

// validDate: store.validDate.
func validDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}
