package worker

import (
	"testing"

	"enrichd/enrich"
)

// The people an ambiguous email lookup gathered are kept for a retry by any
// organization, so not when one of its asks went out with an organization's own key.
func TestAGatheringFetchedWithAnOrganizationsKeyIsNotShared(t *testing.T) {
	g := &enrich.Gathering{Address: "j.smith@acme.com"}
	installation := enrich.Trace{Sources: []enrich.SourceCall{{Name: "pdl", Outcome: enrich.OutcomeHit}}}
	own := enrich.Trace{Sources: []enrich.SourceCall{{Name: "dataset", Outcome: enrich.OutcomeMiss}, {Name: "pdl", Outcome: enrich.OutcomeHit, OwnKey: true}}}
	if sharedGathering(g, installation) != g {
		t.Error("a gathering fetched with the installation's keys is not kept")
	}
	if sharedGathering(g, own) != nil {
		t.Error("a gathering fetched with an organization's own key is kept for every organization")
	}
}
