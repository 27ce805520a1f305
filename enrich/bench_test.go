package enrich_test

import (
	"context"
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/enrichtest"
)

// The hot inner pieces of a request: normalizing what a client sent, and matching a
// local part against a name.

func BenchmarkNormalizeDomain(b *testing.B) {
	n := enrich.Normalizer{NetworkHost: enrich.DefaultNetworkHost}
	for b.Loop() {
		if _, err := n.Domain("HTTPS://WWW.Blog.Acme.CO.UK/about?x=1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalizeProfileURL(b *testing.B) {
	n := enrich.Normalizer{NetworkHost: enrich.DefaultNetworkHost}
	for b.Loop() {
		if _, err := n.PersonURL("https://de.linkedin.com/in/J%C3%BCrgen-M%C3%BCller-1a2b/?trk=x"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalizeEmail(b *testing.B) {
	n := enrich.Normalizer{NetworkHost: enrich.DefaultNetworkHost}
	for b.Loop() {
		if _, err := n.Email("Jane.Smith+news@WWW.Acme.COM"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatchPattern(b *testing.B) {
	names := []enrich.PersonName{
		{First: "Robert", Last: "Smith"}, {First: "José", Last: "García-López"}, {First: "Anna", Last: "van der Berg"},
		{First: "Elizabeth", Last: "O'Brien"}, {First: "Jürgen", Last: "Müller"},
	}
	locals := []string{"bob.smith", "jgarcia", "anna.vanderberg", "liz_obrien", "juergen.mueller", "s.robert", "nomatch"}
	for b.Loop() {
		for _, n := range names {
			for _, l := range locals {
				enrich.MatchPattern(n, l)
			}
		}
	}
}

func BenchmarkRefusal(b *testing.B) {
	for b.Loop() {
		enrich.Refusal("jane.smith@mail.yahoo.co.uk")
		enrich.Refusal("sales@acme.com")
		enrich.Refusal("jane.smith@acme.com")
	}
}

// What the waterfall itself costs, beside the sources' calls: the first hit alone
// (no fill list), and three sources merged field by field.
func BenchmarkLookup(b *testing.B) {
	ctx := context.Background()
	in := enrich.Input{Lookup: enrich.LookupDomain, Target: "acme.com"}
	first := &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com"), EmployeeCount: enrich.Ptr[int64](120)}
	second := &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com"), Slogan: enrich.Ptr("Anvils")}
	third := &enrich.Company{Name: "Acme", Domain: enrich.Ptr("acme.com"), About: enrich.Ptr("Anvils and rockets")}
	var asked []string
	p := &enrich.Pipeline{Sources: []enrich.Source{
		enrichtest.Source{SourceName: "a", Company: first, Asked: &asked},
		enrichtest.Source{SourceName: "b", Company: second, Asked: &asked},
		enrichtest.Source{SourceName: "c", Company: third, Asked: &asked},
	}}
	for _, bc := range []struct {
		name string
		fill []string
	}{{"first-hit", nil}, {"three-merged", []string{"slogan", "about"}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				asked = asked[:0]
				if _, _, terr := p.Lookup(ctx, &enrich.Task{Fill: bc.fill}, in); terr != nil {
					b.Fatal(terr)
				}
			}
		})
	}
}
