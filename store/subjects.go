package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"enrichd/enrich"
)

// The people and companies rows are about are named by keyed hashes of their
// identifiers (enrich.Subjects): every table that holds a person's data keeps the
// hashes of whom each row is about, in subject_hash (what was asked) and answer_hash
// (whom the data turned out to be about, where that differs), each indexed, so that
// everything about one person is a lookup on each table (the registry, privacy.go).
// An empty hash marks a row that names no subject; NULL, a row not hashed yet
// (HashSubjects).

// WithSubjectKey gives the store the key of subjects' hashes (secret.Box.SubjectKey).
// Without it the database can be read, but no row about a person can be written or
// checked: those operations fail with ErrNoSubjectKey.
func WithSubjectKey(key []byte) Option {
	return func(o *Options) { o.SubjectKey = append([]byte(nil), key...) }
}

// ErrNoSubjectKey is an operation on people's data in a database opened without the
// subject key.
var ErrNoSubjectKey = errors.New("this needs the secret key file (--secret-key-file): the people and companies enrichd holds data about " +
	"are named in the database by keyed hashes under it, and the same file must be given to every process that uses the database")

// Subjects is the hasher of subjects, nil when the database was opened without the
// subject key.
func (db *DB) Subjects() *enrich.Subjects { return db.subjects }

// SetSubjects gives a DB made around a driver, rather than by Open, the hasher of
// subjects (a test's wrapper of a driver). Call it before the DB is used.
func (db *DB) SetSubjects(s *enrich.Subjects) { db.subjects = s }

// SubjectKeyID names a subject key without giving anything of it away.
func SubjectKeyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("enrichd subject key id\x00"), key...))
	return hex.EncodeToString(sum[:6])
}

// claimSubjectKey records the key the database's subjects are hashed under, the first
// time one is given, and refuses another: its hashes would name nobody the rows
// name, and no suppression would hold.
//
// A database that cannot take the write now (read-only, a full disk) is checked by a
// read alone: it opens, answering writes storage_unavailable as it does, and the key
// is recorded by a later start.
func (db *DB) claimSubjectKey(ctx context.Context, key []byte) error {
	id := SubjectKeyID(key)
	held, err := subjectKeys(ctx, db.Reader())
	if err != nil {
		return err
	}
	if len(held) == 0 {
		err = db.Write(ctx, func(tx Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO subject_key (id, created_at) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM subject_key)
				ON CONFLICT (id) DO NOTHING`, id, ms(db.now())); err != nil {
				return err
			}
			held, err = subjectKeys(ctx, tx)
			return err
		})
		if IsStorageFault(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if len(held) != 1 || held[0] != id {
		return fmt.Errorf("this database names the people it holds data about by hashes under another secret key file (key id %s; the file given has %s): "+
			"give every process the file the database was first served with; if that file is lost, see docs/privacy.md", strings.Join(held, ", "), id)
	}
	return nil
}

// subjectKeys reads the ids of subject_key.
func subjectKeys(ctx context.Context, q Executor) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM subject_key ORDER BY id`)
	return collect(rows, err, func(r Row) (s string, err error) { return s, r.Scan(&s) })
}

// hasher is Subjects, or ErrNoSubjectKey.
func (db *DB) hasher() (*enrich.Subjects, error) {
	if db.subjects == nil {
		return nil, ErrNoSubjectKey
	}
	return db.subjects, nil
}

// noSubject is the hash column of a row that names no subject: empty, which is not
// NULL (a row not hashed yet).
var noSubject = []byte{}

// hashOf is the column value of sub's hash, noSubject when ok is false.
func hashOf(h *enrich.Subjects, sub enrich.Subject, ok bool) []byte {
	if !ok {
		return noSubject
	}
	sum := h.Hash(sub)
	return sum[:]
}

// inputHash is the hash of the one subject an input is about (enrich.InputSubject).
func inputHash(h *enrich.Subjects, in enrich.Input) []byte {
	sub, ok := enrich.InputSubject(in)
	return hashOf(h, sub, ok)
}

// resultHash is the hash of whom a result is about (enrich.ResultSubject).
func resultHash(h *enrich.Subjects, res enrich.Result) []byte {
	sub, ok := enrich.ResultSubject(res)
	return hashOf(h, sub, ok)
}

// resultJSONHash is resultHash of a company or a person as the store keeps it (JSON):
// its profile URL or its domain are all it reads of it. objectType "" tells them apart
// by the fields only a person has (a task's result, kept without its type).
func resultJSONHash(h *enrich.Subjects, objectType string, data []byte) []byte {
	if len(data) == 0 {
		return noSubject
	}
	var who struct {
		NetworkURL *string         `json:"network_url"`
		Domain     *string         `json:"domain"`
		FullName   json.RawMessage `json:"full_name"`
		Positions  json.RawMessage `json:"positions"`
	}
	if json.Unmarshal(data, &who) != nil {
		return noSubject
	}
	if objectType == "" && (who.FullName != nil || who.Positions != nil) {
		objectType = enrich.ObjectPerson
	}
	if objectType == enrich.ObjectPerson {
		return resultHash(h, enrich.Result{Person: &enrich.Person{NetworkURL: who.NetworkURL}})
	}
	return resultHash(h, enrich.Result{Company: &enrich.Company{Domain: who.Domain}})
}

// keyHash is the hash of the identifier a record key names (see RecordKey): an
// address, a profile, a domain; a company's page names none. A key Key shortened is
// not read back: the record's own subject, fallback, stands for it.
func keyHash(h *enrich.Subjects, key string, fallback []byte) []byte {
	kind, value, ok := strings.Cut(key, ":")
	if !ok || len(key) >= maxIndexedText {
		return fallback
	}
	switch kind {
	case "email":
		return hashOf(h, enrich.Subject{Kind: enrich.SubjectEmail, Value: value}, true)
	case "person":
		return hashOf(h, enrich.Subject{Kind: enrich.SubjectProfile, Value: value}, true)
	case "domain":
		return hashOf(h, enrich.Subject{Kind: enrich.SubjectDomain, Value: value}, true)
	}
	return noSubject
}

// answerColumn is answer_hash: whom the data is about, where that differs from the
// subject asked; NULL when it does not, or there is none.
func answerColumn(subject, answer []byte) any {
	if len(answer) == 0 || bytes.Equal(subject, answer) {
		return nil
	}
	return answer
}
