package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// Suppressions: the people and companies an organization must not enrich (an
// objection, a do-not-contact list). Each is kept by its subject's keyed hash alone,
// with a masked hint, never the value: the list cannot be read back as addresses. An
// entry of org_id "" is the installation's, set from the CLI, and holds for every
// organization. Every enrichment looks up the hashes of its subjects here before the
// store and any source (Suppressed), through the SuppressionCache where the engine
// can keep one.

// Suppression is one entry of a suppression list. Its JSON is the Suppression of the
// API.
type Suppression struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // email, profile or domain
	Hint      string    `json:"hint"` // the value masked: j***@acme.com
	Reason    *string   `json:"reason"`
	AddedBy   AddedBy   `json:"added_by"`
	AllOrgs   bool      `json:"all_orgs"` // the installation's, for every organization
	CreatedAt time.Time `json:"created_at"`
	OrgID     string    `json:"-"`
	Hash      []byte    `json:"-"`
}

// Who added a suppression.
const (
	AddedByKey  = "key"  // an API key: ID is the key's, Name its name
	AddedByUser = "user" // a dashboard user: ID is the user's, Name their email
	AddedByCLI  = "cli"  // the operator, with enrichd suppressions add
)

// AddedBy is who added a suppression.
type AddedBy struct {
	Kind string  `json:"kind"`
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

// NewSuppression is an entry to add; Subject is already normalized (enrich.Normalizer.Subject).
type NewSuppression struct {
	OrgID   string // "" for every organization (the CLI's --all-orgs)
	Subject enrich.Subject
	Reason  *string
	AddedBy AddedBy
}

// Suppression bounds.
const (
	MaxSuppressionReason   = 500   // characters
	MaxSuppressionImport   = 10000 // entries in one import
	DefaultSuppressionPage = 25
	MaxSuppressionPage     = 100
)

// PausedSuppressed is the paused_reason of a watch whose subject is suppressed: it is
// not checked again until it is resumed.
const PausedSuppressed = "suppressed"

// SuppressionNotFound is the answer for an entry that does not exist, is another
// organization's, or the installation's (which only the CLI lifts).
func SuppressionNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "suppression not found"}
}

// SuppressionExists refuses a second entry for the same subject.
func SuppressionExists(hint string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "suppression_exists",
		Message: hint + " is already suppressed for your organization; nothing was changed"}
}

// CheckNewSuppression holds an entry to the bounds of the API: a subject of a known
// kind, a reason of text of at most MaxSuppressionReason characters, a known author.
func CheckNewSuppression(ns NewSuppression) error {
	switch ns.Subject.Kind {
	case enrich.SubjectEmail, enrich.SubjectProfile, enrich.SubjectDomain:
	default:
		return enrich.Errorf(enrich.KindInvalid, "a suppression is of an email, a profile (networkUrl) or a domain")
	}
	if ns.Subject.Value == "" {
		return enrich.Errorf(enrich.KindInvalid, "send one of email, networkUrl or domain")
	}
	if ns.Reason != nil {
		if n := utf8.RuneCountInString(*ns.Reason); n > MaxSuppressionReason {
			return enrich.Errorf(enrich.KindInvalid, "reason is longer than %d characters (%d sent)", MaxSuppressionReason, n)
		}
		if err := enrich.CheckText("reason", *ns.Reason); err != nil {
			return err
		}
	}
	switch ns.AddedBy.Kind {
	case AddedByKey, AddedByUser, AddedByCLI:
	default:
		return fmt.Errorf("a suppression added by %q", ns.AddedBy.Kind)
	}
	return nil
}

const suppressionColumns = `id, org_id, kind, hash, hint, reason, added_by_kind, added_by_id, added_by_name, created_at`

func scanSuppression(row Row) (*Suppression, error) {
	var s Suppression
	var created int64
	if err := row.Scan(&s.ID, &s.OrgID, &s.Kind, &s.Hash, &s.Hint, &s.Reason, &s.AddedBy.Kind, &s.AddedBy.ID,
		&s.AddedBy.Name, &created); err != nil {
		return nil, err
	}
	s.AllOrgs, s.CreatedAt = s.OrgID == "", fromMS(created)
	return &s, nil
}

// AddSuppression adds one entry, and pauses the watches of the organizations it holds
// for whose subject it names; a subject already suppressed is refused (409
// suppression_exists) and nothing changes.
func (db *DB) AddSuppression(ctx context.Context, by By, ns NewSuppression) (*Suppression, error) {
	added, err := db.addSuppressions(ctx, by, []NewSuppression{ns}, false)
	if err != nil {
		return nil, err
	}
	return added[0], nil
}

// ImportSuppressions adds every entry of a list in one transaction: those already
// suppressed (before, or earlier in the list) are passed over. It returns how many it
// added and how many were there already.
func (db *DB) ImportSuppressions(ctx context.Context, by By, list []NewSuppression) (added, existing int, err error) {
	if len(list) > MaxSuppressionImport {
		return 0, 0, enrich.Errorf(enrich.KindInvalid, "at most %d suppressions in one import, not %d", MaxSuppressionImport, len(list))
	}
	got, err := db.addSuppressions(ctx, by, list, true)
	if err != nil {
		return 0, 0, err
	}
	return len(got), len(list) - len(got), nil
}

func (db *DB) addSuppressions(ctx context.Context, by By, list []NewSuppression, skipExisting bool) ([]*Suppression, error) {
	h, err := db.hasher()
	if err != nil {
		return nil, err
	}
	entries := make([]*Suppression, len(list))
	for i, ns := range list {
		if err := CheckNewSuppression(ns); err != nil {
			return nil, err
		}
		hash := h.Hash(ns.Subject)
		entries[i] = &Suppression{ID: uuid.Must(uuid.NewV7()).String(), OrgID: ns.OrgID, Kind: string(ns.Subject.Kind),
			Hash: hash[:], Hint: ns.Subject.Hint(), Reason: ns.Reason, AddedBy: ns.AddedBy, AllOrgs: ns.OrgID == ""}
	}
	var added []*Suppression
	err = db.Write(ctx, func(tx Tx) error {
		added = nil // a retried transaction starts again
		now := db.now()
		for _, s := range entries {
			s.CreatedAt = now
			if s.AddedBy.Kind == AddedByKey && s.AddedBy.Name == nil && s.AddedBy.ID != nil {
				if s.AddedBy.Name, err = keyName(ctx, tx, *s.AddedBy.ID); err != nil {
					return err
				}
			}
			n, err := tx.Exec(ctx, `INSERT INTO suppressions (`+suppressionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (org_id, hash) DO NOTHING`, s.ID, s.OrgID, s.Kind, s.Hash, s.Hint, s.Reason,
				s.AddedBy.Kind, s.AddedBy.ID, s.AddedBy.Name, ms(now))
			if err != nil {
				return err
			}
			if n == 0 {
				if skipExisting {
					continue
				}
				return SuppressionExists(s.Hint)
			}
			if err := pauseSuppressedWatches(ctx, tx, s.OrgID, s.Hash, now); err != nil {
				return err
			}
			added = append(added, s)
		}
		for _, s := range added {
			if err := db.appendAudit(ctx, tx, by, suppressionEntry(AuditSuppressionAdded, s, Actor(s.AddedBy))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c := db.SuppressionCache(); c != nil && len(added) > 0 {
		c.Invalidate()
	}
	return added, nil
}

// suppressionEntry is the audit entry of a suppression added or lifted: the subject
// by its hash alone, as the list keeps it, never in clear.
func suppressionEntry(action string, s *Suppression, by Actor) NewAuditEntry {
	id := s.ID
	return NewAuditEntry{OrgID: s.OrgID, Action: action, Actor: by, SubjectHash: s.Hash, ObjectID: &id,
		Detail: map[string]string{"kind": s.Kind}}
}

// keyName is how an API key is shown as who added a suppression: its name, or its
// prefix when it has none; nil for a key that is gone.
func keyName(ctx context.Context, q Executor, id string) (*string, error) {
	var name, prefix string
	err := q.QueryRow(ctx, `SELECT name, prefix FROM api_keys WHERE id = ?`, id).Scan(&name, &prefix)
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = prefix
	}
	return &name, nil
}

// pauseSuppressedWatches pauses, in tx, the watches whose subject or answer hash is
// hash: of the organization orgID, or of every organization for an entry of the
// installation's. A watch of an address at a suppressed domain is paused by the
// scheduler, which knows the address's domain, when it comes due.
func pauseSuppressedWatches(ctx context.Context, tx Tx, orgID string, hash []byte, now time.Time) error {
	scope, args := ``, []any{PausedSuppressed, ms(now), hash, hash}
	if orgID != "" {
		scope, args = ` AND org_id = ?`, append(args, orgID)
	}
	_, err := tx.Exec(ctx, `UPDATE watches SET paused_reason = ?, next_run_at = NULL, claimed_due_at = NULL, updated_at = ?
		WHERE (subject_hash = ? OR answer_hash = ?) AND paused_reason IS NULL`+scope, args...)
	return err
}

// PauseWatch pauses one of the organization's watches for reason (PausedSuppressed):
// it is not due again until it is resumed.
func (db *DB) PauseWatch(ctx context.Context, orgID, id, reason string) error {
	return db.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE watches SET paused_reason = ?, next_run_at = NULL, claimed_due_at = NULL, updated_at = ?
			WHERE id = ? AND org_id = ?`, reason, ms(db.now()), id, orgID)
		if err == nil && n == 0 {
			err = WatchNotFound()
		}
		return err
	})
}

const (
	listSuppressionsQuery = `SELECT ` + suppressionColumns + ` FROM suppressions WHERE org_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	countSuppressionsQuery = `SELECT count(*) FROM suppressions WHERE org_id = ?`
	// suppressedQuery is completed by suppressedHashes with one ? a hash: a range of the
	// unique (org_id, hash) index for each.
	suppressedQuery = `SELECT EXISTS (SELECT 1 FROM suppressions WHERE org_id IN (?, '') AND hash IN `
	// loadSuppressionsQuery reads every hash an organization's enrichments are checked
	// against, its own and the installation's, for the cache.
	loadSuppressionsQuery = `SELECT hash FROM suppressions WHERE org_id IN (?, '') LIMIT ?`
)

// SuppressionQueries are the statements of the list, the count and the check, by
// name, with arguments of the right types: each driver's tests check its plans.
var SuppressionQueries = map[string]struct {
	Query string
	Args  []any
}{
	"ListSuppressions":  {listSuppressionsQuery, []any{"o", 25, 0}},
	"CountSuppressions": {countSuppressionsQuery, []any{"o"}},
	"Suppressed":        {suppressedQuery + `(?, ?))`, []any{"o", []byte("a"), []byte("b")}},
	"LoadSuppressions":  {loadSuppressionsQuery, []any{"o", 10}},
}

// ListSuppressions returns a page of the organization's own entries, newest first,
// and how many it has, from one read view. The installation's entries are the CLI's
// to list (ListSuppressions with orgID "").
func (db *DB) ListSuppressions(ctx context.Context, orgID string, page, pageSize int) ([]*Suppression, int64, error) {
	var list []*Suppression
	var total int64
	err := db.Read(ctx, func(q Executor) error {
		if err := q.QueryRow(ctx, countSuppressionsQuery, orgID).Scan(&total); err != nil {
			return err
		}
		rows, err := q.Query(ctx, listSuppressionsQuery, orgID, pageSize, page*pageSize)
		list, err = collect(rows, err, scanSuppression)
		return err
	})
	if list == nil {
		list = []*Suppression{}
	}
	return list, total, err
}

// GetSuppression returns one of the organization's entries ("" for the
// installation's); another organization's is not found.
func (db *DB) GetSuppression(ctx context.Context, orgID, id string) (*Suppression, error) {
	if len(id) > 100 {
		return nil, SuppressionNotFound()
	}
	s, err := scanSuppression(db.Reader().QueryRow(ctx, `SELECT `+suppressionColumns+` FROM suppressions WHERE id = ? AND org_id = ?`, id, orgID))
	if errors.Is(err, ErrNoRows) {
		return nil, SuppressionNotFound()
	}
	return s, err
}

// DeleteSuppression lifts one of the organization's entries ("" for the
// installation's): its subject may be enriched again. Watches it paused stay paused
// until they are resumed. Another organization's entry is not found.
func (db *DB) DeleteSuppression(ctx context.Context, by By, orgID, id string) (*Suppression, error) {
	if len(id) > 100 {
		return nil, SuppressionNotFound()
	}
	var s *Suppression
	err := db.Write(ctx, func(tx Tx) error {
		var err error
		s, err = scanSuppression(tx.QueryRow(ctx, `DELETE FROM suppressions WHERE id = ? AND org_id = ? RETURNING `+suppressionColumns, id, orgID))
		if errors.Is(err, ErrNoRows) {
			return SuppressionNotFound()
		}
		if err != nil {
			return err
		}
		return db.appendAudit(ctx, tx, by, suppressionEntry(AuditSuppressionLifted, s, Actor{}))
	})
	if err != nil {
		return nil, err
	}
	if c := db.SuppressionCache(); c != nil {
		c.Invalidate()
	}
	return s, nil
}

// Suppressed reports whether any of subjects is suppressed for the organization (by
// its own list or the installation's), and which: the first that is.
func (db *DB) Suppressed(ctx context.Context, orgID string, subjects ...enrich.Subject) (enrich.Subject, bool, error) {
	h, err := db.hasher()
	if err != nil {
		return enrich.Subject{}, false, err
	}
	for _, sub := range subjects {
		hash := h.Hash(sub)
		ok, err := db.suppressedHashes(ctx, nil, orgID, hash[:])
		if err != nil || ok {
			return sub, ok, err
		}
	}
	return enrich.Subject{}, false, nil
}

// SuppressedHash reports whether the subject of hash is suppressed for the
// organization.
func (db *DB) SuppressedHash(ctx context.Context, orgID string, hash []byte) (bool, error) {
	return db.suppressedHashes(ctx, nil, orgID, hash)
}

// suppressedHashes reports whether any of hashes is suppressed for the organization:
// from the cache when the engine keeps one, else by one read of the unique index. tx,
// when set, is the transaction the check is made in: the read is its, and the cache
// is not filled from it (a transaction waiting on another connection of the pool
// could wait for ever on PostgreSQL, and SQLite's writer would wait on the read);
// outside one, the organization's entries are read into the cache.
func (db *DB) suppressedHashes(ctx context.Context, tx Executor, orgID string, hashes ...[]byte) (bool, error) {
	q := tx
	if c := db.SuppressionCache(); c != nil {
		if hit, known := c.check(orgID, hashes); known {
			return hit, nil
		}
		if tx == nil && c.load(ctx, db.Reader(), orgID) {
			if hit, known := c.check(orgID, hashes); known {
				return hit, nil
			}
		}
	}
	if q == nil {
		q = db.Reader()
	}
	args := make([]any, 0, len(hashes)+1)
	args = append(args, orgID)
	for _, hash := range hashes {
		args = append(args, hash)
	}
	var suppressed bool
	err := q.QueryRow(ctx, suppressedQuery+`(?`+strings.Repeat(`, ?`, len(hashes)-1)+`))`, args...).Scan(&suppressed)
	return suppressed, err
}

// SuppressedInput is the error of a task whose input names a suppressed subject:
// not_found, as a refused address, saying which subject is suppressed.
func SuppressedInput(in enrich.Input, matched enrich.Subject) *enrich.TaskError {
	what := in.Target
	if in.Lookup == enrich.LookupEmail && matched.Kind == enrich.SubjectDomain {
		what = matched.Value + ", the domain of " + in.Target + ","
	}
	return &enrich.TaskError{Code: enrich.CodeNotFound, Message: what + " is suppressed (do not enrich): " +
		"it is on a suppression list, so no source was asked and nothing was kept"}
}

// SuppressedAnswer is the error of a task whose answer would be about a suppressed
// subject its input did not name: the person an address belongs to, the company
// behind a page. Nothing of them is kept.
func SuppressedAnswer(in enrich.Input) *enrich.TaskError {
	who := "the company at " + in.Target
	if in.Lookup.ObjectType() == enrich.ObjectPerson {
		who = "the person " + in.Target + " belongs to"
	}
	return &enrich.TaskError{Code: enrich.CodeNotFound, Message: who + " is suppressed (do not enrich): " +
		"it is on a suppression list, so nothing of them was kept"}
}
