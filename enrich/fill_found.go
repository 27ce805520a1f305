package enrich

import "context"

// fillFound fills a person an email lookup found and confirmed with the task's person
// fields (t.Fill), as a profile lookup would: the sources not yet
// asked for the profile are asked in their order while a wanted field is still null,
// each filling only what is still null, its record used only for the same profile.
// Only a confirmed person is filled, so no vendor is paid for the fields of someone
// the address does not belong to.
//
// What the lookup already asked for the profile, and where each field came from, is
// the task's trace's (a retrieval through Enrich, or a direct match). A profile the
// lookup did not ask anyone for (held fresh, read as it is held) is not filled, asking
// nobody; nor is a person whose record names no profile page, which nothing can be
// asked for.
func (p *Pipeline) fillFound(ctx context.Context, t *Task, person *Person) *Person {
	if len(t.Fill) == 0 || person == nil || person.NetworkURL == nil {
		return person
	}
	found := Result{Person: person}
	prov, private, asked, ok := t.trace.retrieved(found)
	if !ok {
		return person
	}
	seed := newMerging(found, "", private)
	seed.provenance = prov
	if seed.filled(wantedFields(LookupPersonURL, t.Fill)) {
		return person
	}
	res, tr, _ := p.lookup(ctx, t, Input{Lookup: LookupPersonURL, Target: *person.NetworkURL}, t.Fill, from{seed: seed, asked: asked})
	t.trace.record(res, tr) // the filled record's provenance, in the first record's place
	return res.Person
}
