package store

import (
	"context"

	"enrichd/enrich"
)

// Holdings counts what the installation holds that is about companies and the people in
// them, every organization's, for the record of processing (`enrichd privacy report`).
// Each count reads its whole table (tasks excepted, counted by task_counts): it is
// meant for an operator's occasional report, not for a request's path.
type Holdings struct {
	// StoredCompanies and StoredPeople are the records of the store: what the sources
	// gave, kept for everyone or for one organization until --retain-records.
	StoredCompanies int64 `json:"stored_companies"`
	StoredPeople    int64 `json:"stored_people"`
	// DatasetCompanies and DatasetPeople are the records the team imported.
	DatasetCompanies int64 `json:"dataset_companies"`
	DatasetPeople    int64 `json:"dataset_people"`
	// Tasks of every status: each keeps what it was asked and, once it succeeded, its
	// answer, until --retain.
	Tasks int64 `json:"tasks"`
	// EmailGatherings are the addresses ambiguous lookups gathered people for, and
	// EmailCandidates those people's profiles, until --retain-candidates.
	EmailGatherings int64 `json:"email_gatherings"`
	EmailCandidates int64 `json:"email_candidates"`
	// Deliveries are the webhook events with their payloads, PendingDeliveries those
	// still to be sent.
	Deliveries        int64 `json:"deliveries"`
	PendingDeliveries int64 `json:"pending_deliveries"`
	// Batches uploaded and their rows, as uploaded.
	Batches   int64 `json:"batches"`
	BatchRows int64 `json:"batch_rows"`
	// Watches, each with the last result it keeps.
	Watches int64 `json:"watches"`
	// Loops are the destinations results are sent to, HubSpotLoops those that write
	// into a HubSpot account, and HubSpotWrites the objects they wrote there (each an
	// id and keyed hashes of the values, until the Loop is deleted or the person
	// erased).
	Loops         int64 `json:"loops"`
	HubSpotLoops  int64 `json:"hubspot_loops"`
	HubSpotWrites int64 `json:"hubspot_writes"`
	// SourceMisses are the subjects a vendor was found not to know.
	SourceMisses int64 `json:"source_misses"`
	// AuditEntries are the audit log's entries, every organization's, until
	// --retain-audit: counted from the chains' heads, not read.
	AuditEntries int64 `json:"audit_entries"`
	// OwnKeys counts, by source, the organizations that set their own vendor key: that
	// vendor receives their tasks' questions under their own account.
	OwnKeys map[string]int64 `json:"-"`
}

// Holdings counts what the installation holds, in one consistent read.
func (db *DB) Holdings(ctx context.Context) (Holdings, error) {
	var h Holdings
	err := db.Read(ctx, func(q Executor) error {
		h = Holdings{OwnKeys: map[string]int64{}}
		rows, err := q.Query(ctx, `SELECT origin, object_type, count(*) FROM records GROUP BY origin, object_type`)
		if _, err := collect(rows, err, func(r Row) (struct{}, error) {
			var origin, objectType string
			var n int64
			if err := r.Scan(&origin, &objectType, &n); err != nil {
				return struct{}{}, err
			}
			switch {
			case origin == OriginDataset && objectType == enrich.ObjectCompany:
				h.DatasetCompanies = n
			case origin == OriginDataset:
				h.DatasetPeople = n
			case objectType == enrich.ObjectCompany:
				h.StoredCompanies = n
			default:
				h.StoredPeople = n
			}
			return struct{}{}, nil
		}); err != nil {
			return err
		}
		if err := q.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM task_counts`).Scan(&h.Tasks); err != nil {
			return err
		}
		for _, c := range []struct {
			query string
			n     *int64
		}{
			{`SELECT count(*) FROM email_gatherings`, &h.EmailGatherings},
			{`SELECT count(*) FROM email_candidates`, &h.EmailCandidates},
			{`SELECT count(*) FROM deliveries`, &h.Deliveries},
			{`SELECT count(*) FROM deliveries WHERE status = 'pending'`, &h.PendingDeliveries},
			{`SELECT count(*) FROM batches`, &h.Batches},
			{`SELECT count(*) FROM batch_rows`, &h.BatchRows},
			{`SELECT count(*) FROM watches`, &h.Watches},
			{`SELECT count(*) FROM loops`, &h.Loops},
			{`SELECT count(*) FROM loops WHERE destination_kind = '` + KindHubSpot + `'`, &h.HubSpotLoops},
			{`SELECT count(*) FROM hubspot_writes`, &h.HubSpotWrites},
			{`SELECT count(*) FROM source_misses`, &h.SourceMisses},
			{`SELECT coalesce(sum(seq - base_seq), 0) FROM audit_heads`, &h.AuditEntries},
		} {
			if err := q.QueryRow(ctx, c.query).Scan(c.n); err != nil {
				return err
			}
		}
		rows, err = q.Query(ctx, `SELECT source, count(*) FROM org_source_keys GROUP BY source`)
		_, err = collect(rows, err, func(r Row) (struct{}, error) {
			var source string
			var n int64
			err := r.Scan(&source, &n)
			h.OwnKeys[source] = n
			return struct{}{}, err
		})
		return err
	})
	return h, err
}
