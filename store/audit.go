package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"enrichd/enrich"
)

// The audit log: every access to people's data and every change to who may access it,
// per organization, appended in the transaction of the act it records (a task's
// creation, a key's, a suppression's...), so that the act and its entry commit
// together or not at all. The entries of one organization form a hash chain: each
// carries the hash of the one before it, and its own hash covers every column but the
// subject's text (covered by its keyed seal, so that an erasure blanks the text and
// the chain holds). VerifyAudit walks the chains and names the first entry changed or
// removed behind enrichd's back. Nothing in the store changes an entry but an erasure
// (the registry's Erase, which blanks the subject) and retention (PurgeAudit, which
// deletes the oldest and leaves a checkpoint the chain is verified from).
//
// Who acts is a parameter of every method that records an act (By): the server
// passes the request's API key, dashboard user or MCP client and the request's id;
// the batch feeder the batch; the watch scheduler the watch; the CLI the operator;
// retention the system.

// One chain per organization is appended to by one writer at a time: SQLite's single
// writer orders them, and on PostgreSQL the transaction that appends holds the chain's
// head row (audit_heads, FOR UPDATE) until it commits. A task's creation already holds
// its organization's credit grants that long, and takes the head in the same round
// trip, just after them, so the head adds no wait to the enrichments of one
// organization that they did not have. The head is taken after every other lock of
// its transaction, so it closes no circle of waits. The one exception, a task's
// creation, takes after it only share locks on rows that no transaction holding a head
// deletes (a Loop's and the organization's, by the delivery and ledger rows'
// references) and the row of its day's total of charges, which no such transaction
// writes; where it would write what an erasure writes before its head (an expiry, a
// refund), it takes the head last (askAuditHeadBeforeCharge).

// Actor is who did what an entry records.
type Actor struct {
	Kind string  `json:"kind"`
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

// The kinds of actor.
const (
	ActorKey    = "key"    // an API key: ID the key's, Name its name (its prefix when unnamed)
	ActorUser   = "user"   // a dashboard user: ID the user's, Name their email
	ActorMCP    = "mcp"    // an MCP client, through an API key: ID the key's, Name the key's name and the client's
	ActorBatch  = "batch"  // a batch's row: ID the batch's, Name its file's name
	ActorWatch  = "watch"  // a watch's check: ID the watch's
	ActorCLI    = "cli"    // the operator, with an enrichd command
	ActorSystem = "system" // enrichd itself: retention
)

// The actions an entry records.
const (
	AuditTaskCreated       = "task.created"       // an enrichment: a task made, by any path
	AuditBatchCreated      = "batch.created"      // a batch uploaded
	AuditBatchDownloaded   = "batch.downloaded"   // a batch's results downloaded
	AuditPersonExported    = "person.exported"    // everything held on a person, exported
	AuditPersonErased      = "person.erased"      // a person erased
	AuditSuppressionAdded  = "suppression.added"  // a subject suppressed
	AuditSuppressionLifted = "suppression.lifted" // a suppression lifted
	AuditKeyCreated        = "key.created"        // an API key made
	AuditKeyRevoked        = "key.revoked"        // an API key revoked
	AuditUserAdded         = "user.added"         // a dashboard user added
	AuditUserSignedIn      = "user.signed_in"     // a dashboard sign-in
	AuditPurged            = "audit.purged"       // retention deleted the oldest entries
	AuditWatchCreated      = "watch.created"      // a watch made: its checks are the watch's
	auditActionMaxLen      = len("suppression.lifted")
)

// AuditActions are the actions, in the order the API documents them.
var AuditActions = []string{AuditTaskCreated, AuditBatchCreated, AuditBatchDownloaded, AuditPersonExported, AuditPersonErased,
	AuditSuppressionAdded, AuditSuppressionLifted, AuditKeyCreated, AuditKeyRevoked, AuditUserAdded, AuditUserSignedIn,
	AuditWatchCreated, AuditPurged}

// IsAuditAction reports whether s is one of the actions.
func IsAuditAction(s string) bool {
	for _, a := range AuditActions {
		if a == s {
			return true
		}
	}
	return false
}

// NewAuditEntry is an act to record.
type NewAuditEntry struct {
	OrgID  string // "" for the installation's own acts (the CLI's --all-orgs)
	Action string
	// Actor, when set, is whom the entry names in place of who acts (a sign-in is the
	// user's own act, a suppression its adder's); the request's id is who acts's.
	Actor Actor
	// Subject is whom the act is about, as the request sent it, kept in clear until
	// an erasure; nil when there is none, or when it must not be kept in clear (a
	// suppression's, an erasure's: their entries keep the hash alone). SubjectHash is
	// its keyed hash (enrich.Subjects.Hash of the subject normalized), which finds the
	// entry by person; nil when none.
	Subject     *string
	SubjectHash []byte
	// seal is Subject's seal (subjectSeal) when the caller made it ahead, outside the
	// transaction; nil makes appendAudit make it.
	seal     []byte
	TaskID   *string
	BatchID  *string
	ObjectID *string // what the act made or changed: a key, a user, a suppression, an erasure...
	Credits  int64
	// Detail is the act's own figures, marshaled as a JSON object (counts, a cut); never
	// a person's data.
	Detail any
}

// AuditEntry is one entry of the log. Its JSON is the AuditEntry of the API.
type AuditEntry struct {
	Seq    int64     `json:"seq"` // its place in its organization's chain, from 1
	At     time.Time `json:"at"`
	Actor  Actor     `json:"actor"`
	Action string    `json:"action"`
	// Subject is as sent; nil when the entry has none, or once an erasure blanked it
	// (Erased), when SubjectHash alone names whom it was about.
	Subject     *string         `json:"subject"`
	SubjectHash *string         `json:"subject_hash"` // hex; nil when the entry is about no subject
	TaskID      *string         `json:"task_id"`
	BatchID     *string         `json:"batch_id"`
	ObjectID    *string         `json:"object_id"`
	Credits     int64           `json:"credits"`
	RequestID   *string         `json:"request_id"`
	Detail      json.RawMessage `json:"detail"`
	Erased      bool            `json:"erased"`    // an erasure blanked its subject
	PrevHash    string          `json:"prev_hash"` // hex, the entry before's hash
	Hash        string          `json:"hash"`      // hex

	OrgID string `json:"-"`
}

// By is who acts, and for which request: what the audit entries of an act record.
// Every method of DB that records an act takes it, rather than reading it from the
// context, since every such write needs it.
type By struct {
	Actor     Actor
	RequestID string // "" outside a request
}

// BySystem is enrichd acting on its own (retention), and what an act recorded
// without anyone named is recorded as.
var BySystem = By{Actor: Actor{Kind: ActorSystem}}

// ByOperator is the operator, with an enrichd command.
var ByOperator = By{Actor: Actor{Kind: ActorCLI}}

// UserActor is a dashboard user as an actor: their id and email.
func UserActor(u *User) Actor {
	id, email := u.ID, u.Email
	return Actor{Kind: ActorUser, ID: &id, Name: &email}
}

// KeyActor is an API key as an actor: its name, or its prefix when it has none.
func KeyActor(p *Principal) Actor {
	id, name := p.KeyID, p.KeyName
	return Actor{Kind: ActorKey, ID: &id, Name: &name}
}

// Audit bounds.
const (
	DefaultAuditPage = 25
	MaxAuditPage     = 100
	// MaxAuditExport is the most entries one JSON Lines export carries: a longer log
	// is exported window by window (since, until).
	MaxAuditExport = 100_000
	// auditChunk is how many entries one read of an export or a verification takes:
	// each read is short, so neither holds a read view (or SQLite's log) for long.
	auditChunk = 1000
)

// zeroHash is the hash before a chain's first entry.
var zeroHash = make([]byte, sha256.Size)

// auditRow is an entry as its columns hold it.
type auditRow struct {
	orgID                  string
	seq, at                int64
	actorKind              string
	actorID, actorName     *string
	action                 string
	subject                *string
	subjectHash, seal      []byte
	taskID, batchID, objID *string
	credits                int64
	requestID, detail      *string
	prevHash, hash         []byte
}

// chainHash is the hash of an entry: SHA-256 of a version tag, the hash before it,
// and every column but the subject's text (its seal stands for it), each
// length-prefixed (a NULL told from an empty text), so that no two entries that
// differ in a column hash alike.
func (r *auditRow) chainHash() []byte {
	// Built on the stack: every enrichment hashes one entry in the writer.
	var buf [512]byte
	b := append(buf[:0], "enrichd audit 1\x00"...)
	b = append(b, r.prevHash...)
	b = appendChainText(b, r.orgID)
	b = binary.AppendVarint(b, r.seq)
	b = binary.AppendVarint(b, r.at)
	b = appendChainText(b, r.actorKind)
	b = appendChainOpt(b, r.actorID)
	b = appendChainOpt(b, r.actorName)
	b = appendChainText(b, r.action)
	b = appendChainBlob(b, r.subjectHash)
	b = appendChainBlob(b, r.seal)
	b = appendChainOpt(b, r.taskID)
	b = appendChainOpt(b, r.batchID)
	b = appendChainOpt(b, r.objID)
	b = binary.AppendVarint(b, r.credits)
	b = appendChainOpt(b, r.requestID)
	b = appendChainOpt(b, r.detail)
	sum := sha256.Sum256(b)
	return sum[:]
}

// appendChainText, appendChainOpt and appendChainBlob append a column to what
// chainHash hashes: present (1), its length, its bytes; a NULL is a single 0.
func appendChainText(b []byte, s string) []byte {
	b = binary.AppendUvarint(append(b, 1), uint64(len(s)))
	return append(b, s...)
}

func appendChainOpt(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendChainText(b, *s)
}

func appendChainBlob(b []byte, v []byte) []byte {
	b = binary.AppendUvarint(append(b, 1), uint64(len(v)))
	return append(b, v...)
}

// subjectSeal is the keyed hash of a subject's text as kept: what the chain covers in
// its place.
func subjectSeal(h *enrich.Subjects, text string) []byte {
	sum := h.HashText("audit subject", text)
	return sum[:]
}

// appendAudit appends e to its organization's chain in tx: the head is locked (on
// PostgreSQL; SQLite's writer holds it already), the entry is chained to it, and the
// head moves on. Call it last in the transaction, after every other lock it takes
// (see the top of this file); a transaction that appends to several chains appends in
// the order of their organizations' ids.
func (db *DB) appendAudit(ctx context.Context, tx Tx, by By, e NewAuditEntry) error {
	return db.appendAuditAt(ctx, tx, by, e, nil)
}

// appendAuditAt is appendAudit on the head askAuditHeadBeforeCharge read, which the
// transaction holds already; nil, or a head not read there, is read here.
func (db *DB) appendAuditAt(ctx context.Context, tx Tx, by By, e NewAuditEntry, head *auditHead) error {
	if e.Actor.Kind == "" {
		e.Actor = by.Actor
	}
	if e.Actor.Kind == "" {
		e.Actor = BySystem.Actor
	}
	r := auditRow{orgID: e.OrgID, at: ms(db.now()), actorKind: e.Actor.Kind, actorID: e.Actor.ID, actorName: e.Actor.Name,
		action: e.Action, subject: e.Subject, subjectHash: noSubject, seal: noSubject,
		taskID: e.TaskID, batchID: e.BatchID, objID: e.ObjectID, credits: e.Credits}
	if len(e.SubjectHash) > 0 {
		r.subjectHash = e.SubjectHash
	}
	if e.Subject != nil && e.seal != nil {
		r.seal = e.seal
	} else if e.Subject != nil {
		h, err := db.hasher()
		if err != nil {
			return err
		}
		r.seal = subjectSeal(h, *e.Subject)
	}
	if by.RequestID != "" {
		r.requestID = &by.RequestID
	}
	if e.Detail != nil {
		raw, err := json.Marshal(e.Detail)
		if err != nil {
			return fmt.Errorf("an audit entry's detail: %w", err)
		}
		s := string(raw)
		r.detail = &s
	}
	if head == nil || !head.found {
		var err error
		if head, err = lockAuditHead(ctx, tx, e.OrgID); err != nil {
			return err
		}
	}
	r.seq, r.prevHash = head.seq, head.hash
	headAt := head.at
	// Time never goes back along a chain, whatever the clock of the replica that
	// appends: the primary key's order is the chain's.
	r.seq, r.at = r.seq+1, max(r.at, headAt)
	r.hash = r.chainHash()
	// The insert's trigger moves the head to the entry.
	return tx.ExecLater(ctx, `INSERT INTO audit_log (org_id, at, seq, actor_kind, actor_id, actor_name, action, subject,
		subject_hash, subject_seal, task_id, batch_id, object_id, credits, request_id, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.orgID, r.at, r.seq, r.actorKind, r.actorID, r.actorName, r.action, r.subject, r.subjectHash, r.seal,
		r.taskID, r.batchID, r.objID, r.credits, r.requestID, r.detail, r.prevHash, r.hash)
}

// RecordAudit appends e in a transaction of its own: for an act that is not a write of
// the store (a download of a batch's results), recorded before it is done.
func (db *DB) RecordAudit(ctx context.Context, by By, e NewAuditEntry) error {
	return db.Write(ctx, func(tx Tx) error { return db.appendAudit(ctx, tx, by, e) })
}

// auditHead is the head of an organization's chain: the last entry's place, time and
// hash (0, 0 and zeroHash before the first), read under its lock; found is false when
// the chain has no head yet.
type auditHead struct {
	seq, at int64
	hash    []byte
	found   bool
}

const lockAuditHeadQuery = `SELECT seq, at, hash FROM audit_heads WHERE org_id = ? FOR UPDATE`

// askAuditHeadBeforeCharge asks for the head of orgID's chain (Tx.QueryLater) in a
// task's creation, with its grants and before its charge: read with the transaction's
// next statement and locked from then to its end, there once Tx.Flush has returned.
// The charge then writes its day's total of charges (credit_days, by the ledger's
// trigger), which no transaction that takes a head writes. A grant whose time has run
// out would be written off, in its day's total of expiries, which an erasure writes
// before it takes the head (refunding a task charged from an expired grant): then the
// head is not read here, and appendAuditAt takes it last, as every other transaction
// does, so no two wait for each other. A task refunded at once (failed here) does not
// ask. A chain without a head yet is given one by appendAuditAt.
func (db *DB) askAuditHeadBeforeCharge(ctx context.Context, tx Tx, orgID string, now time.Time) (*auditHead, error) {
	head := &auditHead{}
	scan := func(r Row) error {
		head.found = true
		return r.Scan(&head.seq, &head.at, &head.hash)
	}
	if db.SingleWriter() { // one writer: no other transaction waits
		return head, tx.QueryLater(ctx, scan, lockAuditHeadQuery, orgID)
	}
	return head, tx.QueryLater(ctx, scan, `SELECT seq, at, hash FROM audit_heads WHERE org_id = ?
		AND NOT EXISTS (SELECT 1 FROM credit_grants WHERE org_id = ? AND expired_at IS NULL AND expires_at <= ?)
		FOR UPDATE`, orgID, orgID, ms(now))
}

// lockAuditHead reads, and on PostgreSQL locks, the head of orgID's chain. A chain's
// head is made by its first entry: two transactions making it at once meet on its
// primary key, and the second then waits for the first and reads the head it left.
func lockAuditHead(ctx context.Context, tx Tx, orgID string) (*auditHead, error) {
	for attempt := 0; ; attempt++ {
		head := &auditHead{found: true}
		err := tx.QueryRow(ctx, lockAuditHeadQuery, orgID).Scan(&head.seq, &head.at, &head.hash)
		if !errors.Is(err, ErrNoRows) || attempt > 0 {
			return head, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO audit_heads (org_id, seq, at, hash, base_seq, base_at, base_hash)
			VALUES (?, 0, 0, ?, 0, 0, ?) ON CONFLICT (org_id) DO NOTHING`, orgID, zeroHash, zeroHash); err != nil {
			return nil, err
		}
	}
}

// AuditFilter selects entries of an organization's log. Empty fields do not filter.
type AuditFilter struct {
	Action      string
	SubjectHash []byte // the keyed hash of one subject
	Since       time.Time
	Until       time.Time // exclusive
}

const auditColumns = `org_id, seq, at, actor_kind, actor_id, actor_name, action, subject, subject_hash, subject_seal,
	task_id, batch_id, object_id, credits, request_id, detail, prev_hash, hash`

func scanAuditRow(row Row) (*auditRow, error) {
	var r auditRow
	err := row.Scan(&r.orgID, &r.seq, &r.at, &r.actorKind, &r.actorID, &r.actorName, &r.action, &r.subject, &r.subjectHash,
		&r.seal, &r.taskID, &r.batchID, &r.objID, &r.credits, &r.requestID, &r.detail, &r.prevHash, &r.hash)
	return &r, err
}

// entry is the row as the API shows it.
func (r *auditRow) entry() *AuditEntry {
	e := &AuditEntry{Seq: r.seq, At: fromMS(r.at), Actor: Actor{Kind: r.actorKind, ID: r.actorID, Name: r.actorName},
		Action: r.action, Subject: r.subject, TaskID: r.taskID, BatchID: r.batchID, ObjectID: r.objID, Credits: r.credits,
		RequestID: r.requestID, Erased: r.subject == nil && len(r.seal) > 0, PrevHash: hex.EncodeToString(r.prevHash),
		Hash: hex.EncodeToString(r.hash), OrgID: r.orgID}
	if len(r.subjectHash) > 0 {
		h := hex.EncodeToString(r.subjectHash)
		e.SubjectHash = &h
	}
	if r.detail != nil {
		e.Detail = json.RawMessage(*r.detail)
	}
	return e
}

// auditQuery is the statement that selects the entries of f for one organization, in
// order (newest first, or oldest first for an export, after the entry after when it is
// set), and its arguments but the LIMIT and OFFSET it ends with. Each filter walks
// the range of an index, named where the engine can be told (Driver.IndexedBy): the
// subject's (audit_log_subject), the action's (audit_log_org_action, which holds every
// action but enrichments), or the primary key, the organization's entries by time
// (enrichments, most of them); the time range bounds the walk, and a filter the index
// lacks is checked on the rows it reaches.
func (db *DB) auditQuery(orgID string, f AuditFilter, oldestFirst bool, after *auditRow) (string, []any) {
	var where []string
	var args []any
	from := "audit_log"
	switch {
	case len(f.SubjectHash) > 0:
		from = db.IndexedBy("audit_log", "audit_log_subject")
		where, args = append(where, "subject_hash = ?", "org_id = ?"), append(args, f.SubjectHash, orgID)
		if f.Action != "" {
			where, args = append(where, "action = ?"), append(args, f.Action)
		}
	case f.Action != "" && f.Action != AuditTaskCreated:
		// The index holds every action but enrichments: the condition, written as the
		// index's, lets the engine use it.
		from = db.IndexedBy("audit_log", "audit_log_org_action")
		where, args = append(where, "org_id = ?", "action = ?", "action <> '"+AuditTaskCreated+"'"), append(args, orgID, f.Action)
	case f.Action != "":
		where, args = append(where, "org_id = ?", "action = ?"), append(args, orgID, f.Action)
	default:
		where, args = append(where, "org_id = ?"), append(args, orgID)
	}
	// One lower bound, the tighter: an export's cursor is past since already.
	switch {
	case after != nil:
		where, args = append(where, "(at, seq) > (?, ?)"), append(args, after.at, after.seq)
	case !f.Since.IsZero():
		where, args = append(where, "at >= ?"), append(args, ms(f.Since))
	}
	if !f.Until.IsZero() {
		where, args = append(where, "at < ?"), append(args, ms(f.Until))
	}
	order := " ORDER BY at DESC, seq DESC"
	if oldestFirst {
		order = " ORDER BY at, seq"
	}
	return `SELECT ` + auditColumns + ` FROM ` + from + ` WHERE ` + strings.Join(where, " AND ") + order + ` LIMIT ? OFFSET ?`, args
}

// AuditQueries are the statements of the log's reads, by name, with arguments of the
// right types: each driver's tests check that every one reads an index's range.
func (db *DB) AuditQueries() map[string]struct {
	Query string
	Args  []any
} {
	out := map[string]struct {
		Query string
		Args  []any
	}{}
	since, until := time.UnixMilli(1000), time.UnixMilli(2000)
	hash := bytes.Repeat([]byte{1}, sha256.Size)
	cursor := &auditRow{at: 1500, seq: 3}
	for name, f := range map[string]AuditFilter{
		"all": {}, "action": {Action: AuditKeyRevoked}, "subject": {SubjectHash: hash}, "enrichments": {Action: AuditTaskCreated},
		"enrichments between": {Action: AuditTaskCreated, Since: since, Until: until},
		"since":               {Since: since}, "until": {Until: until}, "between": {Since: since, Until: until},
		"action between":  {Action: AuditKeyCreated, Since: since, Until: until},
		"subject action":  {SubjectHash: hash, Action: AuditTaskCreated},
		"subject between": {SubjectHash: hash, Since: since, Until: until},
	} {
		q, args := db.auditQuery("o", f, false, nil)
		out["ListAudit "+name] = struct {
			Query string
			Args  []any
		}{q, append(args, 26, 0)}
		q, args = db.auditQuery("o", f, true, cursor)
		out["ExportAudit "+name] = struct {
			Query string
			Args  []any
		}{q, append(args, auditChunk, 0)}
	}
	out["VerifyAudit"] = struct {
		Query string
		Args  []any
	}{verifyAuditQuery, []any{"o", int64(0), int64(0), auditChunk}}
	out["PurgeAudit"] = struct {
		Query string
		Args  []any
	}{purgeAuditQuery, []any{"o", int64(0), int64(0), 500}}
	return out
}

// ListAudit returns a page of the organization's entries that f selects, newest
// first, and whether there are more after it: the log is not counted, which would
// read every entry of three years at each page.
func (db *DB) ListAudit(ctx context.Context, orgID string, f AuditFilter, page, pageSize int) ([]*AuditEntry, bool, error) {
	q, args := db.auditQuery(orgID, f, false, nil)
	rows, err := db.Reader().Query(ctx, q, append(args, pageSize+1, page*pageSize)...)
	list, err := collect(rows, err, scanAuditRow)
	if err != nil {
		return nil, false, err
	}
	more := len(list) > pageSize
	if more {
		list = list[:pageSize]
	}
	out := make([]*AuditEntry, len(list))
	for i, r := range list {
		out[i] = r.entry()
	}
	return out, more, nil
}

// ExportAudit calls fn with each of the organization's entries that f selects, oldest
// first, at most max of them (MaxAuditExport when 0), read a chunk at a time: each
// read is short, and fn may take its time (write to a client) between them. It
// returns how many it gave fn; an error of fn stops it.
func (db *DB) ExportAudit(ctx context.Context, orgID string, f AuditFilter, max int, fn func(*AuditEntry) error) (int, error) {
	if max <= 0 {
		max = MaxAuditExport
	}
	n := 0
	var after *auditRow
	for n < max {
		want := min(auditChunk, max-n)
		q, args := db.auditQuery(orgID, f, true, after)
		rows, err := db.Reader().Query(ctx, q, append(args, want, 0)...)
		list, err := collect(rows, err, scanAuditRow)
		if err != nil {
			return n, err
		}
		for _, r := range list {
			if err := fn(r.entry()); err != nil {
				return n, err
			}
			n++
		}
		if len(list) < want {
			break
		}
		after = list[len(list)-1]
	}
	return n, nil
}

// AuditHead is the state of one organization's chain: its last entry and the
// checkpoint retention left.
type AuditHead struct {
	OrgID    string `json:"org_id"`
	Seq      int64  `json:"seq"`
	At       int64  `json:"-"`
	Hash     string `json:"hash"`
	BaseSeq  int64  `json:"base_seq"`
	BaseAt   int64  `json:"-"`
	BaseHash string `json:"base_hash"`
}

// AuditHeads reads the head of every chain (orgID "" and all), or of one.
func (db *DB) AuditHeads(ctx context.Context, orgID string, all bool) ([]AuditHead, error) {
	return auditHeads(ctx, db.Reader(), orgID, all)
}

func auditHeads(ctx context.Context, rd Executor, orgID string, all bool) ([]AuditHead, error) {
	q, args := `SELECT org_id, seq, at, hash, base_seq, base_at, base_hash FROM audit_heads ORDER BY org_id`, []any(nil)
	if !all {
		q, args = `SELECT org_id, seq, at, hash, base_seq, base_at, base_hash FROM audit_heads WHERE org_id = ?`, []any{orgID}
	}
	rows, err := rd.Query(ctx, q, args...)
	return collect(rows, err, func(r Row) (AuditHead, error) {
		var h AuditHead
		var hash, base []byte
		err := r.Scan(&h.OrgID, &h.Seq, &h.At, &hash, &h.BaseSeq, &h.BaseAt, &base)
		h.Hash, h.BaseHash = hex.EncodeToString(hash), hex.EncodeToString(base)
		return h, err
	})
}

// verifyAuditQuery reads a chain in its order, the primary key's, from after an entry
// (its time and place).
const verifyAuditQuery = `SELECT ` + auditColumns + ` FROM audit_log WHERE org_id = ? AND (at, seq) > (?, ?) ORDER BY at, seq LIMIT ?`

// AuditProblem is the first thing wrong with a chain: the entry it is found at (its
// place in the chain; a missing one's place too) and what is wrong.
type AuditProblem struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
}

// AuditChain is what a verification found of one organization's chain.
type AuditChain struct {
	OrgID    string    `json:"org_id"`
	Entries  int64     `json:"entries"` // the entries read
	FirstSeq int64     `json:"first_seq"`
	Head     AuditHead `json:"head"`
	// Erased counts the entries whose subject an erasure blanked; Unsealed those whose
	// subject could not be checked against its seal, for want of the secret key file.
	Erased   int64 `json:"erased"`
	Unsealed int64 `json:"unchecked_subjects"`
	// Bad is the first entry found changed or removed; nil when the chain holds.
	Bad *AuditProblem `json:"bad"`
}

// VerifyAudit walks the chain of the organization orgID ("" the installation's), or of
// every organization with all, from its checkpoint to its head, and reports for each
// the first entry changed or removed behind enrichd's back: an entry whose hash is not
// that of its columns, whose previous hash is not the hash of the entry before, a
// place in the chain missing, entries missing at its end, a subject whose text is not
// the one its seal was made of (checked with the secret key file), a subject blanked
// without an erasure recorded after it, or a checkpoint retention did not record. It
// reads a chunk of entries at a time. Each chain is read in one read transaction, its
// head and its entries from one view, so that entries appended or purged by retention
// while it is walked (a running serve, another replica) are not taken for changes.
func (db *DB) VerifyAudit(ctx context.Context, orgID string, all bool) ([]AuditChain, error) {
	heads, err := db.AuditHeads(ctx, orgID, all)
	if err != nil {
		return nil, err
	}
	// A chain whose head is gone is still walked: from nothing, to a head of nothing,
	// so that its entries show as added behind enrichd's back.
	q, args := `SELECT org_id FROM audit_log GROUP BY org_id`, []any(nil)
	if !all {
		q, args = `SELECT org_id FROM audit_log WHERE org_id = ? LIMIT 1`, []any{orgID}
	}
	rows, err := db.Reader().Query(ctx, q, args...)
	orgs, err := collect(rows, err, func(r Row) (o string, err error) { return o, r.Scan(&o) })
	if err != nil {
		return nil, err
	}
	for _, h := range heads {
		if !slices.Contains(orgs, h.OrgID) {
			orgs = append(orgs, h.OrgID)
		}
	}
	slices.Sort(orgs)
	var out []AuditChain
	for _, o := range orgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var c AuditChain
		err := db.Read(ctx, func(rd Executor) error {
			heads, err := auditHeads(ctx, rd, o, false)
			if err != nil {
				return err
			}
			head := AuditHead{OrgID: o, Hash: hex.EncodeToString(zeroHash), BaseHash: hex.EncodeToString(zeroHash)}
			if len(heads) == 1 {
				head = heads[0]
			}
			c, err = db.verifyChain(ctx, rd, head)
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (db *DB) verifyChain(ctx context.Context, rd Executor, head AuditHead) (AuditChain, error) {
	c := AuditChain{OrgID: head.OrgID, Head: head}
	fail := func(seq int64, format string, args ...any) (AuditChain, error) {
		c.Bad = &AuditProblem{Seq: seq, Problem: fmt.Sprintf(format, args...)}
		return c, nil
	}
	prev, err := hex.DecodeString(head.BaseHash)
	if err != nil {
		return c, err
	}
	seq, at := head.BaseSeq, head.BaseAt
	var lastErasure, lastBlanked int64
	var lastPurge *auditRow
	for {
		if err := ctx.Err(); err != nil { // a long walk is still stopped when asked
			return c, err
		}
		rows, err := rd.Query(ctx, verifyAuditQuery, head.OrgID, at, seq, auditChunk)
		list, err := collect(rows, err, scanAuditRow)
		if err != nil {
			return c, err
		}
		for _, r := range list {
			if c.Entries == 0 {
				c.FirstSeq = r.seq
			}
			c.Entries++
			if r.seq != seq+1 {
				if seq+1 == r.seq-1 {
					return fail(seq+1, "entry %d is missing: it was removed", seq+1)
				}
				return fail(seq+1, "entries %d to %d are missing: they were removed", seq+1, r.seq-1)
			}
			if !bytes.Equal(r.prevHash, prev) {
				if seq == head.BaseSeq && seq > 0 {
					return fail(r.seq, "entry %d does not follow the checkpoint retention left at entry %d: the checkpoint or the entry was changed", r.seq, seq)
				}
				return fail(seq, "entry %d was changed: entry %d, which follows it, holds another hash for it", seq, r.seq)
			}
			if !hmac.Equal(r.chainHash(), r.hash) {
				return fail(r.seq, "entry %d was changed: its hash is not that of what it holds", r.seq)
			}
			switch {
			case r.subject != nil && len(r.seal) == 0:
				return fail(r.seq, "entry %d was changed: it shows a subject it was written without", r.seq)
			case r.subject != nil && db.subjects == nil:
				c.Unsealed++
			case r.subject != nil && !hmac.Equal(subjectSeal(db.subjects, *r.subject), r.seal):
				return fail(r.seq, "entry %d was changed: its subject is not the one it was written with", r.seq)
			case r.subject == nil && len(r.seal) > 0:
				c.Erased++
				lastBlanked = r.seq
			}
			switch r.action {
			case AuditPersonErased:
				lastErasure = r.seq
			case AuditPurged:
				lastPurge = r
			}
			seq, at, prev = r.seq, r.at, r.hash
		}
		if len(list) < auditChunk {
			break
		}
	}
	switch {
	case seq+1 == head.Seq:
		return fail(seq+1, "entry %d, the last of the chain, is missing: it was removed", seq+1)
	case seq < head.Seq:
		return fail(seq+1, "entries %d to %d, the last of the chain, are missing: they were removed", seq+1, head.Seq)
	case seq > head.Seq:
		return fail(head.Seq+1, "entries %d to %d follow the chain's head: they were added, or the head was changed", head.Seq+1, seq)
	case !bytes.Equal(prev, mustHex(head.Hash)):
		return fail(seq, "entry %d, the last, was changed: the chain's head holds another hash", seq)
	}
	if lastBlanked > lastErasure {
		return fail(lastBlanked, "entry %d's subject was removed, and no erasure is recorded after it", lastBlanked)
	}
	if head.BaseSeq > 0 {
		var cut auditCut
		if lastPurge == nil || lastPurge.detail == nil || json.Unmarshal([]byte(*lastPurge.detail), &cut) != nil ||
			cut.Through != head.BaseSeq || cut.Hash != head.BaseHash {
			return fail(head.BaseSeq+1, "the chain starts after entry %d, but no purge by retention recorded that cut: entries before were removed", head.BaseSeq)
		}
	}
	return c, nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// purgeAuditQuery reads the oldest entries of a chain, from its checkpoint on.
const purgeAuditQuery = `SELECT seq, at, hash FROM audit_log WHERE org_id = ? AND (at, seq) > (?, ?) ORDER BY at, seq LIMIT ?`

// auditPurgeSlack is how far past the cutoff a chain's oldest entry must be before
// PurgeAudit cuts it: a chain is then cut about once a day, each cut recorded by one
// entry, rather than at every round of maintenance.
const auditPurgeSlack = 24 * time.Hour

// PurgeAudit deletes, chain by chain, up to limit of the oldest entries written before
// cutoff, in a short transaction for each chain, and returns how many it deleted. A
// chain is cut once its oldest entry is a day past cutoff (auditPurgeSlack), in its
// order, up to its first entry written at cutoff or later; the checkpoint (the last
// entry deleted, its place and hash) is kept in the chain's head, and an entry
// recording the cut is appended in the same transaction, so that the chain is verified
// from the checkpoint on and a cut that retention did not make shows. Call it again
// until it deletes fewer than limit.
func (db *DB) PurgeAudit(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	heads, err := db.AuditHeads(ctx, "", true)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, h := range heads {
		var n int
		err := db.Write(ctx, func(tx Tx) error {
			n = 0
			var baseSeq, baseAt int64
			if err := tx.QueryRow(ctx, `SELECT base_seq, base_at FROM audit_heads WHERE org_id = ? FOR UPDATE`, h.OrgID).
				Scan(&baseSeq, &baseAt); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, purgeAuditQuery, h.OrgID, baseAt, baseSeq, limit)
			type cut struct {
				seq, at int64
				hash    []byte
			}
			oldest, err := collect(rows, err, func(r Row) (cut, error) {
				var c cut
				return c, r.Scan(&c.seq, &c.at, &c.hash)
			})
			if err != nil || len(oldest) == 0 || oldest[0].at >= ms(cutoff.Add(-auditPurgeSlack)) {
				return err
			}
			last := 0
			for i, c := range oldest {
				if c.at >= ms(cutoff) {
					break
				}
				last = i
			}
			through := oldest[last]
			if _, err := tx.Exec(ctx, `DELETE FROM audit_log WHERE org_id = ? AND (at, seq) <= (?, ?)`, h.OrgID, through.at, through.seq); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE audit_heads SET base_seq = ?, base_at = ?, base_hash = ? WHERE org_id = ?`,
				through.seq, through.at, through.hash, h.OrgID); err != nil {
				return err
			}
			n = last + 1
			return db.appendAudit(ctx, tx, BySystem, NewAuditEntry{OrgID: h.OrgID, Action: AuditPurged,
				Detail: auditCut{Through: through.seq, Hash: hex.EncodeToString(through.hash)}})
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// auditCut is the detail of an audit.purged entry: the last entry deleted. Its JSON is
// what VerifyAudit compares the chain's checkpoint with.
type auditCut struct {
	Through int64  `json:"through"`
	Hash    string `json:"hash"`
}

// eraseAudit blanks the subject of the entries about the person in the erasure's
// scope: an entry stays, named by the subject's hash, and its chain holds, its seal
// standing for the text. It is the registry's Erase of audit_log; the chains it
// blanked are noted for the erasure's own entries (recordErasure).
func eraseAudit(ctx context.Context, tx Tx, p PersonalTable, e *Erasing) error {
	where, args := p.where(e.Hashes, e.OrgID, e.AllOrgs)
	rows, err := tx.Query(ctx, `SELECT DISTINCT t.org_id FROM `+p.from+` WHERE `+where+` AND t.subject IS NOT NULL`, args...)
	orgs, err := collect(rows, err, func(r Row) (o string, err error) { return o, r.Scan(&o) })
	if err != nil || len(orgs) == 0 {
		return err
	}
	n, err := tx.Exec(ctx, `UPDATE audit_log SET subject = NULL WHERE (org_id, at, seq) IN (SELECT t.org_id, t.at, t.seq FROM `+
		p.from+` WHERE `+where+` AND t.subject IS NOT NULL)`, args...)
	if err != nil {
		return err
	}
	e.Removed[p.Name] += n
	for _, o := range orgs {
		if !slices.Contains(e.AuditChains, o) {
			e.AuditChains = append(e.AuditChains, o)
		}
	}
	return nil
}

// recordErasure appends the erasure's entry, last in its transaction: to the chain of
// the organization that asked (the installation's, for every organization), and to
// each other chain whose entries it blanked, in the order of the organizations' ids.
// The entries name the person by the hash of what was asked alone.
func (db *DB) recordErasure(ctx context.Context, tx Tx, by By, e *Erasing, er *Erasure) error {
	chains := append([]string{er.OrgID}, e.AuditChains...)
	slices.Sort(chains)
	chains = slices.Compact(chains)
	for _, org := range chains {
		id := er.ID
		// What it removed is told to the chain that asked: an erasure of every
		// organization counts every organization's rows.
		detail := map[string]any{"kind": er.Kind, "all_orgs": er.AllOrgs}
		if org == er.OrgID {
			detail["removed"], detail["loops"] = er.Removed, len(er.Loops)
		}
		if err := db.appendAudit(ctx, tx, by, NewAuditEntry{OrgID: org, Action: AuditPersonErased, SubjectHash: er.Hash,
			ObjectID: &id, Detail: detail}); err != nil {
			return err
		}
	}
	return nil
}
