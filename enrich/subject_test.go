package enrich_test

import (
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
)

func TestSubjectHashesNameOneIdentifierWhateverItsForm(t *testing.T) {
	is := is.New(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	subjects := enrich.NewSubjects(key)
	norm := enrich.Normalizer{}
	hash := func(kind enrich.SubjectKind, raw string) enrich.SubjectHash {
		t.Helper()
		s, err := norm.Subject(kind, raw)
		is.NoErr(err)
		return subjects.Hash(s)
	}
	// An address is its mailbox: the case of its local part, its +tag and the form of
	// its domain do not change it.
	jane := hash(enrich.SubjectEmail, "jane.doe@acme.com")
	is.Equal(hash(enrich.SubjectEmail, " Jane.Doe@ACME.com "), jane)
	is.Equal(hash(enrich.SubjectEmail, "jane.doe+news@www.acme.com"), jane)
	is.True(hash(enrich.SubjectEmail, "john.doe@acme.com") != jane)

	// A profile in its target form, however it was written.
	profile := hash(enrich.SubjectProfile, "https://www.linkedin.com/in/jane-doe")
	is.Equal(hash(enrich.SubjectProfile, "http://linkedin.com/in/Jane-Doe/?trk=x"), profile)
	is.Equal(hash(enrich.SubjectProfile, "https://fr.linkedin.com/in/jane-doe/details"), profile)

	// A domain in its registrable form.
	acme := hash(enrich.SubjectDomain, "acme.com")
	is.Equal(hash(enrich.SubjectDomain, "HTTPS://WWW.Acme.COM/about"), acme)
	is.Equal(hash(enrich.SubjectDomain, "mail.acme.com"), acme)

	// The kind is part of what is hashed: a domain and an address never collide, nor
	// do two kinds of one text.
	is.True(acme != jane && acme != profile)
	is.True(subjects.Hash(enrich.Subject{Kind: enrich.SubjectDomain, Value: "x"}) !=
		subjects.Hash(enrich.Subject{Kind: enrich.SubjectEmail, Value: "x"}))

	// Another key names nobody the same.
	other := enrich.NewSubjects([]byte("another key of thirty-two bytes!"))
	s, _ := norm.Subject(enrich.SubjectEmail, "jane.doe@acme.com")
	is.True(other.Hash(s) != jane)

	// What an input names is hashed as the same subject as what was suppressed.
	in, err := norm.PersonInput(nil, ptr("Jane.Doe@Acme.com"), enrich.SentHints{})
	is.NoErr(err)
	got := subjects.HashAll(enrich.InputSubjects(in))
	is.Equal(len(got), 2)
	is.Equal(got[0], jane)
	is.Equal(got[1], acme) // a domain's suppression covers every address at it

	res := enrich.Result{Person: &enrich.Person{NetworkURL: ptr("https://www.linkedin.com/in/jane-doe")}}
	who, ok := enrich.ResultSubject(res)
	is.True(ok)
	is.Equal(subjects.Hash(who), profile)
}

func TestSubjectRefusesWhatIsNotItsKind(t *testing.T) {
	norm := enrich.Normalizer{}
	for _, c := range []struct {
		kind enrich.SubjectKind
		raw  string
	}{
		{enrich.SubjectEmail, "not an address"},
		{enrich.SubjectEmail, ""},
		{enrich.SubjectProfile, "https://www.linkedin.com/company/acme"},
		{enrich.SubjectProfile, "https://example.com/in/jane"},
		{enrich.SubjectDomain, "jane@acme.com"},
		{enrich.SubjectDomain, "127.0.0.1"},
		{enrich.SubjectKind("phone"), "+33 1 23 45 67 89"},
	} {
		_, err := norm.Subject(c.kind, c.raw)
		isInvalid(t, err)
	}
}

func TestSubjectHintMasksTheIdentifier(t *testing.T) {
	is := is.New(t)
	for _, c := range []struct {
		s    enrich.Subject
		want string
	}{
		{enrich.Subject{Kind: enrich.SubjectEmail, Value: "jane.doe@acme.com"}, "j***@acme.com"},
		{enrich.Subject{Kind: enrich.SubjectEmail, Value: "élodie@acme.fr"}, "é***@acme.fr"},
		{enrich.Subject{Kind: enrich.SubjectProfile, Value: "https://www.linkedin.com/in/jane-doe"}, "https://www.linkedin.com/in/j***"},
		{enrich.Subject{Kind: enrich.SubjectDomain, Value: "acme.com"}, "a***.com"},
		{enrich.Subject{Kind: enrich.SubjectDomain, Value: "acme.co.uk"}, "a***.co.uk"},
	} {
		is.Equal(c.s.Hint(), c.want)
	}
}

func TestAProfileIsNamedWhateverTheNetworksHost(t *testing.T) {
	is := is.New(t)
	subjects := enrich.NewSubjects([]byte("0123456789abcdef0123456789abcdef"))
	a, err := enrich.Normalizer{NetworkHost: "www.linkedin.com"}.Subject(enrich.SubjectProfile, "https://www.linkedin.com/in/Jane-Doe")
	is.NoErr(err)
	b, ok := enrich.ProfileSubject("https://de.linkedin.com/in/jane-doe/")
	is.True(ok)
	c, err := enrich.Normalizer{NetworkHost: "network.example"}.Subject(enrich.SubjectProfile, "https://network.example/in/jane-doe")
	is.NoErr(err)
	is.Equal(subjects.Hash(a), subjects.Hash(b))
	is.Equal(subjects.Hash(a), subjects.Hash(c))
	_, ok = enrich.ProfileSubject("not a url")
	is.True(!ok)
}
