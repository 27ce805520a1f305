package server_test

import (
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// withSim adds the sim network after the fake one: its companies and staff answer
// every domain the fake network does not know.
func withSim(cfg *server.Config) {
	cfg.Sources = append(cfg.Sources, &source.Sim{NetworkHost: enrich.DefaultNetworkHost})
}

// A person held must never decide an address alone while someone else the address
// fits went unseen. At company-389 Katherine, Ken and Tim Berners-Lee work; at
// company-332 Ada and Alan Berners-Lee. An address that drops the hyphen fits several
// of them, whatever was looked up before, and costs nothing.
func TestACompoundSurnameIsNeverAnsweredWithAPersonHeld(t *testing.T) {
	t.Parallel()
	for _, seq := range []struct {
		short, long, name, hyphen string
	}{
		{"k.bernerslee@company-389.com", "katherine.bernerslee@company-389.com", "Katherine Berners-Lee", "k.berners-lee@company-389.com"},
		{"a.bernerslee@company-332.com", "alan.bernerslee@company-332.com", "Alan Berners-Lee", "a.berners-lee@company-332.com"},
	} {
		t.Run(seq.short, func(t *testing.T) {
			is := is.New(t)
			e := servertest.NewEnv(t, withSim)
			e.StartWorkers()

			_, first := e.EmailLookup(seq.short)
			is.Equal(first.Str("task.status"), "failed")
			is.Equal(first.Str("error.code"), "ambiguous") // both fit; the search sees both
			is.Equal(first.Get("error.candidates"), 2.0)

			_, long := e.EmailLookup(seq.long)
			is.Equal(long.Str("task.status"), "succeeded")
			is.Equal(long.Str("data.full_name"), seq.name)

			_, again := e.EmailLookup(seq.short)
			is.Equal(again.Str("task.status"), "failed") // the person now held does not decide it
			is.Equal(again.Str("error.code"), "ambiguous")
			is.Equal(again.Get("error.candidates"), 2.0)

			_, hyphen := e.EmailLookup(seq.hyphen)
			is.Equal(hyphen.Str("error.code"), "ambiguous")
			is.Equal(hyphen.Get("error.candidates"), 2.0)

			b := e.Balance("acme")
			is.Equal(b.Charged-b.Refund, int64(3)) // only the one success is paid for
		})
	}
}

// Addresses that fit one current employee each are answered, whatever their shape:
// a given name joined to a Mc surname, a part of a compound surname, a nickname's
// initial that is not the person's own.
func TestUniqueFitsAreFound(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, withSim)
	e.StartWorkers()
	for _, tt := range []struct{ address, want string }{
		{"dennismccarthy@company-41.com", "Dennis McCarthy"},    // the search splits at the given name
		{"vint_mccarthy@company-41.com", "Vint McCarthy"},       // among 11 people named Vint or McCarthy
		{"mccarthyvint@company-41.com", "Vint McCarthy"},        // lastfirst
		{"barbara.lee@company-22.com", "Barbara Berners-Lee"},   // a part of the compound
		{"b.berners.lee@company-22.com", "Barbara Berners-Lee"}, // the compound with a dot
		{"ghopper@company-1.com", "Grace Hopper"},               // not Margaret: Greta's g is not hers
		{"mhopper@company-1.com", "Margaret Hopper"},
	} {
		t.Run(tt.address, func(t *testing.T) {
			is := is.New(t)
			_, done := e.EmailLookup(tt.address)
			is.Equal(done.Str("task.status")+" "+done.Str("error.code"), "succeeded ")
			is.Equal(done.Str("data.full_name"), tt.want)
		})
	}
}
