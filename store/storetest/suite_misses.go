package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// missesOf renders a subject's misses remembered since since as "source scope" lines
// ("source *" for the installation's keys).
func missesOf(t *testing.T, db *store.DB, in enrich.Input, since time.Time) []string {
	t.Helper()
	got, err := db.SourceMisses(context.Background(), in, since)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, m := range got {
		scope := m.OrgID
		if scope == "" {
			scope = "*"
		}
		out = append(out, m.Source+" "+scope)
	}
	return out
}

// testSourceMissesRememberedPerSubjectAndScope: a miss is remembered by source, subject
// (the lookup's kind and normalized target, as records are keyed) and scope (the
// installation's keys, or one organization's own); remembering it again restarts its
// window; another handle reads what this one wrote; an answer of the source deletes
// its misses of the subject in every scope, no other source's and no other subject's.
func testSourceMissesRememberedPerSubjectAndScope(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme, globex := NewOrg(t, db, "acme"), NewOrg(t, db, "globex")
	start := env.Clock.Now()
	domain := enrich.Input{Lookup: enrich.LookupDomain, Target: "nobody.example"}
	page := enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/nobody"}
	profile := enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/nobody"}

	is.Equal(missesOf(t, db, domain, start), []string{}) // nothing remembered yet

	is.NoErr(db.RememberMiss(ctx, domain, "pdl", ""))   // with the installation's key
	is.NoErr(db.RememberMiss(ctx, domain, "pdl", acme)) // with acme's own
	is.NoErr(db.RememberMiss(ctx, domain, "apollo", globex))
	is.NoErr(db.RememberMiss(ctx, page, "pdl", ""))
	env.Clock.Add(time.Hour)
	is.NoErr(db.RememberMiss(ctx, profile, "pdl", ""))
	is.NoErr(db.RememberMiss(ctx, domain, "pdl", "")) // again: one row, missed now

	other := env.Open() // another process, or another replica
	is.Equal(missesOf(t, other, domain, start), []string{"apollo " + globex, "pdl *", "pdl " + acme})
	is.Equal(missesOf(t, other, page, start), []string{"pdl *"})             // another kind of lookup, apart
	is.Equal(missesOf(t, other, profile, start), []string{"pdl *"})          // and another again
	is.Equal(missesOf(t, other, domain, env.Clock.Now()), []string{"pdl *"}) // the one remembered again is newer
	got, err := other.SourceMisses(ctx, domain, start)
	is.NoErr(err)
	is.True(got[1].MissedAt.Equal(env.Clock.Now().Truncate(time.Millisecond)))

	// pdl answered for the domain: its misses of it go, in every scope; apollo's stay,
	// and so do pdl's of the other subjects.
	n, err := db.ForgetMisses(ctx, domain, "pdl")
	is.NoErr(err)
	is.Equal(n, 2)
	is.Equal(missesOf(t, other, domain, start), []string{"apollo " + globex})
	is.Equal(missesOf(t, other, page, start), []string{"pdl *"})
	n, err = db.ForgetMisses(ctx, domain, "pdl") // nothing left to forget
	is.NoErr(err)
	is.Equal(n, 0)

	// A subject whose key the store hashes (a long page) is remembered all the same.
	long := enrich.Input{Lookup: enrich.LookupCompanyURL, Target: "https://www.linkedin.com/company/" + longSlug(2000)}
	is.NoErr(db.RememberMiss(ctx, long, "pdl", ""))
	is.Equal(missesOf(t, other, long, start), []string{"pdl *"})
}

func longSlug(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// testSourceMissesExpireAndArePurged: a miss older than the window is not read, and
// the purge deletes those remembered before its cutoff, oldest first, a batch at a
// time, and no newer one.
func testSourceMissesExpireAndArePurged(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	const window = 30 * 24 * time.Hour
	old := enrich.Input{Lookup: enrich.LookupDomain, Target: "old.example"}
	for i := range 5 {
		is.NoErr(db.RememberMiss(ctx, enrich.Input{Lookup: enrich.LookupDomain, Target: "old" + string(rune('a'+i)) + ".example"}, "pdl", ""))
	}
	is.NoErr(db.RememberMiss(ctx, old, "pdl", ""))
	env.Clock.Add(10 * 24 * time.Hour)
	recent := enrich.Input{Lookup: enrich.LookupDomain, Target: "recent.example"}
	is.NoErr(db.RememberMiss(ctx, recent, "pdl", ""))

	env.Clock.Add(window - 10*24*time.Hour + time.Millisecond) // the first six are past the window
	since := env.Clock.Now().Add(-window)
	is.Equal(missesOf(t, db, old, since), []string{}) // no longer read
	is.Equal(missesOf(t, db, recent, since), []string{"pdl *"})

	n, err := db.PurgeMisses(ctx, since, 4)
	is.NoErr(err)
	is.Equal(n, 4)
	n, err = db.PurgeMisses(ctx, since, 4)
	is.NoErr(err)
	is.Equal(n, 2) // fewer than a batch: done
	n, err = db.PurgeMisses(ctx, since, 4)
	is.NoErr(err)
	is.Equal(n, 0)
	is.Equal(missesOf(t, db, old, time.Time{}), []string{}) // gone, not merely unread
	is.Equal(missesOf(t, db, recent, time.Time{}), []string{"pdl *"})
}

// testSourceMissesFromManyWriters: the same miss remembered at once from two handles,
// while another subject's is forgotten, leaves one row each and fails none.
func testSourceMissesFromManyWriters(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	handles := []*store.DB{env.DB, env.Open()}
	in := enrich.Input{Lookup: enrich.LookupPersonURL, Target: "https://www.linkedin.com/in/nobody"}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := handles[i%2]
			errs <- h.RememberMiss(ctx, in, "pdl", "")
			_, err := h.ForgetMisses(ctx, in, "apollo")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	is.Equal(missesOf(t, env.DB, in, time.Time{}), []string{"pdl *"})
}
