package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"enrichd/enrich"
)

// FillUpdate changes an organization's fill lists: a nil list keeps the one it has,
// an empty one clears it back to the server's default.
type FillUpdate struct {
	Company, Person *[]string
}

// SetFillLists changes the organization's own fill lists, refusing a field the object
// type does not have. Both lists change in one statement, so that two changes at once
// of different lists both stand.
func (db *DB) SetFillLists(ctx context.Context, orgID string, u FillUpdate) error {
	company, setCompany, err := fillColumn(enrich.ObjectCompany, u.Company)
	if err != nil {
		return err
	}
	person, setPerson, err := fillColumn(enrich.ObjectPerson, u.Person)
	if err != nil {
		return err
	}
	return db.Write(ctx, func(tx Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = ?`, orgID).Scan(&id); errors.Is(err, ErrNoRows) {
			return OrgIDNotFound()
		} else if err != nil {
			return err
		}
		// A list left out keeps the stored one; a new row starts from the default.
		_, err := tx.Exec(ctx, `INSERT INTO fill_lists (org_id, company, person, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (org_id) DO UPDATE SET
				company = CASE WHEN ? = 1 THEN excluded.company ELSE fill_lists.company END,
				person = CASE WHEN ? = 1 THEN excluded.person ELSE fill_lists.person END,
				updated_at = excluded.updated_at`,
			orgID, company, person, ms(db.now()), boolInt(setCompany), boolInt(setPerson))
		return err
	})
}

// fillColumn is the column value of a list: NULL for an empty one (the default), and
// whether the update sets it.
func fillColumn(objectType string, list *[]string) (value any, set bool, err error) {
	if list == nil {
		return nil, false, nil
	}
	fields, err := enrich.ParseFields(objectType, strings.Join(*list, ","))
	if err != nil || len(fields) == 0 {
		return nil, true, err
	}
	return strings.Join(fields, ","), true, nil
}

// OrgFillLists returns the organization's own fill lists: a list is nil where the
// organization keeps the server's default.
func (db *DB) OrgFillLists(ctx context.Context, orgID string) (enrich.FillLists, error) {
	var company, person sql.NullString
	err := db.Reader().QueryRow(ctx, `SELECT company, person FROM fill_lists WHERE org_id = ?`, orgID).Scan(&company, &person)
	if errors.Is(err, ErrNoRows) {
		return enrich.FillLists{}, nil
	}
	if err != nil {
		return enrich.FillLists{}, err
	}
	return enrich.FillLists{Company: splitFields(enrich.ObjectCompany, company), Person: splitFields(enrich.ObjectPerson, person)}, nil
}

// FillLists returns the fields the waterfall fills for a task of the organization: its
// own list where it set one, else the default, per object type. A worker reads it for
// each task, by primary key.
func (db *DB) FillLists(ctx context.Context, orgID string, defaults enrich.FillLists) (enrich.FillLists, error) {
	own, err := db.OrgFillLists(ctx, orgID)
	if err != nil {
		return enrich.FillLists{}, err
	}
	if own.Company == nil {
		own.Company = defaults.Company
	}
	if own.Person == nil {
		own.Person = defaults.Person
	}
	return own, nil
}

// splitFields reads a stored list. A name a newer release wrote and this one does not
// know is dropped rather than failing the task: during a rolling upgrade both read
// the same rows.
func splitFields(objectType string, col sql.NullString) []string {
	if !col.Valid {
		return nil
	}
	known := enrich.FieldsOf(objectType)
	var out []string
	for name := range strings.SplitSeq(col.String, ",") {
		if slices.Contains(known, name) {
			out = append(out, name)
		}
	}
	return out
}
