package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"enrichd/enrich"
)

// The registry of personal data: every table that holds a person's data, how its rows
// are found by subject (the keyed hashes of subjects.go), what an export shows of them,
// and what an erasure does to them. Export and erasure walk it and nothing else knows
// the list; the conformance suite fails when a table or a column of the schema is in
// neither the registry nor NonPersonalTables, so a new one must be placed before it
// ships.

// RowScope says whose a table's rows are.
type RowScope string

const (
	// OrgRows belong to one organization: its tasks, deliveries, batches, watches.
	OrgRows RowScope = "organization"
	// SharedRows serve every organization (the store of records fetched with the
	// installation's keys, what email lookups gathered, the sources' misses), beside
	// the rows kept for one organization alone where the table has those too.
	SharedRows RowScope = "shared"
)

// EraseAction is what an erasure does to a row found about the person.
type EraseAction string

const (
	EraseDelete EraseAction = "delete" // the row goes
	EraseRedact EraseAction = "redact" // the row stays, its personal columns replaced
	EraseKeep   EraseAction = "keep"   // the row stays as it is: it holds hashes alone
)

// EraseRule is what an erasure does to a table's rows, and why.
type EraseRule struct {
	Action EraseAction
	// Redacts are the columns an EraseRedact replaces (with NULL, or a fixed marker
	// where the column cannot be NULL).
	Redacts []string
	Why     string
}

// Erasing is one erasure under way, handed to each table's Erase in the registry's
// order: whom (the hashes of every identifier found for the person), for whom (one
// organization's rows and the shared ones; AllOrgs, every organization's), and what it
// has done so far.
type Erasing struct {
	ID      string // the erasure's
	OrgID   string
	AllOrgs bool
	Hashes  []enrich.SubjectHash
	Now     time.Time
	// Removed counts the rows deleted or redacted, by table. An Erase may count rows
	// of another table that go with its own (a gathering with its candidates).
	Removed map[string]int64
	// AuditChains are the organizations whose audit entries about the person were
	// blanked: the erasure records itself in each, after them, so that each chain
	// shows why its entries lost their subject.
	AuditChains []string
}

// EraseFunc erases, in tx, the rows of p about the person that Find finds for the
// erasure e, as p.Erasure says, and counts them in e.Removed.
type EraseFunc func(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error

// PersonalTable is one table of the registry.
type PersonalTable struct {
	Name string
	// Key are the columns that name a row; Holds those that hold the person's data;
	// Hashes the subject hash columns, each the first column of an index; Other the
	// rest. Together they are every column of the table.
	Key, Holds, Hashes, Other []string
	Scope                     RowScope
	Erasure                   EraseRule
	// Erase is the erasure of the table's rows (see Erase).
	Erase EraseFunc

	// from is the FROM clause, the table as t, joined to what decides whose a row is;
	// orgScope the condition that keeps the rows of one organization (and the shared
	// ones), with the arguments orgScopeArgs makes of the organization's id.
	from         string
	orgScope     string
	orgScopeArgs func(orgID string) []any
	export       []exportColumn
}

// exportColumn is one value an export shows of a row: expr, read as kind, shown under
// name; when onlyBy names a hash column, only in a row found by it (a candidate's
// profile, shown to the export of that candidate, not to the address's).
type exportColumn struct {
	name, expr string
	kind       exportKind
	onlyBy     string
}

type exportKind int

const (
	exportText exportKind = iota
	exportJSON            // JSON text, shown as the value it holds
	exportTime            // milliseconds, shown as a UTC time
	exportInt
	exportBool // 0 or 1 (SQLite), a boolean (PostgreSQL)
)

func text(name string) exportColumn {
	return exportColumn{name: name, expr: "t." + name, kind: exportText}
}
func jsonCol(name string) exportColumn {
	return exportColumn{name: name, expr: "t." + name, kind: exportJSON}
}
func timeCol(name string) exportColumn {
	return exportColumn{name: name, expr: "t." + name, kind: exportTime}
}
func intCol(name string) exportColumn {
	return exportColumn{name: name, expr: "t." + name, kind: exportInt}
}
func orgArg(orgID string) []any           { return []any{orgID} }
func orgArgTwice(orgID string) []any      { return []any{orgID, orgID} }
func privateOriginArg(orgID string) []any { return []any{privateOrigin(orgID)} }

// personalTables is the registry. Each entry's find reads its rows by the hash
// columns' indexes. An erasure walks it in this order, which puts a table before the
// tables its rows depend on (a task before the result it shows, a record's keys and
// positions before the record, a gathering's candidates before it), and the tasks
// first, as every transaction that writes them takes them first (CreateTask).
var personalTables = []PersonalTable{
	{
		Name: "tasks", Key: []string{"id"},
		// A client may key its requests by the address it asks about: the key is held
		// as the person's data.
		Holds:  []string{"input", "target", "result_id", "error", "provenance", "sources", "idempotency_key"},
		Hashes: []string{"subject_hash", "answer_hash"},
		Other: []string{"org_id", "object_type", "status", "lookup", "credits_charged", "loop_id",
			"created_at", "queued_at", "started_at", "finished_at", "expires_at", "lease_token", "lease_until", "attempts", "watch_id",
			"erased_at"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseRedact, Redacts: []string{"input", "target", "result_id", "error", "provenance", "sources", "idempotency_key"},
			Why: "the task stays, with its status and its charge, so that the ledger adds up; its input, target and result go, " +
				"its error keeps its code only, its idempotency key goes, and one not settled yet is canceled and refunded"},
		Erase: eraseTasks,
		from:  "tasks t", orgScope: "t.org_id = ?", orgScopeArgs: orgArg,
		export: []exportColumn{timeCol("created_at"), text("object_type"), text("lookup"), text("status"), text("target"), jsonCol("input"),
			intCol("credits_charged"), text("loop_id"), text("watch_id"), text("idempotency_key"), timeCol("finished_at"),
			{name: "data", expr: resultColumnOf("t"), kind: exportJSON}, jsonCol("error"), jsonCol("provenance"), jsonCol("sources"),
			timeCol("erased_at")},
	},
	{
		Name: "task_results", Key: []string{"id"},
		Holds: []string{"data"}, Hashes: []string{"subject_hash"}, Other: []string{"hash", "refs"},
		Scope: SharedRows,
		Erasure: EraseRule{Action: EraseDelete,
			Why: "a result is kept once for every task that has the same one; it goes once no task shows it"},
		Erase: eraseTaskResults,
		from:  "task_results t",
		// A result is the organization's when one of its tasks about the subject shows it.
		orgScope: `(EXISTS (SELECT 1 FROM tasks o WHERE o.subject_hash = t.subject_hash AND o.result_id = t.id AND o.org_id = ?)
			OR EXISTS (SELECT 1 FROM tasks o WHERE o.answer_hash = t.subject_hash AND o.result_id = t.id AND o.org_id = ?))`,
		orgScopeArgs: orgArgTwice,
		export:       []exportColumn{jsonCol("data")},
	},
	{
		Name: "record_keys", Key: []string{"origin", "key"},
		Holds: []string{"key"}, Hashes: []string{"subject_hash", "answer_hash"}, Other: []string{"origin", "record_id", "redirect"},
		Scope:   SharedRows,
		Erasure: EraseRule{Action: EraseDelete, Why: "the ways the record was looked up (an address, a profile) go with it"},
		Erase:   deleteFound,
		// A key is found by its own identifier, or by the subject of its record.
		from: "record_keys t", orgScope: "(t.origin NOT LIKE 'store:%' OR t.origin = ?)", orgScopeArgs: privateOriginArg,
		export: []exportColumn{text("key"), intCol("record_id")},
	},
	{
		Name: "positions", Key: []string{"record_id", "ord"},
		Holds:  []string{"title", "company_name", "company_network_url", "company_domain", "is_current"},
		Hashes: []string{"subject_hash"}, Other: []string{},
		Scope:   SharedRows,
		Erasure: EraseRule{Action: EraseDelete, Why: "a person's positions go with their record"},
		Erase:   deleteFound,
		from:    "positions t JOIN records r ON r.id = t.record_id", orgScope: "(r.org_id IS NULL OR r.org_id = ?)", orgScopeArgs: orgArg,
		export: []exportColumn{text("title"), text("company_name"), text("company_network_url"), text("company_domain"), intCol("is_current")},
	},
	{
		Name: "records", Key: []string{"id"},
		Holds: []string{"data", "provenance"}, Hashes: []string{"subject_hash"},
		Other: []string{"origin", "object_type", "last_enriched_at", "created_at", "updated_at", "org_id"},
		Scope: SharedRows,
		Erasure: EraseRule{Action: EraseDelete,
			Why: "the stored or imported record goes, its keys and positions with it, shared or not: any organization's next " +
				"lookup would fetch it again, and the erasure suppresses the person"},
		Erase: deleteFound,
		from:  "records t", orgScope: "(t.org_id IS NULL OR t.org_id = ?)", orgScopeArgs: orgArg,
		export: []exportColumn{text("origin"), text("object_type"), jsonCol("data"), jsonCol("provenance"),
			timeCol("last_enriched_at"), timeCol("created_at"), timeCol("updated_at"), {name: "shared", expr: "t.org_id IS NULL", kind: exportBool}},
	},
	{
		Name: "deliveries", Key: []string{"id"},
		Holds: []string{"payload", "last_error", "summary"}, Hashes: []string{"subject_hash", "answer_hash"},
		Other: []string{"loop_id", "org_id", "event", "task_id", "status", "attempts", "next_attempt_at", "lease_until",
			"last_attempt_at", "last_status_code", "created_at", "erasure_id"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseRedact, Redacts: []string{"payload", "last_error", "summary"},
			Why: "a delivery still pending is deleted, never sent; one sent stays in the Loop's history without its payload, " +
				"naming the erasure; the person.erased events of an erasure are left to be sent, and keep only the erasure's id once they are"},
		Erase: eraseDeliveries,
		from:  "deliveries t", orgScope: "t.org_id = ?", orgScopeArgs: orgArg,
		export: []exportColumn{text("loop_id"), {name: "loop_name", expr: "(SELECT name FROM loops WHERE loops.id = t.loop_id)", kind: exportText},
			text("event"), text("task_id"), text("status"), intCol("attempts"), timeCol("created_at"), timeCol("last_attempt_at"),
			text("erasure_id"), text("summary"), jsonCol("payload")},
	},
	{
		Name: "hubspot_writes", Key: []string{"loop_id", "subject_hash"},
		Holds: []string{"object_id", "written"}, Hashes: []string{"subject_hash"},
		Other: []string{"org_id", "object_type", "updated_at"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseDelete,
			Why: "which HubSpot object a Loop wrote about the person, and what it wrote (by keyed hashes), goes: the Loop " +
				"finds the contact by its address again if the person is ever sent again; the contact in HubSpot is the " +
				"organization's, deleted only by a Loop that says so (gdpr_delete), through its person.erased event"},
		Erase: deleteFound,
		from:  "hubspot_writes t", orgScope: "t.org_id = ?", orgScopeArgs: orgArg,
		export: []exportColumn{text("loop_id"), {name: "loop_name", expr: "(SELECT name FROM loops WHERE loops.id = t.loop_id)", kind: exportText},
			text("object_type"), text("object_id"), jsonCol("written"), timeCol("updated_at")},
	},
	{
		Name: "email_candidates", Key: []string{"address", "ord"},
		Holds: []string{"address", "person", "pattern"}, Hashes: []string{"subject_hash", "answer_hash"},
		Other: []string{"method", "retrieved_at"},
		Scope: SharedRows,
		Erasure: EraseRule{Action: EraseDelete,
			Why: "a profile gathered for an address goes, whoever's address it was, and with it everything gathered for that address: " +
				"a retry with a hint would otherwise pick among the others"},
		Erase: eraseCandidates,
		from:  "email_candidates t",
		// A row is found by the address asked or by the candidate's profile: the
		// candidate's profile is someone else's data in an export of the address.
		export: []exportColumn{text("address"), text("method"), text("pattern"), timeCol("retrieved_at"),
			{name: "person", expr: "t.person", kind: exportJSON, onlyBy: "answer_hash"}},
	},
	{
		Name: "email_gatherings", Key: []string{"address"},
		Holds: []string{"address"}, Hashes: []string{"subject_hash"}, Other: []string{"company", "gathered_at"},
		Scope:   SharedRows,
		Erasure: EraseRule{Action: EraseDelete, Why: "what an ambiguous lookup of the address gathered goes, its candidates with it"},
		Erase:   deleteFound,
		from:    "email_gatherings t",
		export:  []exportColumn{text("address"), jsonCol("company"), timeCol("gathered_at")},
	},
	{
		Name: "batch_rows", Key: []string{"batch_id", "row_number"},
		Holds: []string{"vals", "request", "error", "company_request", "company_error"}, Hashes: []string{"subject_hash"},
		Other: []string{"task_id", "kind", "line", "skipped", "company_task_id"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseRedact, Redacts: []string{"vals", "request", "error", "company_request", "company_error"},
			Why: "the row stays, so that the batch keeps its numbering and counts; the values uploaded go, each shown as the marker, " +
				"and a row still waiting for its task gets none"},
		Erase: eraseBatchRows,
		from:  "batch_rows t JOIN batches b ON b.id = t.batch_id", orgScope: "b.org_id = ?", orgScopeArgs: orgArg,
		export: []exportColumn{{name: "batch_name", expr: "b.name", kind: exportText},
			{name: "batch_created_at", expr: "b.created_at", kind: exportTime}, {name: "columns", expr: "b.columns", kind: exportJSON}, jsonCol("vals"), jsonCol("request"), text("task_id"), jsonCol("error")},
	},
	{
		Name: "source_misses", Key: []string{"subject", "source", "org_id"},
		Holds: []string{"subject"}, Hashes: []string{"subject_hash"}, Other: []string{"source", "org_id", "missed_at"},
		Scope:   SharedRows,
		Erasure: EraseRule{Action: EraseDelete, Why: "that a source did not know the subject is forgotten"},
		Erase:   deleteFound,
		from:    "source_misses t", orgScope: "t.org_id IN ('', ?)", orgScopeArgs: orgArg,
		export: []exportColumn{text("subject"), text("source"), timeCol("missed_at")},
	},
	{
		Name: "watches", Key: []string{"id"},
		Holds: []string{"target", "input", "baseline"}, Hashes: []string{"subject_hash", "answer_hash"},
		Other: []string{"org_id", "object_type", "lookup", "loop_id", "every_days", "fields", "notify_unchanged", "enabled",
			"paused_reason", "not_found_streak", "next_run_at", "claimed_due_at", "last_run_at", "last_task_id", "created_at", "updated_at"},
		Scope:   OrgRows,
		Erasure: EraseRule{Action: EraseDelete, Why: "a watch of the person goes: they are not checked again"},
		Erase:   deleteFound,
		from:    "watches t", orgScope: "t.org_id = ?", orgScopeArgs: orgArg,
		export: []exportColumn{text("object_type"), text("target"), jsonCol("input"), text("loop_id"), intCol("every_days"),
			text("paused_reason"), timeCol("last_run_at"), jsonCol("baseline"), timeCol("created_at")},
	},
	{
		Name: "suppressions", Key: []string{"id"},
		Holds: []string{"hint", "reason"}, Hashes: []string{"hash"},
		Other: []string{"org_id", "kind", "added_by_kind", "added_by_id", "added_by_name", "created_at"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseKeep,
			Why: "an erasure suppresses the person, so that nothing fetches them again; the entry holds a keyed hash and a masked hint"},
		Erase: keepRows,
		from:  "suppressions t", orgScope: "t.org_id IN (?, '')", orgScopeArgs: orgArg,
		export: []exportColumn{text("kind"), text("hint"), text("reason"), text("added_by_kind"), text("added_by_name"), timeCol("created_at"),
			{name: "all_orgs", expr: "t.org_id = ''", kind: exportBool}},
	},
	{
		Name: "erasures", Key: []string{"id"},
		Holds: []string{"hint", "hints"}, Hashes: []string{"hash"},
		Other: []string{"org_id", "kind", "requested_by_kind", "requested_by_id", "requested_by_name", "removed", "loops",
			"created_at", "completed_at"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseKeep,
			Why: "the record that the person was erased, and when: a keyed hash and masked hints, never the identifiers"},
		Erase: keepRows,
		// The installation's erasures are shown without what they removed, which counts
		// every organization's rows.
		from: "erasures t", orgScope: "t.org_id IN (?, '')", orgScopeArgs: orgArg,
		export: []exportColumn{text("kind"), text("hint"), jsonCol("hints"), text("requested_by_kind"), text("requested_by_name"),
			timeCol("created_at"), timeCol("completed_at"), {name: "all_orgs", expr: "t.org_id = ''", kind: exportBool}},
	},
	{
		Name: "audit_log", Key: []string{"org_id", "at", "seq"},
		Holds: []string{"subject"}, Hashes: []string{"subject_hash"},
		Other: []string{"actor_kind", "actor_id", "actor_name", "action", "subject_seal", "task_id", "batch_id", "object_id",
			"credits", "request_id", "detail", "prev_hash", "hash"},
		Scope: OrgRows,
		Erasure: EraseRule{Action: EraseRedact, Redacts: []string{"subject"},
			Why: "the entry stays, named by the subject's keyed hash, so that the record of who looked the person up and its hash chain stay whole; " +
				"the subject as sent goes, and the erasure's own entry follows in each chain it blanked"},
		Erase: eraseAudit,
		from:  "audit_log t", orgScope: "t.org_id = ?", orgScopeArgs: orgArg,
		export: []exportColumn{timeCol("at"), text("action"), text("actor_kind"), text("actor_id"), text("actor_name"), text("subject"),
			text("task_id"), text("batch_id"), text("object_id"), intCol("credits"), text("request_id")},
	},
}

// resultColumnOf is resultColumn for the tasks aliased alias.
func resultColumnOf(alias string) string {
	return `(SELECT data FROM task_results WHERE task_results.id = ` + alias + `.result_id)`
}

// NonPersonalTables are the tables that hold no data about the people and companies
// looked up, and why: the conformance suite holds every table of the schema to be
// here or in the registry.
var NonPersonalTables = map[string]string{
	"schema_migrations": "the migrations applied",
	"orgs":              "the organizations using the installation",
	"queue_turns":       "the queue's order of organizations",
	"api_keys":          "API keys, by hash and prefix",
	"credit_grants":     "credits granted",
	"credit_ledger":     "credits charged and refunded, by task id",
	"credit_days":       "the ledger summed by day",
	"task_counts":       "tasks counted by status",
	"idempotency_keys": "the client's keys, bound to a hash of the request (the CLI's are hashes too); " +
		"a client that puts a person's address in its keys puts it here",
	"loops":           "destinations (webhooks, HubSpot) and their secrets and sealed tokens",
	"users":           "the dashboard's own users (managed with enrichd users), not people looked up",
	"user_links":      "set-password links, by hash",
	"sessions":        "dashboard sessions, by hash",
	"install_links":   "the first-start link, by hash",
	"batches":         "an upload's name, header and counts; its rows are batch_rows",
	"fill_lists":      "the fields an organization asks the sources to fill",
	"source_spend":    "what the sources cost, by day",
	"source_asks":     "the asks of priced sources under way: organization, source, price; never whom they ask about",
	"source_budgets":  "monthly budgets of the sources",
	"org_source_keys": "organizations' own vendor keys, sealed",
	"replicas":        "PostgreSQL replicas' heartbeats",
	"subject_key":     "the id of the key subjects are hashed under, not the key",
	"audit_heads":     "the head of each organization's audit chain and the checkpoint retention left: places and hashes",
}

// PersonalTables is the registry, in the order export shows it.
func PersonalTables() []PersonalTable { return slices.Clone(personalTables) }

// PersonalTableByName is the registry's entry for a table.
func PersonalTableByName(name string) (PersonalTable, bool) {
	for _, t := range personalTables {
		if t.Name == name {
			return t, true
		}
	}
	return PersonalTable{}, false
}

// Columns are every column of the table, as the registry classes them.
func (p PersonalTable) Columns() []string {
	all := slices.Concat(p.Key, p.Holds, p.Hashes, p.Other)
	slices.Sort(all)
	return slices.Compact(all)
}

// FindQuery is the statement that finds the table's rows about the subjects of hashes
// for one organization (allOrgs: for every organization), and its arguments: it
// selects the key columns, then the exported ones. Each hash column is matched
// through its index.
func (p PersonalTable) FindQuery(hashes []enrich.SubjectHash, orgID string, allOrgs bool) (string, []any) {
	list, listArgs := hashList(hashes)
	var args []any
	cols := make([]string, 0, len(p.Key)+len(p.export))
	for _, k := range p.Key {
		cols = append(cols, "t."+k)
	}
	for _, e := range p.export {
		if e.onlyBy != "" {
			cols = append(cols, "CASE WHEN t."+e.onlyBy+" IN "+list+" THEN "+e.expr+" END")
			args = append(args, listArgs...)
			continue
		}
		cols = append(cols, e.expr)
	}
	where, whereArgs := p.where(hashes, orgID, allOrgs)
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + p.from + " WHERE " + where, append(args, whereArgs...)
}

// where is the condition, on p.from, of the table's rows about any of hashes that the
// organization orgID holds (allOrgs: every organization's), and its arguments: each
// hash column matched through its index.
func (p PersonalTable) where(hashes []enrich.SubjectHash, orgID string, allOrgs bool) (string, []any) {
	list, listArgs := hashList(hashes)
	var match []string
	var args []any
	for _, h := range p.Hashes {
		match = append(match, "t."+h+" IN "+list)
		args = append(args, listArgs...)
	}
	where := "(" + strings.Join(match, " OR ") + ")"
	if p.orgScope != "" && !allOrgs {
		where += " AND " + p.orgScope
		args = append(args, p.orgScopeArgs(orgID)...)
	}
	return where, args
}

// hashList is a list of one parameter a hash, (?, ?, ...), and its arguments.
func hashList(hashes []enrich.SubjectHash) (string, []any) {
	args := make([]any, len(hashes))
	for i, h := range hashes {
		args[i] = h[:]
	}
	return "(?" + strings.Repeat(", ?", len(hashes)-1) + ")", args
}

// SubjectQueries are the registry's statements, by table, finding the rows about two
// hashes of one organization, and (with " (all)") of every organization: each driver's
// tests check that none reads a whole table.
func SubjectQueries() map[string]struct {
	Query string
	Args  []any
} {
	out := map[string]struct {
		Query string
		Args  []any
	}{}
	hashes := []enrich.SubjectHash{{1}, {2}}
	for _, p := range personalTables {
		q, args := p.FindQuery(hashes, "o", false)
		out[p.Name] = struct {
			Query string
			Args  []any
		}{q, args}
		q, args = p.FindQuery(hashes, "", true)
		out[p.Name+" (all)"] = struct {
			Query string
			Args  []any
		}{q, args}
	}
	return out
}

// SubjectRows are the rows of one table about a subject: each its key and what an
// export shows of it, by column.
type SubjectRows struct {
	Table string           `json:"table"`
	Rows  []map[string]any `json:"rows"`
}

// FindSubject finds, table by table of the registry, the rows about the subjects of
// hashes (the keyed hashes of one person's or company's identifiers) that the
// organization orgID holds, shared rows included; allOrgs finds every
// organization's. Tables without such a row are left out. Each row is its key and what
// an export shows of it: what an export of the person is made of, and where an
// erasure goes.
func (db *DB) FindSubject(ctx context.Context, orgID string, allOrgs bool, hashes []enrich.SubjectHash) ([]SubjectRows, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	var out []SubjectRows
	err := db.Read(ctx, func(q Executor) error {
		var err error
		out, err = findSubject(ctx, q, orgID, allOrgs, hashes)
		return err
	})
	return out, err
}

// findSubject is FindSubject on q.
func findSubject(ctx context.Context, q Executor, orgID string, allOrgs bool, hashes []enrich.SubjectHash) ([]SubjectRows, error) {
	var out []SubjectRows
	for _, p := range personalTables {
		rows, err := p.Find(ctx, q, orgID, allOrgs, hashes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		if len(rows) > 0 {
			out = append(out, SubjectRows{Table: p.Name, Rows: rows})
		}
	}
	return out, nil
}

// Find reads, on q (a transaction, or the reader), the table's rows about any of
// hashes that the organization orgID holds, shared rows included (allOrgs: every
// organization's), each as its key columns and what an export shows of it.
func (p PersonalTable) Find(ctx context.Context, q Executor, orgID string, allOrgs bool, hashes []enrich.SubjectHash) ([]map[string]any, error) {
	query, args := p.FindQuery(hashes, orgID, allOrgs)
	rows, err := q.Query(ctx, query, args...)
	return collect(rows, err, func(r Row) (map[string]any, error) {
		vals := make([]any, len(p.Key)+len(p.export))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make(map[string]any, len(vals))
		for i, k := range p.Key {
			row[k] = exportValue(vals[i], exportText)
		}
		for i, e := range p.export {
			row[e.name] = exportValue(vals[len(p.Key)+i], e.kind)
		}
		return row, nil
	})
}

// exportValue is a column's value as an export shows it.
func exportValue(v any, kind exportKind) any {
	if v == nil {
		return nil
	}
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	switch kind {
	case exportJSON:
		if s, ok := v.(string); ok && json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
	case exportTime:
		if n, ok := toInt64(v); ok {
			return fromMS(n)
		}
	case exportInt:
		if n, ok := toInt64(v); ok {
			return n
		}
	case exportBool:
		if b, ok := v.(bool); ok {
			return b
		}
		if n, ok := toInt64(v); ok {
			return n != 0
		}
	}
	return v
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int16:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}
