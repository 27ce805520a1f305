package server

import (
	"context"

	"enrichd/store"
)

// startStep is one line of the overview's "getting started" list: what to do, the
// exact command that does it, and whether it is done.
type startStep struct {
	Done     bool
	Title    string
	Commands []string
	Link     string // a dashboard page that does the same, if any
	LinkText string
}

// gettingStarted is the list an organization sees on its overview until it has
// credits, a source that can find something, and an API key; nil once it has all
// three. Shell quoting is left out: an organization's name needs none.
func (s *Server) gettingStarted(ctx context.Context, u *store.User, balance int64) ([]startStep, error) {
	keys, err := s.db.ListKeys(ctx, u.OrgName)
	if err != nil {
		return nil, err
	}
	hasKey := false
	for _, k := range keys {
		hasKey = hasKey || k.RevokedAt == nil
	}
	// The dataset finds only what was imported; any other source looks things up.
	canFind := false
	for _, src := range s.cfg.Sources {
		if src.Name() != "dataset" {
			canFind = true
		}
	}
	if !canFind {
		if canFind, err = s.db.HasRecords(ctx, store.OriginDataset); err != nil {
			return nil, err
		}
	}
	if balance > 0 && canFind && hasKey {
		return nil, nil
	}
	return []startStep{
		{Done: balance > 0, Title: "Grant credits: each enrichment costs 1 or more",
			Commands: []string{"./enrichd credits grant --org " + u.OrgName + " --amount 1000"}},
		{Done: canFind, Title: "Give enrichd a source that can find something: import your records, or serve with sources that look things up",
			Commands: []string{"./enrichd import examples/people-and-companies.jsonl", "./enrichd serve --sources dataset,web"}},
		{Done: hasKey, Title: "Create an API key for your code",
			Commands: []string{"./enrichd keys create --org " + u.OrgName + " --name first"},
			Link:     "/dashboard/settings/keys", LinkText: "or on Settings → API Keys"},
	}, nil
}
