package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"

	"github.com/google/uuid"
)

// Erasures (GDPR Art. 17 and 19): a person removed from everything an organization
// holds, by a walk of the registry of personal data (privacy.go), each table's rows
// deleted or redacted as its entry says; every Loop of the organization that was sent
// them told, by a person.erased event that names the identifiers the receiver holds
// already and nothing else of them; and the person suppressed, so that nothing
// fetches them again. An erasure is one transaction. It is kept by the keyed hash of
// what was asked and masked hints, never the identifiers. It completes once its events
// are delivered or failed for good and the database's files were rid of the erased
// bytes (CompleteErasures).

// ErasedMarker stands, in a row an erasure kept, for what it took: a task's target, a
// batch row's values, an error's message.
const ErasedMarker = "[erased]"

// EventPersonErased is the event an erasure sends to every Loop that was sent the
// person.
const EventPersonErased = "person.erased"

// NewErasure is an erasure to make.
type NewErasure struct {
	OrgID string // "" with AllOrgs
	// AllOrgs erases every organization's rows (the CLI's --all-orgs), tells every
	// organization's Loops, and suppresses the person for the installation.
	AllOrgs bool
	// Subject is the person, by an address or a profile URL, normalized
	// (enrich.Normalizer.Subject).
	Subject enrich.Subject
	By      AddedBy
}

// Erasure is an erasure made. Its JSON is the Erasure of the API.
type Erasure struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // email or profile: what was asked
	Hint string `json:"hint"` // what was asked, masked
	// Identifiers are every identifier found for the person (the one asked first, then
	// the profile an address was found to belong to, the addresses on record for a
	// profile), masked: each was erased and is suppressed.
	Identifiers []string `json:"identifiers"`
	RequestedBy AddedBy  `json:"requested_by"`
	AllOrgs     bool     `json:"all_orgs"`
	// Removed counts the rows deleted or redacted, by table of the registry.
	Removed map[string]int64 `json:"removed"`
	// Loops are the Loops told, each with its person.erased event's delivery.
	Loops     []ErasureLoop `json:"loops"`
	CreatedAt time.Time     `json:"created_at"`
	// CompletedAt is when its events were all delivered or failed for good and the
	// database's files were rid of what it erased; nil until then.
	CompletedAt *time.Time `json:"completed_at"`

	OrgID string `json:"-"`
	Hash  []byte `json:"-"`
}

// ErasureLoop is a Loop an erasure told.
type ErasureLoop struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	DeliveryID string `json:"delivery_id"`
	// Status is the event's delivery's, as it is now: pending, succeeded or failed;
	// nil once the delivery is gone (with its Loop, or by retention).
	Status *string `json:"status"`
}

// Erasure bounds.
const (
	DefaultErasurePage = 25
	MaxErasurePage     = 100
	// maxIdentifiers bounds the identifiers an erasure follows from the one asked.
	maxIdentifiers = 64
	// identifierRounds is how far it follows them: an address to its person's profile,
	// the profile to the person's other addresses.
	identifierRounds = 3
)

// ErasureNotFound is the answer for an erasure that does not exist or is another
// organization's.
func ErasureNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "erasure not found"}
}

// CheckNewErasure holds an erasure to what can be erased: a person, by an address or
// a profile URL, for one organization or all, by a known author.
func CheckNewErasure(ne NewErasure) error {
	switch ne.Subject.Kind {
	case enrich.SubjectEmail, enrich.SubjectProfile:
	default:
		return enrich.Errorf(enrich.KindInvalid, "an erasure is of a person: send email or networkUrl (a profile)")
	}
	if ne.Subject.Value == "" {
		return enrich.Errorf(enrich.KindInvalid, "send one of email or networkUrl")
	}
	if ne.AllOrgs != (ne.OrgID == "") {
		return fmt.Errorf("an erasure of organization %q with all organizations %v", ne.OrgID, ne.AllOrgs)
	}
	switch ne.By.Kind {
	case AddedByKey, AddedByUser, AddedByCLI:
	default:
		return fmt.Errorf("an erasure requested by %q", ne.By.Kind)
	}
	return nil
}

// Erase erases a person, in one transaction: it finds every identifier of theirs the
// organization holds (the address asked, the profile it was found to belong to, the
// other addresses on record for that profile), the Loops that were sent them, walks
// the registry erasing each table's rows about them, queues a person.erased event to
// each of those Loops, suppresses every identifier found for the organization (the
// installation, with AllOrgs), and records the erasure. What the organization holds
// includes the shared rows the store serves it (a stored record, an email lookup's
// gathering): those go too, for every organization. The caller's caches of answers
// are emptied after the commit (see ForgetErased).
func (db *DB) Erase(ctx context.Context, by By, ne NewErasure) (*Erasure, error) {
	h, err := db.hasher()
	if err != nil {
		return nil, err
	}
	if err := CheckNewErasure(ne); err != nil {
		return nil, err
	}
	var out *Erasure
	err = db.Write(ctx, func(tx Tx) error {
		var err error
		out, err = db.erase(ctx, tx, by, h, ne)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.ForgetErased()
	return out, nil
}

// ForgetErased empties what this process keeps of answers (the store hits' results
// worked out ahead) and the suppressions it has read, after an erasure: the next
// read of either goes to the database. Another process learns of it as it learns of
// a suppression (SuppressionEpoch).
func (db *DB) ForgetErased() {
	db.answers.clear()
	if c := db.SuppressionCache(); c != nil {
		c.Invalidate()
	}
}

// ErasureEpoch is a number that changes whenever an erasure may have been made, by
// this process or another: what a process keeps of tasks' answers (the server's
// settled answers) is to be kept with the epoch it was read at, and not used once the
// epoch moved. ok is false while the engine cannot tell (PostgreSQL without its
// LISTEN connection): then nothing is to be kept. An erasure suppresses the person,
// and the epoch is the suppressions' (SuppressionCache.Epoch), which every engine
// already follows across processes; a suppression changed elsewhere moves it too.
func (db *DB) ErasureEpoch() (epoch uint64, ok bool) {
	c := db.SuppressionCache()
	if c == nil {
		return 0, false
	}
	return c.Epoch(), true
}

func (db *DB) erase(ctx context.Context, tx Tx, by By, h *enrich.Subjects, ne NewErasure) (*Erasure, error) {
	now := db.now()
	e := &Erasing{ID: uuid.Must(uuid.NewV7()).String(), OrgID: ne.OrgID, AllOrgs: ne.AllOrgs, Now: now, Removed: map[string]int64{}}
	who, err := personIdentifiers(ctx, tx, h, ne)
	if err != nil {
		return nil, fmt.Errorf("finding the person's identifiers: %w", err)
	}
	for _, sub := range who {
		e.Hashes = append(e.Hashes, h.Hash(sub))
	}
	told, err := loopsToTell(ctx, tx, e, who)
	if err != nil {
		return nil, fmt.Errorf("finding the Loops that were sent the person: %w", err)
	}
	for _, p := range personalTables {
		if err := p.Erase(ctx, tx, p, e); err != nil {
			return nil, fmt.Errorf("erasing %s: %w", p.Name, err)
		}
	}
	asked := e.Hashes[0]
	er := &Erasure{ID: e.ID, Kind: string(ne.Subject.Kind), Hint: ne.Subject.Hint(), RequestedBy: ne.By, AllOrgs: ne.AllOrgs,
		Removed: map[string]int64{}, Loops: []ErasureLoop{}, CreatedAt: now, OrgID: ne.OrgID, Hash: asked[:]}
	for _, sub := range who {
		er.Identifiers = append(er.Identifiers, sub.Hint())
	}
	for _, p := range personalTables {
		if p.Erasure.Action != EraseKeep {
			er.Removed[p.Name] = e.Removed[p.Name]
		}
	}
	if er.RequestedBy.Kind == AddedByKey && er.RequestedBy.Name == nil && er.RequestedBy.ID != nil {
		if er.RequestedBy.Name, err = keyName(ctx, tx, *er.RequestedBy.ID); err != nil {
			return nil, err
		}
	}
	for _, l := range told {
		d, err := insertErasureEvent(ctx, tx, l, e.ID, asked[:], now)
		if err != nil {
			return nil, fmt.Errorf("telling Loop %s: %w", l.id, err)
		}
		er.Loops = append(er.Loops, ErasureLoop{ID: l.id, Name: l.name, DeliveryID: d.ID, Status: &d.Status})
	}
	reason := "erased (erasure " + e.ID + "): nothing of this person is to be fetched again"
	for _, sub := range who {
		hash := h.Hash(sub)
		if _, err := tx.Exec(ctx, `INSERT INTO suppressions (`+suppressionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id, hash) DO NOTHING`, uuid.Must(uuid.NewV7()).String(), ne.OrgID, string(sub.Kind), hash[:], sub.Hint(),
			reason, er.RequestedBy.Kind, er.RequestedBy.ID, er.RequestedBy.Name, ms(now)); err != nil {
			return nil, err
		}
	}
	if err := insertErasure(ctx, tx, er); err != nil {
		return nil, err
	}
	if err := db.recordErasure(ctx, tx, by, e, er); err != nil {
		return nil, fmt.Errorf("recording the erasure in the audit log: %w", err)
	}
	return er, nil
}

// insertErasure writes the erasure's row.
func insertErasure(ctx context.Context, tx Tx, er *Erasure) error {
	hints, err := json.Marshal(er.Identifiers)
	if err != nil {
		return err
	}
	removed, err := json.Marshal(er.Removed)
	if err != nil {
		return err
	}
	type toldLoop struct {
		ID         string `json:"loop_id"`
		Name       string `json:"name"`
		DeliveryID string `json:"delivery_id"`
	}
	loops := make([]toldLoop, len(er.Loops))
	for i, l := range er.Loops {
		loops[i] = toldLoop{l.ID, l.Name, l.DeliveryID}
	}
	told, err := json.Marshal(loops)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO erasures (`+erasureColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
		er.ID, er.OrgID, er.Kind, er.Hash, er.Hint, string(hints), er.RequestedBy.Kind, er.RequestedBy.ID, er.RequestedBy.Name,
		string(removed), string(told), ms(er.CreatedAt))
	return err
}

const erasureColumns = `id, org_id, kind, hash, hint, hints, requested_by_kind, requested_by_id, requested_by_name, removed, loops,
	created_at, completed_at`

// scanErasure reads an erasure selected as erasureColumns. Its Loops' statuses are
// read apart (erasureStatuses).
func scanErasure(row Row) (*Erasure, error) {
	var er Erasure
	var hints, removed, loops string
	var created int64
	var completed *int64
	if err := row.Scan(&er.ID, &er.OrgID, &er.Kind, &er.Hash, &er.Hint, &hints, &er.RequestedBy.Kind, &er.RequestedBy.ID,
		&er.RequestedBy.Name, &removed, &loops, &created, &completed); err != nil {
		return nil, err
	}
	er.AllOrgs, er.CreatedAt = er.OrgID == "", fromMS(created)
	if completed != nil {
		t := fromMS(*completed)
		er.CompletedAt = &t
	}
	var told []struct {
		ID         string `json:"loop_id"`
		Name       string `json:"name"`
		DeliveryID string `json:"delivery_id"`
	}
	if err := errors.Join(json.Unmarshal([]byte(hints), &er.Identifiers), json.Unmarshal([]byte(removed), &er.Removed),
		json.Unmarshal([]byte(loops), &told)); err != nil {
		return nil, fmt.Errorf("erasure %s: %w", er.ID, err)
	}
	er.Loops = make([]ErasureLoop, len(told))
	for i, l := range told {
		er.Loops[i] = ErasureLoop{ID: l.ID, Name: l.Name, DeliveryID: l.DeliveryID}
	}
	return &er, nil
}

// erasureStatuses reads the status of each of the erasures' events' deliveries.
func erasureStatuses(ctx context.Context, q Executor, list []*Erasure) error {
	for _, er := range list {
		if len(er.Loops) == 0 {
			continue
		}
		rows, err := q.Query(ctx, erasureEventsQuery, er.ID)
		statuses, err := collect(rows, err, func(r Row) ([2]string, error) {
			var s [2]string
			return s, r.Scan(&s[0], &s[1])
		})
		if err != nil {
			return err
		}
		for i := range er.Loops {
			for _, s := range statuses {
				if s[0] == er.Loops[i].DeliveryID {
					status := s[1]
					er.Loops[i].Status = &status
				}
			}
		}
	}
	return nil
}

const (
	listErasuresQuery = `SELECT ` + erasureColumns + ` FROM erasures WHERE org_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	countErasuresQuery = `SELECT count(*) FROM erasures WHERE org_id = ?`
	getErasureQuery    = `SELECT ` + erasureColumns + ` FROM erasures WHERE id = ? AND org_id = ?`
	erasureEventsQuery = `SELECT id, status FROM deliveries WHERE erasure_id = ? AND event = 'person.erased'`
	// incompleteErasuresQuery lists the erasures not completed yet, oldest first, and
	// whether each still has an event to deliver.
	incompleteErasuresQuery = `SELECT e.id, e.removed, EXISTS (SELECT 1 FROM deliveries d
			WHERE d.erasure_id = e.id AND d.event = 'person.erased' AND d.status = 'pending')
		FROM erasures e WHERE e.completed_at IS NULL ORDER BY e.created_at LIMIT ?`
)

// ErasureQueries are the erasures' statements, by name, with arguments of the right
// types: each driver's tests check their plans.
var ErasureQueries = map[string]struct {
	Query string
	Args  []any
}{
	"ListErasures":       {listErasuresQuery, []any{"o", 25, 0}},
	"CountErasures":      {countErasuresQuery, []any{"o"}},
	"GetErasure":         {getErasureQuery, []any{"e", "o"}},
	"ErasureEvents":      {erasureEventsQuery, []any{"e"}},
	"IncompleteErasures": {incompleteErasuresQuery, []any{100}},
}

// ListErasures returns a page of the organization's erasures ("" for the
// installation's), newest first, and how many it has, from one read view.
func (db *DB) ListErasures(ctx context.Context, orgID string, page, pageSize int) ([]*Erasure, int64, error) {
	var list []*Erasure
	var total int64
	err := db.Read(ctx, func(q Executor) error {
		if err := q.QueryRow(ctx, countErasuresQuery, orgID).Scan(&total); err != nil {
			return err
		}
		rows, err := q.Query(ctx, listErasuresQuery, orgID, pageSize, page*pageSize)
		if list, err = collect(rows, err, scanErasure); err != nil {
			return err
		}
		return erasureStatuses(ctx, q, list)
	})
	if list == nil {
		list = []*Erasure{}
	}
	return list, total, err
}

// GetErasure returns one of the organization's erasures ("" for the installation's);
// another organization's is not found.
func (db *DB) GetErasure(ctx context.Context, orgID, id string) (*Erasure, error) {
	if len(id) > 100 {
		return nil, ErasureNotFound()
	}
	var er *Erasure
	err := db.Read(ctx, func(q Executor) error {
		var err error
		er, err = scanErasure(q.QueryRow(ctx, getErasureQuery, id, orgID))
		if errors.Is(err, ErrNoRows) {
			return ErasureNotFound()
		}
		if err != nil {
			return err
		}
		return erasureStatuses(ctx, q, []*Erasure{er})
	})
	return er, err
}

// CompleteErasures completes the erasures whose person.erased events are all
// delivered or failed for good (and so hold only the erasure's id): the database's
// files are rid of what those erasures and events took (Driver.Scrub: SQLite's log
// checkpointed and emptied, the erased bytes being overwritten as they are deleted;
// PostgreSQL's tables vacuumed), then each is marked complete. It returns how many it
// completed; none when the scrub could not be done now (ErasuresHeld says why): a
// later call tries again. Maintenance calls it every round, and the server when an
// erasure's last event is done.
//
// An erasure found ready is given a mark (Driver.ScrubMark) that its scrub waits on,
// kept from call to call: erasures found ready in one call share one, and are
// completed together, the oldest mark's first, so that erasures found ready later
// never put off an earlier one's scrub.
func (db *DB) CompleteErasures(ctx context.Context) (int, error) {
	type incomplete struct {
		id      string
		removed string
		pending bool
	}
	// Held across the call: two at once would each find the other's erasures unmarked.
	m := &db.scrubs
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[string]scrubMark{}
	}
	rows, err := db.Reader().Query(ctx, incompleteErasuresQuery, incompleteErasuresPage)
	list, err := collect(rows, err, func(r Row) (incomplete, error) {
		var i incomplete
		return i, r.Scan(&i.id, &i.removed, &i.pending)
	})
	if err != nil {
		return 0, err
	}
	listed := map[string]bool{}
	var unmarked []string
	for _, e := range list {
		listed[e.id] = true
		if _, marked := m.marks[e.id]; !e.pending && !marked {
			unmarked = append(unmarked, e.id)
		}
	}
	if len(list) < incompleteErasuresPage {
		for id := range m.marks { // completed elsewhere: by another replica, or the CLI
			if !listed[id] {
				delete(m.marks, id)
			}
		}
	}
	if len(unmarked) > 0 {
		mark, err := db.ScrubMark(ctx)
		if err != nil {
			return 0, err
		}
		m.groups++
		for _, id := range unmarked {
			m.marks[id] = scrubMark{group: m.groups, mark: mark, at: db.now()}
		}
	}
	completed := 0
	for {
		group := 0 // the oldest mark's
		for _, e := range list {
			if sm, marked := m.marks[e.id]; marked && (group == 0 || sm.group < group) {
				group = sm.group
			}
		}
		if group == 0 {
			m.held, m.heldSince = "", time.Time{}
			return completed, nil
		}
		var first scrubMark
		var ready []string
		touched := map[string]bool{"deliveries": true}
		for _, e := range list {
			sm, marked := m.marks[e.id]
			if !marked || sm.group != group {
				continue
			}
			first = sm
			ready = append(ready, e.id)
			var removed map[string]int64
			if json.Unmarshal([]byte(e.removed), &removed) == nil {
				for table, n := range removed {
					if n > 0 {
						touched[table] = true
					}
				}
			}
		}
		held, err := db.Scrub(ctx, slices.Sorted(maps.Keys(touched)), first.mark)
		if err != nil {
			return completed, err
		}
		if held != "" {
			m.held, m.heldSince = held, first.at
			return completed, nil
		}
		var done int64
		err = db.Write(ctx, func(tx Tx) error {
			in, args := inList(ready)
			var err error
			done, err = tx.Exec(ctx, `UPDATE erasures SET completed_at = ? WHERE completed_at IS NULL AND id IN `+in,
				append([]any{ms(db.now())}, args...)...)
			return err
		})
		if err != nil {
			return completed, err
		}
		completed += int(done)
		for _, id := range ready {
			delete(m.marks, id)
		}
	}
}

// ErasuresHeld says what kept the last call of CompleteErasures from completing the
// erasures ready to complete ("" when nothing did), and since when they have been
// ready: a wait of minutes is a transaction or a replication slot to look at.
func (db *DB) ErasuresHeld() (held string, since time.Time) {
	db.scrubs.mu.Lock()
	defer db.scrubs.mu.Unlock()
	return db.scrubs.held, db.scrubs.heldSince
}

// incompleteErasuresPage is how many incomplete erasures CompleteErasures reads a call.
const incompleteErasuresPage = 100

// scrubMarks are the marks of the erasures found ready to complete and not completed
// yet (CompleteErasures), by erasure id, and what held their scrub back last.
type scrubMarks struct {
	mu        sync.Mutex
	marks     map[string]scrubMark
	groups    int // the number of the last group given a mark
	held      string
	heldSince time.Time
}

// scrubMark is an erasure's mark: the driver's, the group of erasures found ready
// with it, and when.
type scrubMark struct {
	group int
	mark  string
	at    time.Time
}

// identifierKinds are the lookups that name a person, and the subject each names.
var identifierKinds = map[string]enrich.SubjectKind{string(enrich.LookupEmail): enrich.SubjectEmail, string(enrich.LookupPersonURL): enrich.SubjectProfile}

// personIdentifiers are the identifiers of the person ne names that the rows in its
// scope know, the one asked first: the profile an address was found to belong to (by
// a task's answer, a record's key), the addresses on record for a profile, and so on,
// identifierRounds deep, at most maxIdentifiers. A profile gathered as a candidate for
// an address is not followed: the address may be another person's.
func personIdentifiers(ctx context.Context, q Executor, h *enrich.Subjects, ne NewErasure) ([]enrich.Subject, error) {
	who := []enrich.Subject{ne.Subject}
	known := map[enrich.SubjectHash]bool{h.Hash(ne.Subject): true}
	frontier := []enrich.SubjectHash{h.Hash(ne.Subject)}
	for round := 0; round < identifierRounds && len(frontier) > 0; round++ {
		found, err := identifiersAbout(ctx, q, frontier, ne.OrgID, ne.AllOrgs)
		if err != nil {
			return nil, err
		}
		frontier = nil
		for _, sub := range found {
			hash := h.Hash(sub)
			if known[hash] || len(who) >= maxIdentifiers {
				continue
			}
			known[hash] = true
			who = append(who, sub)
			frontier = append(frontier, hash)
		}
	}
	return who, nil
}

// identifiersAbout reads, from the rows about hashes in scope, the identifiers of the
// people they name: the targets of person tasks and watches, the profiles of their
// answers and of stored people, the addresses and profiles records are keyed by.
func identifiersAbout(ctx context.Context, q Executor, hashes []enrich.SubjectHash, orgID string, allOrgs bool) ([]enrich.Subject, error) {
	var out []enrich.Subject
	add := func(kind enrich.SubjectKind, value string) {
		if value != "" && value != ErasedMarker {
			out = append(out, enrich.Subject{Kind: kind, Value: value})
		}
	}
	addProfileOf := func(data *string) {
		if data == nil {
			return
		}
		var p struct {
			NetworkURL *string `json:"network_url"`
		}
		if json.Unmarshal([]byte(*data), &p) == nil && p.NetworkURL != nil {
			add(enrich.SubjectProfile, *p.NetworkURL)
		}
	}
	scan := func(table, columns, extra string, each func(Row) error) error {
		p, _ := PersonalTableByName(table)
		where, args := p.where(hashes, orgID, allOrgs)
		rows, err := q.Query(ctx, `SELECT DISTINCT `+columns+` FROM `+p.from+` WHERE `+where+extra+` LIMIT 1000`, args...)
		_, err = collect(rows, err, func(r Row) (struct{}, error) { return struct{}{}, each(r) })
		return err
	}
	err := errors.Join(
		scan("tasks", `t.lookup, t.target, `+resultColumnOf("t"), ` AND t.object_type = 'person'`, func(r Row) error {
			var lookup, target string
			var data *string
			if err := r.Scan(&lookup, &target, &data); err != nil {
				return err
			}
			if kind, ok := identifierKinds[lookup]; ok {
				add(kind, target)
			}
			addProfileOf(data)
			return nil
		}),
		scan("watches", `t.lookup, t.target`, ` AND t.object_type = 'person'`, func(r Row) error {
			var lookup, target string
			if err := r.Scan(&lookup, &target); err != nil {
				return err
			}
			if kind, ok := identifierKinds[lookup]; ok {
				add(kind, target)
			}
			return nil
		}),
		// A key names its record's person too: the profile an address is on record for.
		scan("record_keys", `t.key, (SELECT r.data FROM records r WHERE r.id = t.record_id AND r.object_type = 'person')`, ``, func(r Row) error {
			var key string
			var data *string
			if err := r.Scan(&key, &data); err != nil {
				return err
			}
			addProfileOf(data)
			if v, ok := strings.CutPrefix(key, "email:"); ok {
				add(enrich.SubjectEmail, v)
			} else if v, ok := strings.CutPrefix(key, "person:"); ok {
				add(enrich.SubjectProfile, v)
			}
			return nil
		}),
		scan("records", `t.data`, ` AND t.object_type = 'person'`, func(r Row) error {
			var data *string
			if err := r.Scan(&data); err != nil {
				return err
			}
			addProfileOf(data)
			return nil
		}),
	)
	return out, err
}

// toldLoop is a Loop an erasure tells, the identifiers of the person it was sent, and
// the CRM objects it wrote about them.
type toldLoop struct {
	id, orgID, name string
	emails, urls    []string
	objects         []ErasedObject
}

// ErasedObject is a CRM object a Loop wrote about an erased person, by its type (as
// the CRM's API names it: contacts) and its id there: all a person.erased event tells
// the Loop's destination of it, so that it can delete an object its CRM's search does
// not show yet.
type ErasedObject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// loopsToTell finds the Loops that were sent the person: those with a delivery about
// them that was sent, or is being sent (a person.erased event of an earlier erasure
// aside), those of a settled task about them whose delivery is no longer kept, and
// those that wrote a CRM object about them (hubspot_writes, which retention keeps
// when it deletes the tasks and deliveries). Each is told the identifiers its
// deliveries were about, as the hashes on them say, and the objects it wrote: what it
// holds already, nothing more. Loops deleted since are not told.
func loopsToTell(ctx context.Context, q Executor, e *Erasing, who []enrich.Subject) ([]toldLoop, error) {
	sent := map[string]map[enrich.SubjectHash]bool{}
	collectSent := func(table, extra string, extraArgs ...any) error {
		p, _ := PersonalTableByName(table)
		where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
		rows, err := q.Query(ctx, `SELECT t.loop_id, t.subject_hash, t.answer_hash FROM `+p.from+` WHERE `+where+extra, append(args, extraArgs...)...)
		_, err = collect(rows, err, func(r Row) (struct{}, error) {
			var loop string
			var subject, answer []byte
			if err := r.Scan(&loop, &subject, &answer); err != nil {
				return struct{}{}, err
			}
			if sent[loop] == nil {
				sent[loop] = map[enrich.SubjectHash]bool{}
			}
			for _, h := range [][]byte{subject, answer} {
				if len(h) == enrich.SubjectHashSize {
					sent[loop][enrich.SubjectHash(h)] = true
				}
			}
			return struct{}{}, nil
		})
		return err
	}
	if err := collectSent("deliveries", ` AND t.event <> 'person.erased' AND (t.attempts > 0 OR t.status = 'succeeded' OR t.lease_until > ?)`, ms(e.Now)); err != nil {
		return nil, err
	}
	if err := collectSent("tasks", ` AND t.loop_id IS NOT NULL AND t.status IN ('succeeded', 'failed')
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.task_id = t.id)`); err != nil {
		return nil, err
	}
	objects, err := crmObjectsWritten(ctx, q, e, sent)
	if err != nil {
		return nil, err
	}
	var out []toldLoop
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range sent {
			if !yield(id) {
				return
			}
		}
	}) {
		l := toldLoop{id: id, objects: objects[id]}
		err := q.QueryRow(ctx, `SELECT org_id, name FROM loops WHERE id = ?`, id).Scan(&l.orgID, &l.name)
		if errors.Is(err, ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for i, sub := range who {
			if !sent[id][e.Hashes[i]] {
				continue
			}
			switch sub.Kind {
			case enrich.SubjectEmail:
				l.emails = append(l.emails, sub.Value)
			case enrich.SubjectProfile:
				l.urls = append(l.urls, sub.Value)
			}
		}
		if len(l.emails)+len(l.urls) == 0 {
			continue // sent about a hash no identifier found names
		}
		out = append(out, l)
	}
	return out, nil
}

// crmObjectsWritten reads, before the erasure deletes them, the CRM objects each Loop
// wrote about the person (hubspot_writes), by Loop, and marks each such Loop as sent
// the subject it wrote about.
func crmObjectsWritten(ctx context.Context, q Executor, e *Erasing, sent map[string]map[enrich.SubjectHash]bool) (map[string][]ErasedObject, error) {
	p, _ := PersonalTableByName("hubspot_writes")
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	rows, err := q.Query(ctx, `SELECT t.loop_id, t.subject_hash, t.object_type, t.object_id FROM `+p.from+` WHERE `+where+
		` ORDER BY t.loop_id, t.object_type, t.object_id`, args...)
	objects := map[string][]ErasedObject{}
	_, err = collect(rows, err, func(r Row) (struct{}, error) {
		var loop string
		var subject []byte
		var o ErasedObject
		if err := r.Scan(&loop, &subject, &o.Type, &o.ID); err != nil {
			return struct{}{}, err
		}
		if len(subject) != enrich.SubjectHashSize {
			return struct{}{}, nil
		}
		if sent[loop] == nil {
			sent[loop] = map[enrich.SubjectHash]bool{}
		}
		sent[loop][enrich.SubjectHash(subject)] = true
		if !slices.Contains(objects[loop], o) {
			objects[loop] = append(objects[loop], o)
		}
		return struct{}{}, nil
	})
	return objects, err
}

// personErasedBody is the body of a person.erased event. Person is the identifiers
// the receiver was sent, until the event is delivered or fails for good: null after.
type personErasedBody struct {
	Event     string        `json:"event"`
	ErasureID string        `json:"erasure_id"`
	Person    *erasedPerson `json:"person"`
	// Objects are the CRM objects the Loop wrote about the person, to a Loop that
	// wrote some (a HubSpot one): kept as long as Person is.
	Objects []ErasedObject `json:"objects,omitempty"`
}

type erasedPerson struct {
	Emails      []string `json:"emails"`
	NetworkURLs []string `json:"networkUrls"`
}

// PersonErasedPayload is the body of the person.erased event of erasure id to a Loop
// that was sent the person by those addresses and profile URLs, and wrote those CRM
// objects about them.
func PersonErasedPayload(id string, emails, networkURLs []string, objects ...ErasedObject) ([]byte, error) {
	return json.Marshal(personErasedBody{Event: EventPersonErased, ErasureID: id,
		Person:  &erasedPerson{Emails: nonNilStrings(emails), NetworkURLs: nonNilStrings(networkURLs)},
		Objects: objects})
}

// SpentErasurePayload is what a person.erased event keeps once it is delivered or
// failed for good: the erasure's id, without the identifiers.
func SpentErasurePayload(id string) []byte {
	b, _ := json.Marshal(personErasedBody{Event: EventPersonErased, ErasureID: id}) // strings: it always marshals
	return b
}

// spentErasurePayloadSQL is SpentErasurePayload in SQL, of the row's erasure_id (a
// UUID, which needs no escaping), for the statements that settle a delivery.
const spentErasurePayloadSQL = `'{"event":"person.erased","erasure_id":"' || coalesce(erasure_id, '') || '","person":null}'`

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// insertErasureEvent queues the person.erased event of erasure erasureID to the Loop
// l, due at once; or, when the Loop's destination is disabled, records it failed, as
// insertDelivery does, holding the erasure's id alone.
func insertErasureEvent(ctx context.Context, tx Tx, l toldLoop, erasureID string, subject []byte, now time.Time) (*Delivery, error) {
	payload, err := PersonErasedPayload(erasureID, l.emails, l.urls, l.objects...)
	if err != nil {
		return nil, err
	}
	d := &Delivery{ID: uuid.Must(uuid.NewV7()).String(), LoopID: l.id, OrgID: l.orgID, Event: EventPersonErased, CreatedAt: now, ErasureID: &erasureID}
	before, after := NotSentErrorParts()
	var next, last *int64
	err = tx.QueryRow(ctx, `INSERT INTO deliveries (id, loop_id, org_id, event, task_id, payload, status, next_attempt_at,
			last_error, last_attempt_at, created_at, subject_hash, answer_hash, erasure_id)
		SELECT ?, id, org_id, ?, NULL, CASE WHEN destination_disabled_at IS NULL THEN CAST(? AS TEXT) ELSE CAST(? AS TEXT) END,
			CASE WHEN destination_disabled_at IS NULL THEN 'pending' ELSE 'failed' END,
			CASE WHEN destination_disabled_at IS NULL THEN CAST(? AS BIGINT) END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN CAST(? AS TEXT) || destination_disabled_reason || CAST(? AS TEXT) END,
			CASE WHEN destination_disabled_at IS NOT NULL THEN CAST(? AS BIGINT) END, ?, ?, NULL, ?
		FROM loops WHERE id = ?
		RETURNING status, next_attempt_at, last_error, last_attempt_at`,
		d.ID, EventPersonErased, string(payload), string(SpentErasurePayload(erasureID)), ms(now), before, after, ms(now), ms(now),
		subject, erasureID, l.id).Scan(&d.Status, &next, &d.LastError, &last)
	if err != nil {
		return nil, err
	}
	if next != nil {
		t := fromMS(*next)
		d.NextAttemptAt = &t
	}
	if last != nil {
		t := fromMS(*last)
		d.LastAttemptAt = &t
	}
	return d, nil
}

// keepRows is the Erase of a table whose rows an erasure keeps as they are: they hold
// hashes and masked hints alone.
func keepRows(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error { return nil }

// deleteFound deletes the rows of p about the person, in the erasure's scope.
func deleteFound(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	n, err := tx.Exec(ctx, `DELETE FROM `+p.Name+` WHERE (`+strings.Join(p.Key, ", ")+`) IN (SELECT t.`+strings.Join(p.Key, ", t.")+
		` FROM `+p.from+` WHERE `+where+`)`, args...)
	e.Removed[p.Name] += n
	return err
}

// eraseTasks redacts the tasks about the person: each keeps its row, status and
// charge, and loses its input (kept as {}), target (the marker), result, provenance,
// sources, error message (its code stays) and idempotency key; a task not settled yet
// is canceled first, and refunded, so that a worker's late answer is discarded. The
// results no other task shows go with them (the tasks' triggers), counted here.
func eraseTasks(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	type task struct {
		id, status string
		taskErr    *string
		key        *string
		orgID      string
	}
	rows, err := tx.Query(ctx, `SELECT t.id, t.status, t.error, t.idempotency_key, t.org_id FROM tasks t WHERE `+where+
		` AND t.erased_at IS NULL ORDER BY t.id FOR UPDATE`, args...)
	tasks, err := collect(rows, err, func(r Row) (task, error) {
		var t task
		return t, r.Scan(&t.id, &t.status, &t.taskErr, &t.key, &t.orgID)
	})
	if err != nil || len(tasks) == 0 {
		return err
	}
	results, err := resultsAbout(ctx, tx, e.Hashes)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.status == StatusQueued || t.status == StatusRunning {
			if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'canceled', finished_at = ?, lease_token = NULL, lease_until = NULL
				WHERE id = ?`, ms(e.Now), t.id); err != nil {
				return err
			}
			if err := refund(ctx, tx, t.id, e.Now); err != nil {
				return err
			}
		}
		var redacted *string
		if t.taskErr != nil {
			var te enrich.TaskError
			json.Unmarshal([]byte(*t.taskErr), &te) // an unreadable one keeps no code
			b, _ := json.Marshal(enrich.TaskError{Code: te.Code, Message: ErasedMarker})
			s := string(b)
			redacted = &s
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET input = '{}', target = ?, result_id = NULL, error = ?, provenance = NULL,
			sources = NULL, idempotency_key = NULL, erased_at = ? WHERE id = ?`, ErasedMarker, redacted, ms(e.Now), t.id); err != nil {
			return err
		}
		if t.key != nil {
			if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE org_id = ? AND key = ? AND task_id = ?`, t.orgID, *t.key, t.id); err != nil {
				return err
			}
		}
	}
	e.Removed[p.Name] += int64(len(tasks))
	after, err := resultsAbout(ctx, tx, e.Hashes)
	e.Removed["task_results"] += results - after
	return err
}

// resultsAbout counts the task results about hashes, every organization's.
func resultsAbout(ctx context.Context, q Executor, hashes []enrich.SubjectHash) (int64, error) {
	list, args := hashList(hashes)
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM task_results WHERE subject_hash IN `+list, args...).Scan(&n)
	return n, err
}

// eraseTaskResults deletes the results about the person that no task shows any more:
// the tasks' redaction let go of those only its tasks showed.
func eraseTaskResults(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	list, args := hashList(e.Hashes)
	n, err := tx.Exec(ctx, `DELETE FROM task_results WHERE subject_hash IN `+list+` AND refs = 0`, args...)
	e.Removed[p.Name] += n
	return err
}

// eraseDeliveries deletes the deliveries about the person not sent yet, and takes the
// payload out of those sent, which stay in their Loop's history naming the erasure. A
// person.erased event of an earlier erasure is left to be sent: it holds what the
// receiver was sent already, and only until then.
func eraseDeliveries(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	n, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE id IN (SELECT t.id FROM deliveries t WHERE `+where+`
		AND t.status = 'pending' AND t.event <> 'person.erased')`, args...)
	if err != nil {
		return err
	}
	e.Removed[p.Name] += n
	n, err = tx.Exec(ctx, `UPDATE deliveries SET payload = '{"event":"' || event || '","erasure_id":"' || CAST(? AS TEXT) || '"}',
		last_error = NULL, summary = NULL, erasure_id = ? WHERE id IN (SELECT t.id FROM deliveries t WHERE `+where+`
		AND t.status <> 'pending' AND t.event <> 'person.erased' AND t.erasure_id IS NULL)`, append([]any{e.ID, e.ID}, args...)...)
	e.Removed[p.Name] += n
	return err
}

// eraseCandidates deletes everything gathered for each address the person was a
// candidate for, or is: a retry of the address with a hint would otherwise pick among
// the others, one of whom is not its owner. The gatherings count as theirs.
func eraseCandidates(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	rows, err := tx.Query(ctx, `SELECT DISTINCT t.address FROM email_candidates t WHERE `+where, args...)
	addresses, err := collect(rows, err, func(r Row) (a string, err error) { return a, r.Scan(&a) })
	if err != nil {
		return err
	}
	for _, a := range addresses {
		n, err := tx.Exec(ctx, `DELETE FROM email_candidates WHERE address = ?`, a)
		if err != nil {
			return err
		}
		e.Removed[p.Name] += n
		if n, err = tx.Exec(ctx, `DELETE FROM email_gatherings WHERE address = ?`, a); err != nil {
			return err
		}
		e.Removed["email_gatherings"] += n
	}
	return nil
}

// eraseBatchRows redacts the batch rows about the person: each keeps its place, its
// task and its kind; its values become the marker, one a column, its request {}; a row
// still waiting for its task fails instead, with the marker for message.
func eraseBatchRows(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	type row struct {
		batch      string
		number     int64
		vals       string
		taskID     *string
		rowErr     *string
		companyErr *string
	}
	rows, err := tx.Query(ctx, `SELECT t.batch_id, t.row_number, t.vals, t.task_id, t.error, t.company_error
		FROM `+p.from+` WHERE `+where+` AND t.request <> '{}'`, args...)
	list, err := collect(rows, err, func(r Row) (row, error) {
		var x row
		return x, r.Scan(&x.batch, &x.number, &x.vals, &x.taskID, &x.rowErr, &x.companyErr)
	})
	if err != nil {
		return err
	}
	redactError := func(raw *string, pending bool) *string {
		if raw == nil && !pending {
			return nil
		}
		code := enrich.CodeNotFound
		if raw != nil {
			var te enrich.TaskError
			if json.Unmarshal([]byte(*raw), &te) == nil && te.Code != "" {
				code = te.Code
			}
		}
		b, _ := json.Marshal(enrich.TaskError{Code: code, Message: ErasedMarker})
		s := string(b)
		return &s
	}
	for _, x := range list {
		var vals []json.RawMessage
		json.Unmarshal([]byte(x.vals), &vals) // unreadable values are all replaced
		marked := make([]string, len(vals))
		for i := range marked {
			marked[i] = ErasedMarker
		}
		raw, _ := json.Marshal(marked)
		if _, err := tx.Exec(ctx, `UPDATE batch_rows SET vals = ?, request = '{}', error = ?, company_request = NULL, company_error = ?
			WHERE batch_id = ? AND row_number = ?`, string(raw), redactError(x.rowErr, x.taskID == nil),
			redactError(x.companyErr, false), x.batch, x.number); err != nil {
			return err
		}
	}
	e.Removed[p.Name] += int64(len(list))
	return nil
}
