package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"enrichd/enrich"
)

// ImportStats counts what an import wrote.
type ImportStats struct {
	Companies int `json:"companies"`
	People    int `json:"people"`
}

// StoredRecord is a company or person held, as one of its keys finds it (a driver's
// FindRecord) or a staff query lists it (FindStaff).
type StoredRecord struct {
	ID           int64
	ObjectType   string // enrich.ObjectCompany or enrich.ObjectPerson
	Data         []byte // the company or person, JSON
	LastEnriched time.Time
	// ConfirmedAlias is set when the key found is a domain the company confirmed as an
	// alias of its own (record_keys.redirect = 1).
	ConfirmedAlias bool
}

// Result decodes the record as the result of looking up in (see RecordResult).
func (r *StoredRecord) Result(in enrich.Input) (enrich.Result, error) {
	return RecordResult(r.ObjectType, r.Data, r.ConfirmedAlias, in)
}

// StaffBy is what a staff query (a driver's FindStaff) matches people's current
// positions by; each is served by one index of positions.
type StaffBy int

const (
	StaffByNetworkURL StaffBy = iota // the company's page
	StaffByDomain                    // one of the company's domains
	StaffByName                      // the company's name, whatever its case
)

// FindStored returns the stored record for the input, whatever its age, or nil.
func (db *DB) FindStored(ctx context.Context, in enrich.Input) (*enrich.Result, error) {
	rec, err := db.FindRecord(ctx, OriginStore, RecordKey(in.Lookup, in.Target))
	if err != nil || rec == nil {
		return nil, err
	}
	res, err := rec.Result(in)
	return &res, err
}

// Held returns what email lookups read of the records held: the people addresses are
// on record for, stored companies, people by current employer, and what ambiguous
// lookups gathered.
func (db *DB) Held() enrich.Held { return held{db.Driver} }

type held struct{ d Driver }

func (h held) PersonByEmail(ctx context.Context, address string) (*enrich.HeldPerson, error) {
	for _, origin := range []string{OriginStore, OriginDataset} {
		rec, err := h.d.FindRecord(ctx, origin, RecordKey(enrich.LookupEmail, address))
		if err != nil {
			return nil, err
		}
		if rec == nil || rec.ObjectType != enrich.ObjectPerson {
			continue
		}
		var p enrich.Person
		if err := json.Unmarshal(rec.Data, &p); err != nil {
			return nil, err
		}
		return &enrich.HeldPerson{Person: &p, LastEnriched: rec.LastEnriched}, nil
	}
	return nil, nil
}

func (h held) CompanyByDomain(ctx context.Context, domain string) (*enrich.HeldCompany, error) {
	rec, err := h.d.FindRecord(ctx, OriginStore, RecordKey(enrich.LookupDomain, domain))
	if err != nil || rec == nil || rec.ObjectType != enrich.ObjectCompany {
		return nil, err
	}
	var c enrich.Company
	if err := json.Unmarshal(rec.Data, &c); err != nil {
		return nil, err
	}
	return &enrich.HeldCompany{Company: &c, LastEnriched: rec.LastEnriched}, nil
}

func (h held) CurrentStaff(ctx context.Context, e enrich.Employer, limit int) ([]enrich.HeldPerson, error) {
	return currentStaff(ctx, h.d, OriginStore, e, limit)
}

func (h held) Gathering(ctx context.Context, address string, since time.Time) (*enrich.Gathering, error) {
	return h.d.Gathering(ctx, address, since)
}

// currentStaff lists the people of origin with a current position that may be at the
// employer: by its page, any of its domains, or its name. It is a shortlist, at most
// limit people: Employer.Employs decides.
func currentStaff(ctx context.Context, d Driver, origin string, e enrich.Employer, limit int) ([]enrich.HeldPerson, error) {
	type lookup struct {
		by    StaffBy
		value string
	}
	var lookups []lookup
	if e.NetworkURL != "" {
		lookups = append(lookups, lookup{StaffByNetworkURL, e.NetworkURL})
	}
	for _, domain := range e.Domains {
		lookups = append(lookups, lookup{StaffByDomain, domain})
	}
	if e.Name != "" {
		lookups = append(lookups, lookup{StaffByName, e.Name})
	}
	seen := map[int64]bool{}
	var out []enrich.HeldPerson
	for _, l := range lookups {
		if len(out) >= limit {
			break
		}
		recs, err := d.FindStaff(ctx, origin, l.by, l.value, limit)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if seen[rec.ID] || len(out) >= limit {
				continue
			}
			seen[rec.ID] = true
			var p enrich.Person
			if err := json.Unmarshal(rec.Data, &p); err != nil {
				return nil, fmt.Errorf("record %d: %w", rec.ID, err)
			}
			out = append(out, enrich.HeldPerson{Person: &p, LastEnriched: rec.LastEnriched})
		}
	}
	return out, nil
}

// Dataset returns the `dataset` source: the records imported with Import.
func (db *DB) Dataset() enrich.Source { return datasetSource{db.Driver} }

type datasetSource struct{ d Driver }

// The dataset answers staff searches too (SearchStaff).
var _ enrich.StaffSearcher = datasetSource{}

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
	rec, err := s.d.FindRecord(ctx, OriginDataset, RecordKey(in.Lookup, in.Target))
	if err != nil {
		return enrich.Result{}, fmt.Errorf("dataset: %v: %w", err, enrich.ErrUnavailable)
	}
	if rec == nil || rec.ObjectType != in.Lookup.ObjectType() {
		return enrich.Result{}, fmt.Errorf("dataset: %s: %w", in.Target, enrich.ErrNotFound)
	}
	return rec.Result(in)
}

// SearchStaff lists the imported people with a current position at the company whose
// names may be among q.Names.
func (s datasetSource) SearchStaff(ctx context.Context, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
	if q.Company == nil {
		return nil, fmt.Errorf("dataset: staff search without a company: %w", enrich.ErrNotFound)
	}
	domain := ""
	if q.Company.Domain != nil {
		domain = *q.Company.Domain
	}
	e := enrich.EmployerOf(q.Company, domain)
	staff, err := currentStaff(ctx, s.d, OriginDataset, e, datasetStaffScan)
	if err != nil {
		return nil, fmt.Errorf("dataset: %v: %w", err, enrich.ErrUnavailable)
	}
	var out []enrich.StaffMember
	for _, h := range staff {
		p := h.Person
		if p.NetworkURL == nil || e.CurrentPosition(p) == nil {
			continue
		}
		n := enrich.NameOf(p)
		if !q.Matches(n.First, n.Last) {
			continue
		}
		m := enrich.StaffMember{NetworkURL: *p.NetworkURL}
		if p.FullName != nil {
			m.FullName = *p.FullName
		}
		out = append(out, m)
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	return out, nil
}

// datasetStaffScan bounds how many imported people of one company a staff search reads.
const datasetStaffScan = 5000
