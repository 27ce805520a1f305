package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"enrichd/enrich"
)

// ImportStats counts what an import wrote.
type ImportStats struct {
	Companies int `json:"companies"`
	People    int `json:"people"`
}

// StoredRecord is a company or person held, as one of its keys finds it (FindRecord)
// or a staff query lists it (FindStaff).
type StoredRecord struct {
	ID           int64
	ObjectType   string // enrich.ObjectCompany or enrich.ObjectPerson
	Data         []byte // the company or person, JSON
	LastEnriched time.Time
	// ConfirmedAlias is set when the key found is a domain the company confirmed as an
	// alias of its own (record_keys.redirect = 1).
	ConfirmedAlias bool
	// Provenance is the JSON object naming the source of each field, as the record was
	// stored (FindRecord only; nil for a record kept before provenance was).
	Provenance []byte
	// SubjectHash is the hash of whom the record is about: a person's profile, a
	// company's domain (FindRecord only; nil for a record not hashed yet).
	SubjectHash []byte
}

// Result decodes the record as the result of looking up in (see RecordResult).
func (r *StoredRecord) Result(in enrich.Input) (enrich.Result, error) {
	return RecordResult(r.ObjectType, r.Data, r.ConfirmedAlias, in)
}

// StaffBy is what a staff query (FindStaff) matches people's current
// positions by; each is served by one index of positions.
type StaffBy int

const (
	StaffByNetworkURL StaffBy = iota // the company's page
	StaffByDomain                    // one of the company's domains
	StaffByName                      // the company's name, whatever its case
)

// FindStored returns the stored record for the input, whatever its age, or nil: of
// the records fetched with the installation's keys, which every organization is served.
func (db *DB) FindStored(ctx context.Context, in enrich.Input) (*enrich.Result, error) {
	res, _, err := db.FindStoredWithProvenance(ctx, in)
	return res, err
}

// FindStoredWithProvenance is FindStored with the provenance the record was stored
// with (empty when it was stored without).
func (db *DB) FindStoredWithProvenance(ctx context.Context, in enrich.Input) (*enrich.Result, enrich.Provenance, error) {
	return db.FindStoredFor(ctx, "", in)
}

// FindStoredFor is FindStoredWithProvenance for a task of the organization orgID: the
// record fetched with the organization's own key when there is one, else the shared one.
func (db *DB) FindStoredFor(ctx context.Context, orgID string, in enrich.Input) (*enrich.Result, enrich.Provenance, error) {
	rec, err := findStoredFor(ctx, db.Reader(), orgID, RecordKey(in.Lookup, in.Target))
	if err != nil || rec == nil {
		return nil, nil, err
	}
	res, err := rec.Result(in)
	if err != nil {
		return nil, nil, err
	}
	prov := enrich.Provenance{}
	if err := json.Unmarshal(storedProvenance(rec), &prov); err != nil {
		return nil, nil, fmt.Errorf("record %d: provenance: %w", rec.ID, err)
	}
	return &res, prov, nil
}

// storedProvenance is the provenance of a record as a task shows it: {} when the
// record has none.
func storedProvenance(rec *StoredRecord) json.RawMessage {
	if len(rec.Provenance) == 0 {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(rec.Provenance)
}

// privateOrigin is the origin of the keys of the records fetched with the organization
// orgID's own vendor keys, which are served to it alone; "" is the shared store's.
func privateOrigin(orgID string) string {
	if orgID == "" {
		return OriginStore
	}
	return OriginStore + ":" + orgID
}

// keysOrigin is the origin a record saved under origin keeps its keys under: that of
// owner's own records when it has one (privateOrigin), else origin itself.
func keysOrigin(origin, owner string) string {
	if owner != "" {
		return privateOrigin(owner)
	}
	return origin
}

// findStoredFor returns the record of the 30-day store that key names for a task of
// orgID: the organization's own when it has one, else the shared one. Both are read by
// the primary key of record_keys in one statement, walked in its order ('store:<org>'
// after 'store'), so that no sort is needed: ordering by age took a temporary B-tree,
// half again the time of a store hit on SQLite.
func findStoredFor(ctx context.Context, q Executor, orgID, key string) (*StoredRecord, error) {
	if orgID == "" {
		return findRecord(ctx, q, OriginStore, key)
	}
	return scanRecord(q.QueryRow(ctx, `SELECT r.id, r.object_type, r.data, r.last_enriched_at, k.redirect, r.provenance, r.subject_hash
		FROM record_keys k JOIN records r ON r.id = k.record_id
		WHERE k.origin IN (?, ?) AND k.key = ? ORDER BY k.origin DESC LIMIT 1`, OriginStore, privateOrigin(orgID), key))
}

// Held returns what email lookups read of the records held: the people addresses are
// on record for, stored companies, people by current employer, and what ambiguous
// lookups gathered.
func (db *DB) Held() enrich.Held { return held{db} }

type held struct{ d *DB }

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
func currentStaff(ctx context.Context, d *DB, origin string, e enrich.Employer, limit int) ([]enrich.HeldPerson, error) {
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
func (db *DB) Dataset() enrich.Source { return datasetSource{db} }

type datasetSource struct{ d *DB }

// The dataset answers staff searches too (SearchStaff).
var _ enrich.StaffSearcher = datasetSource{}

func (datasetSource) Name() string { return "dataset" }

func (s datasetSource) CompanyByDomain(ctx context.Context, _ *enrich.Tally, domain string) (*enrich.Company, error) {
	res, err := s.find(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: domain})
	return res.Company, err
}

func (s datasetSource) CompanyByURL(ctx context.Context, _ *enrich.Tally, networkURL string) (*enrich.Company, error) {
	res, err := s.find(ctx, enrich.Input{Lookup: enrich.LookupCompanyURL, Target: networkURL})
	return res.Company, err
}

func (s datasetSource) PersonByURL(ctx context.Context, _ *enrich.Tally, networkURL string) (*enrich.Person, error) {
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

// SearchStaff lists the imported people with a current position at the company whom
// the query may stand for (StaffQuery.MayBe): their own name forms are compared with
// the local part, so a joined address is found whatever list holds its names.
func (s datasetSource) SearchStaff(ctx context.Context, _ *enrich.Tally, q enrich.StaffQuery) ([]enrich.StaffMember, error) {
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
		if !q.MayBe(p) {
			continue
		}
		m := enrich.StaffMember{NetworkURL: *p.NetworkURL}
		if p.FullName != nil {
			m.FullName = *p.FullName
		}
		if p.FirstName != nil && p.LastName != nil {
			m.First, m.Last = *p.FirstName, *p.LastName
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

// FindRecord returns the record of origin that key names (see RecordKey), or nil.
func (db *DB) FindRecord(ctx context.Context, origin, key string) (*StoredRecord, error) {
	return findRecord(ctx, db.Reader(), origin, key)
}

const findRecordQuery = `SELECT r.id, r.object_type, r.data, r.last_enriched_at, k.redirect, r.provenance, r.subject_hash
	FROM record_keys k JOIN records r ON r.id = k.record_id
	WHERE k.origin = ? AND k.key = ?`

func findRecord(ctx context.Context, q Executor, origin, key string) (*StoredRecord, error) {
	return scanRecord(q.QueryRow(ctx, findRecordQuery, origin, key))
}

func scanRecord(row Row) (*StoredRecord, error) {
	var r StoredRecord
	var last int64
	var redirect *int64
	var provenance sql.NullString
	err := row.Scan(&r.ID, &r.ObjectType, &r.Data, &last, &redirect, &provenance, &r.SubjectHash)
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.LastEnriched, r.ConfirmedAlias = fromMS(last), redirect != nil && *redirect == 1
	if provenance.Valid {
		r.Provenance = []byte(provenance.String)
	}
	return &r, nil
}

// FindStaff returns up to limit records of origin, people, with a current position
// whose company's by is value: a shortlist, in no order. Each by is served by one
// index of positions; the name is compared whatever its case, as the engine's index
// folds it (Driver.FoldedEquals), and the shortlist is checked in Go either way.
func (db *DB) FindStaff(ctx context.Context, origin string, by StaffBy, value string, limit int) ([]StoredRecord, error) {
	var match string
	switch by {
	case StaffByNetworkURL:
		match = `p.company_network_url = ?`
	case StaffByDomain:
		match = `p.company_domain = ?`
	default:
		match = db.FoldedEquals(`p.company_name`)
	}
	rows, err := db.Reader().Query(ctx, `SELECT r.id, r.data, r.last_enriched_at FROM positions p JOIN records r ON r.id = p.record_id
		WHERE `+match+` AND p.is_current = 1 AND r.origin = ? AND r.org_id IS NULL LIMIT ?`, value, origin, limit)
	return collect(rows, err, func(row Row) (StoredRecord, error) {
		r := StoredRecord{ObjectType: enrich.ObjectPerson}
		var last int64
		err := row.Scan(&r.ID, &r.Data, &last)
		r.LastEnriched = fromMS(last)
		return r, err
	})
}

// HasRecords reports whether origin holds any record, by the first of its keys: the
// dashboard's getting started list asks it of the dataset.
func (db *DB) HasRecords(ctx context.Context, origin string) (bool, error) {
	var has bool
	err := db.Reader().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM record_keys WHERE origin = ?)`, origin).Scan(&has)
	return has, err
}

// saveRecord inserts or replaces the record named by identity and points keys (and
// identity) at it. A key that named another record moves to this one (a record left
// with no key is deleted), and a domain this company answered for that is no longer
// its canonical domain is kept as an alias, so looking it up answers with redirect.
// The keys are written in their sorted order: two transactions saving records that
// share keys then lock them in the same order (PostgreSQL), and the second waits for
// the first instead of deadlocking with it.
//
// provenance, the JSON object naming each field's source, is kept with the record for
// the store hits it answers; nil for an imported record. owner, when not "", is the
// organization the record is kept for alone (fetched with its own vendor key): the
// record carries it, and its keys are under privateOrigin.
func saveRecord(ctx context.Context, tx Tx, h *enrich.Subjects, origin, owner string, res enrich.Result, keys RecordKeys, identity string, provenance []byte, lastEnriched, now time.Time) error {
	held, err := findRecord(ctx, tx, keysOrigin(origin, owner), identity)
	if err != nil {
		return err
	}
	return saveRecordOver(ctx, tx, h, origin, owner, res, keys, identity, provenance, lastEnriched, now, held)
}

// saveRecordOver is saveRecord over held, the record identity names, read in this
// transaction (nil: none).
func saveRecordOver(ctx context.Context, tx Tx, h *enrich.Subjects, origin, owner string, res enrich.Result, keys RecordKeys, identity string, provenance []byte, lastEnriched, now time.Time, held *StoredRecord) error {
	subject := resultHash(h, res)
	keyOrigin := keysOrigin(origin, owner)
	var ownerCol any
	if owner != "" {
		ownerCol = owner
	}
	objectType := enrich.ObjectCompany
	var data any = res.Company
	if res.Person != nil {
		objectType, data = enrich.ObjectPerson, res.Person
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var id int64
	if held != nil && held.ObjectType == objectType {
		n, err := tx.Exec(ctx, `UPDATE records SET data = ?, last_enriched_at = ?, updated_at = ?, provenance = ?, subject_hash = ? WHERE id = ?`,
			string(raw), ms(lastEnriched), ms(now), nullText(provenance), subject, held.ID)
		if err != nil {
			return err
		}
		if n == 1 {
			id = held.ID
		}
		// else retention deleted the record since it was read (PostgreSQL's replicas):
		// it is written anew.
	}
	if id == 0 {
		if err := tx.QueryRow(ctx, `INSERT INTO records (origin, org_id, object_type, data, last_enriched_at, created_at, updated_at, provenance, subject_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, origin, ownerCol, objectType, string(raw), ms(lastEnriched), ms(now), ms(now), nullText(provenance), subject).Scan(&id); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(keys)+1)
	for key := range keys {
		names = append(names, key)
	}
	if _, ok := keys[identity]; !ok {
		names = append(names, identity) // with no redirect: keys[identity] is NULL
	}
	slices.Sort(names)
	for _, key := range names {
		own := keyHash(h, key, subject)
		previous, err := tx.PointRecordKey(ctx, keyOrigin, key, id, keys[key], own, answerColumn(own, subject))
		if err != nil {
			return err
		}
		if previous != 0 && previous != id {
			if _, err := tx.Exec(ctx, `DELETE FROM records WHERE id = ?
				AND NOT EXISTS (SELECT 1 FROM record_keys WHERE record_id = ?)`, previous, previous); err != nil {
				return err
			}
		}
	}
	if c := res.Company; c != nil {
		canonical := ""
		if c.Domain != nil {
			canonical = Key("domain", *c.Domain)
		}
		return tx.ExecLater(ctx, `UPDATE record_keys SET redirect = 0
			WHERE record_id = ? AND key LIKE 'domain:%' AND key <> ? AND redirect IS NULL`, id, canonical)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM positions WHERE record_id = ?`, id); err != nil {
		return err
	}
	for i, p := range res.Person.Positions {
		var domain *string
		if p.Company != nil {
			domain = p.Company.Domain
		}
		isCurrent := 0 // an INTEGER on both engines, so rows copy between them as they are
		if p.IsCurrent {
			isCurrent = 1
		}
		if _, err := tx.Exec(ctx, `INSERT INTO positions (record_id, ord, title, company_name, company_network_url, company_domain, is_current, subject_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, i, IndexedText(p.Title), IndexedText(p.CompanyName), IndexedText(p.CompanyNetworkURL), IndexedText(domain), isCurrent, subject); err != nil {
			return err
		}
	}
	return nil
}

// storeFetched saves what an enrichment of in fetched at fetchedAt into the 30-day
// store and returns the result as the task shows it: stamped as enriched then, with
// the redirect of the domain that was looked up. The record is saved under the target
// looked up when byTarget is set: a person found by email then has the address on
// record, and the next lookup of it is exact. owner, when not "", is the organization
// whose own vendor key fetched some field of the record: it is kept for that
// organization alone.
//
// asked is the record the result replaces as askHeldRecord read it in this
// transaction; nil reads it here.
func storeFetched(ctx context.Context, tx Tx, h *enrich.Subjects, in enrich.Input, res enrich.Result, byTarget bool, owner string, provenance []byte, fetchedAt, now time.Time, asked *heldRecord) (enrich.Result, error) {
	stored, shown, keys := FetchedRecord(in, res, byTarget, fetchedAt, now)
	identity := IdentityKey(stored, RecordKey(in.Lookup, in.Target))
	// A profile retrieved earlier (one gathered for an ambiguous address, settled
	// later by a hint) never replaces a newer record of the same subject. The record
	// read is the one saved over.
	origin := keysOrigin(OriginStore, owner)
	var held *StoredRecord
	if asked != nil && asked.origin == origin && asked.identity == identity {
		held = asked.rec
	} else {
		var err error
		if held, err = findRecord(ctx, tx, origin, identity); err != nil {
			return shown, err
		}
	}
	if held != nil && held.LastEnriched.After(fetchedAt) {
		return shown, nil
	}
	return shown, saveRecordOver(ctx, tx, h, OriginStore, owner, stored, keys, identity, provenance, fetchedAt, now, held)
}

// heldRecord is the record of origin that identity names, read by askHeldRecord.
type heldRecord struct {
	origin, identity string
	rec              *StoredRecord // nil: none
}

// askHeldRecord asks for the record that storeFetched, given the same arguments, would
// save the result over (Tx.QueryLater), there once Tx.Flush has returned.
func askHeldRecord(ctx context.Context, tx Tx, in enrich.Input, res enrich.Result, byTarget bool, owner string, fetchedAt, now time.Time) (*heldRecord, error) {
	stored, _, _ := FetchedRecord(in, res, byTarget, fetchedAt, now)
	held := &heldRecord{origin: keysOrigin(OriginStore, owner), identity: IdentityKey(stored, RecordKey(in.Lookup, in.Target))}
	err := tx.QueryLater(ctx, func(r Row) error {
		var err error
		held.rec, err = scanRecord(r)
		return err
	}, findRecordQuery, held.origin, held.identity)
	return held, err
}

// Import reads JSON Lines of companies and people into the dataset (ParseImport
// checks every line before anything is written) and writes the whole file in one
// transaction: a bad line, reported with its number, leaves the dataset untouched.
func (db *DB) Import(ctx context.Context, r io.Reader, norm enrich.Normalizer) (ImportStats, error) {
	h, err := db.hasher()
	if err != nil {
		return ImportStats{}, err
	}
	lines, stats, err := ParseImport(r, norm)
	if err != nil {
		return ImportStats{}, err
	}
	err = db.Write(ctx, func(tx Tx) error {
		now := db.now()
		for _, p := range lines {
			last := now
			if p.LastEnriched != nil {
				last = *p.LastEnriched
			}
			if err := saveRecord(ctx, tx, h, OriginDataset, "", p.Result, p.Keys, IdentityKey(p.Result, ""), nil, last, now); err != nil {
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
