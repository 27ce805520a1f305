package enrich

import (
	"context"
	"time"
)

// Misses remembers which priced sources did not know a subject, so that none is asked,
// and paid, for that subject again within the freshness window: the waterfall passes
// it over, unasked (ReasonKnownMiss). A subject is a lookup's kind and normalized
// target, as the store keys its records. A miss found with an organization's own
// vendor key is that organization's; one found with the installation's key is
// everyone's.
//
// Only a source that prices its calls (Priced) is remembered: the dataset and the
// website cost nothing to ask, and what they hold can change at once (an import).
// Only a miss that went upstream is remembered (one that sent nothing cost nothing),
// and only a real one: not an error, not a skip, not an answer about another subject.
type Misses interface {
	// Of returns, by source, the scopes in which a miss of in's subject found since
	// since is remembered: "" for one found with the installation's keys, else the id
	// of the organization whose own key found it.
	Of(ctx context.Context, in Input, since time.Time) map[string][]string
	// Remember records that source did not know in's subject, in scope ("" or the
	// organization's id, as Of answers).
	Remember(ctx context.Context, in Input, source, scope string)
	// Forget deletes every miss of in's subject remembered of source, in every scope:
	// it has just answered for it.
	Forget(ctx context.Context, in Input, source string)
}

// knownMisses is what one ask of a subject knows of its sources' misses, read when a
// priced source is first about to be asked: a lookup a free source answers alone (the
// dataset's record, first hit wins) reads nothing.
type knownMisses struct {
	p      *Pipeline
	in     Input
	org    string
	read   bool
	scopes map[string][]string // by source, as Misses.Of answers
}

func (p *Pipeline) knownMisses(org string, in Input) *knownMisses {
	return &knownMisses{p: p, in: in, org: org}
}

// remembered reports whether src's misses are remembered: it prices its calls.
func remembered(src Source) bool {
	_, ok := src.(Priced)
	return ok
}

// known reports whether src is remembered not to know the subject, for this ask's
// organization: a miss found with the installation's keys, or with its own, within
// the freshness window. The subject's misses are read at the first priced source. A
// pipeline that asks everything afresh (Fresh: a watch's check) skips no source for
// them, though it reads them, to supersede those it finds answered.
func (k *knownMisses) known(ctx context.Context, src Source) bool {
	if k.p.Misses == nil || !remembered(src) {
		return false
	}
	if !k.read {
		k.read = true
		k.scopes = k.p.Misses.Of(ctx, k.in, k.p.now().Add(-k.p.window()))
	}
	if k.p.Fresh {
		return false
	}
	for _, scope := range k.scopes[src.Name()] {
		if scope == "" || scope == k.org {
			return true
		}
	}
	return false
}

// record keeps what an ask of src came to, once it is over: a miss that went
// upstream is remembered, in the organization's scope when its own key was used; an
// answer for the subject (a hit, or a record of it with nothing new) deletes the
// misses of src read for it, whoever's they were.
//
// An answer with no miss read writes nothing: a priced source's answer is the
// common case, and a write for each would cost the single writer a transaction a
// task. A miss another task remembered between the read and the answer outlives the
// answer, but harms nothing: the record the answer stored is served from the store
// for as long as that miss is held, both being held for the freshness window from now.
func (k *knownMisses) record(ctx context.Context, src Source, call SourceCall) {
	if k.p.Misses == nil || !remembered(src) {
		return
	}
	// The writes outlive the task's context: the ask was made, and paid, either way.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case call.Outcome == OutcomeMiss && call.Reason == "" && call.VendorCalls > 0:
		scope := ""
		if call.OwnKey {
			scope = k.org
		}
		k.p.Misses.Remember(wctx, k.in, call.Name, scope)
	case call.Outcome == OutcomeHit || call.Outcome == OutcomeMiss && call.Reason == ReasonNothingNew:
		if len(k.scopes[call.Name]) > 0 {
			k.p.Misses.Forget(wctx, k.in, call.Name)
		}
	}
}
