package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"enrichd/enrich"
)

// Record origins.
const (
	originStore   = "store"   // the 30-day store of enriched records
	originDataset = "dataset" // what the team imported; read by the dataset source
)

// record is a stored company or person as found by one of its keys.
type record struct {
	id           int64
	objectType   string
	data         []byte
	lastEnriched time.Time
	redirect     sql.NullInt64 // set when the key is a domain alias
}

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

func findRecord(ctx context.Context, q querier, origin, key string) (*record, error) {
	var r record
	var last int64
	err := q.QueryRowContext(ctx, `SELECT r.id, r.object_type, r.data, r.last_enriched_at, k.redirect
		FROM record_keys k JOIN records r ON r.id = k.record_id
		WHERE k.origin = ? AND k.key = ?`, origin, key).Scan(&r.id, &r.objectType, &r.data, &last, &r.redirect)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.lastEnriched = fromMS(last)
	return &r, nil
}

// result decodes a record as the result of looking up target: a company found through
// an alias domain carries redirect; a person found by an address on record carries
// email_match exact.
func (r *record) result(in enrich.Input) (enrich.Result, error) {
	if r.objectType == enrich.ObjectPerson {
		var p enrich.Person
		err := json.Unmarshal(r.data, &p)
		if in.Lookup == enrich.LookupEmail {
			p.EmailMatch = &enrich.EmailMatch{Method: enrich.MatchExact, Email: in.Target}
		}
		return enrich.Result{Person: &p}, err
	}
	var c enrich.Company
	if err := json.Unmarshal(r.data, &c); err != nil {
		return enrich.Result{}, err
	}
	if in.Lookup == enrich.LookupDomain && c.Domain != nil && *c.Domain != in.Target {
		c.Redirect = &enrich.Redirect{From: in.Target, To: *c.Domain, Confirmed: r.redirect.Valid && r.redirect.Int64 == 1}
	}
	return enrich.Result{Company: &c}, nil
}

// FindStored returns the stored record for the input, whatever its age, or nil.
func (db *DB) FindStored(ctx context.Context, in enrich.Input) (*enrich.Result, error) {
	rec, err := findRecord(ctx, db.read, originStore, recordKey(in.Lookup, in.Target))
	if err != nil || rec == nil {
		return nil, err
	}
	res, err := rec.result(in)
	return &res, err
}

// recordKeys are the keys a record is saved under, each with its redirect mark.
type recordKeys map[string]sql.NullInt64

// identityKey is the key that names a record itself: a company by its network page,
// else its canonical domain; a person by profile. fallback serves a record that has
// neither.
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

// saveRecord inserts or replaces the record named by identity and points keys at it.
// A key that named another record moves to this one (a record left with no key is
// deleted), and a domain this company answered for that is no longer its canonical
// domain is kept as an alias, so looking it up answers with redirect.
func saveRecord(ctx context.Context, tx *Tx, origin string, res enrich.Result, keys recordKeys, identity string, lastEnriched, now time.Time) error {
	objectType := enrich.ObjectCompany
	var data any = res.Company
	if res.Person != nil {
		objectType, data = enrich.ObjectPerson, res.Person
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, ok := keys[identity]; !ok {
		keys[identity] = sql.NullInt64{}
	}
	var id int64
	if rec, err := findRecord(ctx, tx, origin, identity); err != nil {
		return err
	} else if rec != nil && rec.objectType == objectType {
		id = rec.id
		_, err = tx.ExecContext(ctx, `UPDATE records SET data = ?, last_enriched_at = ?, updated_at = ? WHERE id = ?`,
			raw, ms(lastEnriched), ms(now), id)
		if err != nil {
			return err
		}
	} else if err := tx.QueryRowContext(ctx, `INSERT INTO records (origin, object_type, data, last_enriched_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, origin, objectType, raw, ms(lastEnriched), ms(now), ms(now)).Scan(&id); err != nil {
		return err
	}
	for key, redirect := range keys {
		var previous int64
		err := tx.QueryRowContext(ctx, `SELECT record_id FROM record_keys WHERE origin = ? AND key = ?`, origin, key).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO record_keys (origin, key, record_id, redirect) VALUES (?, ?, ?, ?)`,
			origin, key, id, redirect); err != nil {
			return err
		}
		if previous != 0 && previous != id {
			if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE id = ?
				AND NOT EXISTS (SELECT 1 FROM record_keys WHERE record_id = ?)`, previous, previous); err != nil {
				return err
			}
		}
	}
	if c := res.Company; c != nil {
		canonical := ""
		if c.Domain != nil {
			canonical = "domain:" + *c.Domain
		}
		if _, err := tx.ExecContext(ctx, `UPDATE record_keys SET redirect = 0
			WHERE record_id = ? AND key LIKE 'domain:%' AND key != ? AND redirect IS NULL`, id, canonical); err != nil {
			return err
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM positions WHERE record_id = ?`, id); err != nil {
		return err
	}
	for i, p := range res.Person.Positions {
		var domain *string
		if p.Company != nil {
			domain = p.Company.Domain
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO positions (record_id, ord, title, company_name, company_network_url, company_domain, is_current)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, i, p.Title, p.CompanyName, p.CompanyNetworkURL, domain, p.IsCurrent); err != nil {
			return err
		}
	}
	return nil
}

// storeFetched saves what an enrichment of in fetched at fetchedAt into the 30-day
// store and returns the result as the task shows it: stamped as enriched then, with
// the redirect of the domain that was looked up. The record is saved under the target
// looked up when byTarget is set: a person found by email then has the address on
// record, and the next lookup of it is exact.
func storeFetched(ctx context.Context, tx *Tx, in enrich.Input, res enrich.Result, byTarget bool, fetchedAt, now time.Time) (enrich.Result, error) {
	keys := recordKeys{}
	if byTarget {
		keys[recordKey(in.Lookup, in.Target)] = sql.NullInt64{}
	}
	var stored, shown enrich.Result
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
	lookedUp := recordKey(in.Lookup, in.Target)
	identity := identityKey(stored, lookedUp)
	// A profile retrieved earlier (one gathered for an ambiguous address, settled
	// later by a hint) never replaces a newer record of the same subject.
	held, err := findRecord(ctx, tx, originStore, identity)
	if err != nil {
		return shown, err
	}
	if held != nil && held.lastEnriched.After(fetchedAt) {
		return shown, nil
	}
	return shown, saveRecord(ctx, tx, originStore, stored, keys, identity, fetchedAt, now)
}

func addCompanyKeys(keys recordKeys, c *enrich.Company) {
	if c.Domain != nil {
		keys["domain:"+*c.Domain] = sql.NullInt64{}
	}
	if c.NetworkURL != nil {
		keys["company:"+*c.NetworkURL] = sql.NullInt64{}
	}
}

func ptrCopy[T any](v *T) *T { c := *v; return &c }

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Dataset returns the `dataset` source: the records imported with Import.
func (db *DB) Dataset() enrich.Source { return datasetSource{db} }

type datasetSource struct{ db *DB }

func (datasetSource) Name() string { return "dataset" }

func (s datasetSource) CompanyByDomain(ctx context.Context, domain string) (*enrich.Company, error) {
	res, err := s.find(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: domain})
	return res.Company, err
}

func (s datasetSource) CompanyByURL(ctx context.Context, networkURL string) (*enrich.Company, error) {
	res, err := s.find(ctx, enrich.Input{Lookup: enrich.LookupCompanyURL, Target: networkURL})
	return res.Company, err
}

func (s datasetSource) PersonByURL(ctx context.Context, networkURL string) (*enrich.Person, error) {
	res, err := s.find(ctx, enrich.Input{Lookup: enrich.LookupPersonURL, Target: networkURL})
	return res.Person, err
}

func (s datasetSource) find(ctx context.Context, in enrich.Input) (enrich.Result, error) {
	rec, err := findRecord(ctx, s.db.read, originDataset, recordKey(in.Lookup, in.Target))
	if err != nil {
		return enrich.Result{}, fmt.Errorf("dataset: %v: %w", err, enrich.ErrUnavailable)
	}
	if rec == nil || rec.objectType != in.Lookup.ObjectType() {
		return enrich.Result{}, fmt.Errorf("dataset: %s: %w", in.Target, enrich.ErrNotFound)
	}
	return rec.result(in)
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

func validDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

// Import reads JSON Lines of companies and people into the dataset. Every line is
// checked before anything is written, and the whole file is written in one
// transaction: a bad line, reported with its number, leaves the dataset untouched.
func (db *DB) Import(ctx context.Context, r io.Reader, norm enrich.Normalizer) (ImportStats, error) {
	type parsed struct {
		res          enrich.Result
		keys         recordKeys
		lastEnriched *time.Time
	}
	var lines []parsed
	var stats ImportStats
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
			return ImportStats{}, lineErr("not a JSON object: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		p := parsed{keys: recordKeys{}}
		switch head.Type {
		case enrich.ObjectCompany:
			var c importCompany
			if err := dec.Decode(&c); err != nil {
				return ImportStats{}, lineErr("%v", err)
			}
			if strings.TrimSpace(c.Name) == "" {
				return ImportStats{}, lineErr("a company needs a name")
			}
			if c.Domain == nil && c.NetworkURL == nil {
				return ImportStats{}, lineErr("a company needs a domain or a network_url")
			}
			if err := normalizeCompany(norm, &c.Company); err != nil {
				return ImportStats{}, lineErr("%v", err)
			}
			addCompanyKeys(p.keys, &c.Company)
			for _, alias := range c.Domains {
				d, err := norm.Domain(alias)
				if err != nil {
					return ImportStats{}, lineErr("domains: %v", err)
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
				return ImportStats{}, lineErr("%v", err)
			}
			if ps.NetworkURL == nil {
				return ImportStats{}, lineErr("a person needs a network_url")
			}
			if err := normalizePerson(norm, &ps.Person); err != nil {
				return ImportStats{}, lineErr("%v", err)
			}
			p.keys["person:"+*ps.NetworkURL] = sql.NullInt64{}
			for _, e := range ps.Emails {
				addr, err := norm.Email(e)
				if err != nil {
					return ImportStats{}, lineErr("emails: %v", err)
				}
				p.keys[recordKey(enrich.LookupEmail, addr)] = sql.NullInt64{}
			}
			ps.EmailMatch = nil
			p.res, p.lastEnriched = enrich.Result{Person: &ps.Person}, ps.LastEnrichedAt
			stats.People++
		default:
			return ImportStats{}, lineErr(`"type" must be "company" or "person", not %q`, head.Type)
		}
		lines = append(lines, p)
	}
	if err := sc.Err(); err != nil {
		return ImportStats{}, fmt.Errorf("reading the import: %w", err)
	}
	err := db.inTx(ctx, func(tx *Tx) error {
		now := db.now()
		for _, p := range lines {
			last := now
			if p.lastEnriched != nil {
				last = *p.lastEnriched
			}
			if err := saveRecord(ctx, tx, originDataset, p.res, p.keys, identityKey(p.res, ""), last, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ImportStats{}, err
	}
	return stats, nil
}

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
