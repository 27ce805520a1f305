package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"enrichd/enrich"
)

// An export of a person (GDPR Art. 15): everything an organization holds on them, as
// one document, read by a walk of the registry of personal data (FindSubject) for
// every identifier found for them, as an erasure finds them.

// PersonExport is everything an organization holds on one person. Its JSON is the
// PersonExport of the API. Each list holds the rows of one kind about the person, as
// the registry's export columns show them.
type PersonExport struct {
	ExportedAt time.Time `json:"exported_at"`
	// Asked is the identifier the export was asked for, normalized: {"email": ...} or
	// {"networkUrl": ...}.
	Asked map[string]string `json:"asked"`
	// Identifiers are every identifier found for the person: the one asked, the
	// profile an address was found to belong to, the addresses on record for it.
	Identifiers ExportIdentifiers `json:"identifiers"`
	// Suppressed says whether the organization may not enrich the person (one of the
	// identifiers, or an address's domain, is on its suppression list or the
	// installation's).
	Suppressed bool `json:"suppressed"`
	// Records are the stored and imported records about the person, each with the
	// keys it is looked up by and, per field, the source that gave it and when.
	Records []map[string]any `json:"records"`
	// Tasks are the organization's lookups about the person, each with how it was
	// made (via), the sources asked and the credits charged.
	Tasks []map[string]any `json:"tasks"`
	// Loops are the organization's Loops that were sent the person, and when.
	Loops []ExportLoop `json:"loops"`
	// Batches are the rows of the organization's uploads that held the person.
	Batches []map[string]any `json:"batches"`
	// Watches are the organization's watches of the person.
	Watches []map[string]any `json:"watches"`
	// EmailLookups are what ambiguous lookups of an address gathered: the address, the
	// company, the person's own profile when they were a candidate.
	EmailLookups []map[string]any `json:"email_lookups"`
	// Misses are the sources that were found not to know the person, and when.
	Misses       []map[string]any `json:"misses"`
	Suppressions []map[string]any `json:"suppressions"`
	Erasures     []map[string]any `json:"erasures"`
	// Audit are the organization's audit log's entries about the person: who looked
	// them up, exported or erased them, and when, oldest first.
	Audit []map[string]any `json:"audit"`
}

// ExportIdentifiers are a person's identifiers.
type ExportIdentifiers struct {
	Emails      []string `json:"emails"`
	NetworkURLs []string `json:"networkUrls"`
}

// ExportLoop is a Loop that was sent the person: the deliveries about them, and the
// HubSpot objects it wrote about them.
type ExportLoop struct {
	ID         string           `json:"id"`
	Name       *string          `json:"name"`
	Deliveries []map[string]any `json:"deliveries"`
	// HubSpot are the objects a HubSpot Loop wrote about the person, as enrichd keeps
	// them (until the Loop is deleted or the person erased, past the deliveries'
	// retention): empty for a webhook's.
	HubSpot []ExportCRMObject `json:"hubspot"`
}

// ExportCRMObject is a CRM object a Loop wrote about the person: where, and which of
// its properties enrichd wrote. enrichd keeps no value it wrote, only a keyed hash of
// each (to tell whether the value in the CRM is still its own), which no one can read
// back: Values says so, and the values are HubSpot's to show.
type ExportCRMObject struct {
	ObjectType        string    `json:"object_type"`
	ObjectID          string    `json:"object_id"`
	PropertiesWritten []string  `json:"properties_written"`
	Values            string    `json:"values"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// CRMValuesNotKept is an ExportCRMObject's Values.
const CRMValuesNotKept = "not kept: enrichd keeps only a keyed hash of each value it wrote, which tells whether the value in HubSpot is still the one it wrote and cannot be read back; the values are in HubSpot"

// How a task was made (PersonExport's tasks' via).
const (
	ViaRequest = "request" // an API call, the dashboard's Try it or an MCP tool
	ViaLoop    = "loop"    // a Loop's run, or a call naming a Loop
	ViaBatch   = "batch"   // a batch's row
	ViaWatch   = "watch"   // a watch's check
)

// ExportPerson reads everything the organization orgID holds on the person subject
// names (an address or a profile URL, normalized), every organization's with
// allOrgs, in one transaction: a write one, at whose end an audit entry of the export
// is written, so that no export is read without one.
func (db *DB) ExportPerson(ctx context.Context, by By, orgID string, allOrgs bool, subject enrich.Subject) (*PersonExport, error) {
	h, err := db.hasher()
	if err != nil {
		return nil, err
	}
	if err := CheckNewErasure(NewErasure{OrgID: orgID, AllOrgs: allOrgs, Subject: subject, By: AddedBy{Kind: AddedByCLI}}); err != nil {
		return nil, err
	}
	var out *PersonExport
	err = db.Write(ctx, func(tx Tx) error {
		var err error
		if out, err = db.exportPerson(ctx, tx, h, orgID, allOrgs, subject); err != nil {
			return err
		}
		value, hash := subject.Value, h.Hash(subject)
		return db.appendAudit(ctx, tx, by, NewAuditEntry{OrgID: orgID, Action: AuditPersonExported, Subject: &value,
			SubjectHash: hash[:], Detail: map[string]any{"kind": string(subject.Kind), "all_orgs": allOrgs}})
	})
	return out, err
}

func (db *DB) exportPerson(ctx context.Context, tx Tx, h *enrich.Subjects, orgID string, allOrgs bool, subject enrich.Subject) (*PersonExport, error) {
	ne := NewErasure{OrgID: orgID, AllOrgs: allOrgs, Subject: subject}
	who, err := personIdentifiers(ctx, tx, h, ne)
	if err != nil {
		return nil, err
	}
	x := &PersonExport{ExportedAt: db.now(), Asked: map[string]string{}, Identifiers: ExportIdentifiers{Emails: []string{}, NetworkURLs: []string{}},
		Records: []map[string]any{}, Tasks: []map[string]any{}, Loops: []ExportLoop{}, Batches: []map[string]any{},
		Watches: []map[string]any{}, EmailLookups: []map[string]any{}, Misses: []map[string]any{},
		Suppressions: []map[string]any{}, Erasures: []map[string]any{}, Audit: []map[string]any{}}
	if subject.Kind == enrich.SubjectEmail {
		x.Asked["email"] = subject.Value
	} else {
		x.Asked["networkUrl"] = subject.Value
	}
	var hashes []enrich.SubjectHash
	var checked [][]byte
	for _, sub := range who {
		hash := h.Hash(sub)
		hashes = append(hashes, hash)
		checked = append(checked, hash[:])
		switch sub.Kind {
		case enrich.SubjectEmail:
			x.Identifiers.Emails = append(x.Identifiers.Emails, sub.Value)
			if at := strings.LastIndexByte(sub.Value, '@'); at >= 0 {
				domain := h.Hash(enrich.Subject{Kind: enrich.SubjectDomain, Value: sub.Value[at+1:]})
				checked = append(checked, domain[:])
			}
		case enrich.SubjectProfile:
			x.Identifiers.NetworkURLs = append(x.Identifiers.NetworkURLs, sub.Value)
		}
	}
	found, err := findSubject(ctx, tx, orgID, allOrgs, hashes)
	if err != nil {
		return nil, err
	}
	rows := map[string][]map[string]any{}
	for _, f := range found {
		rows[f.Table] = f.Rows
	}

	keys := map[string][]any{}
	for _, k := range rows["record_keys"] {
		id := fmt.Sprint(k["record_id"])
		keys[id] = append(keys[id], k["key"])
	}
	for _, r := range rows["records"] {
		id := fmt.Sprint(r["id"])
		r["keys"] = keys[id]
		delete(keys, id)
		r["provenance"] = provenanceWithTime(r["provenance"], r["last_enriched_at"])
		x.Records = append(x.Records, r)
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range keys {
			if !yield(id) {
				return
			}
		}
	}) {
		x.Records = append(x.Records, map[string]any{"id": id, "keys": keys[id]}) // a key whose record is about someone else
	}

	batchOf := map[string]map[string]any{}
	for _, b := range rows["batch_rows"] {
		if id, ok := b["task_id"].(string); ok {
			batchOf[id] = b
		}
		var columns []string
		var vals []string
		if json.Unmarshal(rawOf(b["columns"]), &columns) == nil && json.Unmarshal(rawOf(b["vals"]), &vals) == nil {
			values := map[string]string{}
			for i, c := range columns {
				if i < len(vals) {
					values[c] = vals[i]
				}
			}
			b["values"] = values
			delete(b, "vals")
		}
		delete(b, "columns")
		x.Batches = append(x.Batches, b)
	}
	for _, t := range rows["tasks"] {
		via := ViaRequest
		switch {
		case batchOf[fmt.Sprint(t["id"])] != nil:
			via = ViaBatch
			t["batch_id"] = batchOf[fmt.Sprint(t["id"])]["batch_id"]
		case t["watch_id"] != nil:
			via = ViaWatch
		case t["loop_id"] != nil:
			via = ViaLoop
		}
		t["via"] = via
		x.Tasks = append(x.Tasks, t)
	}
	slices.SortFunc(x.Tasks, func(a, b map[string]any) int { return strings.Compare(fmt.Sprint(a["id"]), fmt.Sprint(b["id"])) })

	byLoop := map[string]*ExportLoop{}
	loopOf := func(row map[string]any) *ExportLoop {
		id := fmt.Sprint(row["loop_id"])
		l := byLoop[id]
		if l == nil {
			l = &ExportLoop{ID: id, Deliveries: []map[string]any{}, HubSpot: []ExportCRMObject{}}
			if name, ok := row["loop_name"].(string); ok {
				l.Name = &name
			}
			byLoop[id] = l
		}
		return l
	}
	for _, d := range rows["deliveries"] {
		l := loopOf(d)
		delete(d, "loop_id")
		delete(d, "loop_name")
		l.Deliveries = append(l.Deliveries, d)
	}
	for _, w := range rows["hubspot_writes"] {
		o := ExportCRMObject{PropertiesWritten: []string{}, Values: CRMValuesNotKept}
		o.ObjectType, _ = w["object_type"].(string)
		o.ObjectID, _ = w["object_id"].(string)
		o.UpdatedAt, _ = w["updated_at"].(time.Time)
		var written map[string]string
		if err := json.Unmarshal(rawOf(w["written"]), &written); err != nil {
			return nil, fmt.Errorf("reading what Loop %v wrote into HubSpot: %w", w["loop_id"], err)
		}
		for p := range written {
			o.PropertiesWritten = append(o.PropertiesWritten, p)
		}
		slices.Sort(o.PropertiesWritten)
		l := loopOf(w)
		l.HubSpot = append(l.HubSpot, o)
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range byLoop {
			if !yield(id) {
				return
			}
		}
	}) {
		x.Loops = append(x.Loops, *byLoop[id])
	}

	x.Watches = append(x.Watches, rows["watches"]...)
	for _, g := range rows["email_gatherings"] {
		var candidates []map[string]any
		for _, c := range rows["email_candidates"] {
			if c["address"] == g["address"] {
				candidates = append(candidates, c)
			}
		}
		g["candidates"] = candidates
		x.EmailLookups = append(x.EmailLookups, g)
	}
	for _, c := range rows["email_candidates"] {
		if !slices.ContainsFunc(rows["email_gatherings"], func(g map[string]any) bool { return g["address"] == c["address"] }) {
			x.EmailLookups = append(x.EmailLookups, c) // a candidate for someone else's address: their own profile
		}
	}
	x.Misses = append(x.Misses, rows["source_misses"]...)
	x.Suppressions = append(x.Suppressions, rows["suppressions"]...)
	x.Erasures = append(x.Erasures, rows["erasures"]...)
	x.Audit = append(x.Audit, rows["audit_log"]...)
	slices.SortFunc(x.Audit, func(a, b map[string]any) int {
		ta, _ := a["at"].(time.Time)
		tb, _ := b["at"].(time.Time)
		if c := ta.Compare(tb); c != 0 {
			return c
		}
		sa, _ := toInt64(a["seq"])
		sb, _ := toInt64(b["seq"])
		return cmp.Compare(sa, sb)
	})
	// Who made each task: its entry's actor (a task made before the audit log was kept
	// has none).
	by := map[any]map[string]any{}
	for _, e := range x.Audit {
		if e["action"] == AuditTaskCreated && e["task_id"] != nil {
			by[e["task_id"]] = map[string]any{"kind": e["actor_kind"], "id": e["actor_id"], "name": e["actor_name"]}
		}
	}
	for _, t := range x.Tasks {
		if b, ok := by[t["id"]]; ok {
			t["by"] = b
		} else {
			t["by"] = nil
		}
	}
	if allOrgs {
		x.Suppressed = len(x.Suppressions) > 0
	} else if x.Suppressed, err = db.suppressedHashes(ctx, tx, orgID, checked...); err != nil {
		return nil, err
	}
	return x, nil
}

// provenanceWithTime is a record's provenance ({field: source}) as an export shows
// it: {field: {source, at}}, at the time the record was last given by its sources
// (a record is stored whole, every field from the same fetch).
func provenanceWithTime(provenance, at any) any {
	var byField map[string]string
	if json.Unmarshal(rawOf(provenance), &byField) != nil {
		return provenance
	}
	out := make(map[string]any, len(byField))
	for field, source := range byField {
		out[field] = map[string]any{"source": source, "at": at}
	}
	return out
}

// rawOf is an exported JSON value as its text.
func rawOf(v any) []byte {
	switch x := v.(type) {
	case json.RawMessage:
		return x
	case string:
		return []byte(x)
	}
	return nil
}
