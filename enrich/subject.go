package enrich

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"
)

// A subject is the person or company a row of the database is about, named by keyed
// hashes of its identifiers, never by the identifiers themselves: the hash of an
// address finds every row about that address (an export, an erasure) and tells
// whether it is suppressed, and a copy of the hashes alone gives none of them back.

// SubjectKind is which identifier of a subject a hash names.
type SubjectKind string

const (
	SubjectEmail   SubjectKind = "email"   // a work email address
	SubjectProfile SubjectKind = "profile" // a person's profile URL on the network
	SubjectDomain  SubjectKind = "domain"  // a company's registrable domain
)

// SubjectKinds are the kinds, in the order the API lists them.
var SubjectKinds = []SubjectKind{SubjectEmail, SubjectProfile, SubjectDomain}

// Subject is one identifier of a person or a company, in its normalized form (see
// Normalizer.Subject): the form a task's target has.
type Subject struct {
	Kind  SubjectKind
	Value string
}

// SubjectHashSize is the length of a subject's hash, in bytes: HMAC-SHA256.
const SubjectHashSize = sha256.Size

// SubjectHash is the keyed hash of one identifier.
type SubjectHash [SubjectHashSize]byte

// String is the hash in hexadecimal: what a log line may name a subject by.
func (h SubjectHash) String() string { return hex.EncodeToString(h[:]) }

// Subject normalizes raw as the identifier kind, as the enrichment endpoints
// normalize their inputs: an address's domain to its registrable form, a profile URL
// to its target form (https://HOST/in/<slug>), a domain to its registrable host.
func (n Normalizer) Subject(kind SubjectKind, raw string) (Subject, error) {
	var v string
	var err error
	switch kind {
	case SubjectEmail:
		v, err = n.Email(raw)
	case SubjectProfile:
		v, err = n.PersonURL(raw)
	case SubjectDomain:
		v, err = n.Domain(raw)
	default:
		return Subject{}, Errorf(KindInvalid, "a subject is an email, a profile URL or a domain, not %q", kind)
	}
	return Subject{Kind: kind, Value: v}, err
}

// canonical is the text a subject's hash is made of: its kind and its value in the
// one form that names it, whatever form it was written in. An address is its mailbox
// (AddressKey: the local part without case or +tag), so that Jane.Doe@acme.com and
// jane.doe+news@acme.com are one subject, as the store keeps addresses. A profile is
// its path (/in/<slug>): the network's host is the installation's (--network-host),
// the same for every profile it holds, so a row can be hashed without knowing it.
func (s Subject) canonical() string {
	v := s.Value
	switch s.Kind {
	case SubjectEmail:
		v = AddressKey(v)
	case SubjectProfile:
		if i := strings.Index(v, "/in/"); i >= 0 {
			v = v[i:]
		}
		v = strings.ToLower(v)
	case SubjectDomain:
		v = strings.ToLower(strings.TrimSuffix(v, "."))
	}
	return string(s.Kind) + "\x00" + v
}

// ProfileSubject is the subject of a profile URL kept as a client sent it, on
// whatever host of the network it names: the store reads its old rows with it, not
// knowing the host the installation was configured with when they were written.
func ProfileSubject(raw string) (Subject, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Hostname() == "" {
		return Subject{}, false
	}
	s, err := Normalizer{NetworkHost: u.Hostname()}.Subject(SubjectProfile, raw)
	return s, err == nil
}

// InputSubjects are the subjects an input names before any source is asked: an
// address and its domain (a domain's suppression covers every address at it), a
// profile, a domain. A company's page names none: which company it is, and so its
// domain, is known only from its record.
func InputSubjects(in Input) []Subject {
	switch in.Lookup {
	case LookupEmail:
		out := []Subject{{Kind: SubjectEmail, Value: in.Target}}
		if at := strings.LastIndexByte(in.Target, '@'); at >= 0 {
			out = append(out, Subject{Kind: SubjectDomain, Value: in.Target[at+1:]})
		}
		return out
	case LookupPersonURL:
		return []Subject{{Kind: SubjectProfile, Value: in.Target}}
	case LookupDomain:
		return []Subject{{Kind: SubjectDomain, Value: in.Target}}
	}
	return nil
}

// InputSubject is the one subject a task's input is about, as its rows are found by:
// the address, the profile or the domain it names; ok is false for a company's page.
func InputSubject(in Input) (Subject, bool) {
	if s := InputSubjects(in); len(s) > 0 {
		return s[0], true
	}
	return Subject{}, false
}

// ResultSubject is whom a result is about: a person's profile, a company's canonical
// domain. ok is false for a record that has neither.
func ResultSubject(res Result) (Subject, bool) {
	switch {
	case res.Person != nil && res.Person.NetworkURL != nil && *res.Person.NetworkURL != "":
		return Subject{Kind: SubjectProfile, Value: *res.Person.NetworkURL}, true
	case res.Company != nil && res.Company.Domain != nil && *res.Company.Domain != "":
		return Subject{Kind: SubjectDomain, Value: *res.Company.Domain}, true
	}
	return Subject{}, false
}

// Hint is what a subject is shown as once it is only kept by its hash: enough to
// recognize it in a list, never enough to read it back (j***@acme.com, a***.com,
// https://www.linkedin.com/in/j***).
func (s Subject) Hint() string {
	switch s.Kind {
	case SubjectEmail:
		at := strings.LastIndexByte(s.Value, '@')
		if at < 0 {
			return "***"
		}
		return firstRune(s.Value[:at]) + "***@" + s.Value[at+1:]
	case SubjectProfile:
		i := strings.LastIndexByte(s.Value, '/')
		return s.Value[:i+1] + firstRune(s.Value[i+1:]) + "***"
	case SubjectDomain:
		suffix, _ := publicsuffix.PublicSuffix(s.Value)
		if suffix == "" || suffix == s.Value {
			return firstRune(s.Value) + "***"
		}
		return firstRune(s.Value) + "***." + suffix
	}
	return "***"
}

func firstRune(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || r == utf8.RuneError {
		return ""
	}
	return s[:n]
}

// Subjects makes subjects' hashes: HMAC-SHA256 under the installation's subject key
// (secret.Box.SubjectKey), the same on every process that serves one database. It is
// safe for concurrent use.
type Subjects struct {
	macs sync.Pool
}

// NewSubjects makes the hashes of subjects under key.
func NewSubjects(key []byte) *Subjects {
	key = append([]byte(nil), key...)
	s := &Subjects{}
	s.macs.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

// Hash is the keyed hash of one subject.
func (s *Subjects) Hash(sub Subject) SubjectHash {
	mac := s.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte(sub.canonical()))
	var out SubjectHash
	mac.Sum(out[:0])
	s.macs.Put(mac)
	return out
}

// HashText is the keyed hash of a text that is no subject's normalized form (what a
// request sent, kept as it was sent), under a label that keeps it apart from every
// subject's hash and every other label's.
func (s *Subjects) HashText(label, text string) SubjectHash {
	mac := s.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte("text\x00" + label + "\x00" + text))
	var out SubjectHash
	mac.Sum(out[:0])
	s.macs.Put(mac)
	return out
}

// HashAll is the hashes of subs, in order.
func (s *Subjects) HashAll(subs []Subject) []SubjectHash {
	out := make([]SubjectHash, len(subs))
	for i, sub := range subs {
		out[i] = s.Hash(sub)
	}
	return out
}
