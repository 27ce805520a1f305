package worker

import (
	"context"

	"enrichd/store"
)

// fillFor returns the fields the sources are asked in turn to fill for a claimed
// task: its organization's own list for the task's object type where it set one, else
// the server's default (Config.Fill). Empty keeps first-hit-wins. It reads one row by
// primary key, so a change is in force from the next task claimed.
func (s *Pool) fillFor(ctx context.Context, c *store.Claim) ([]string, error) {
	lists, err := s.db.FillLists(ctx, c.OrgID, s.cfg.Fill)
	if err != nil {
		return nil, err
	}
	return lists.For(c.Input.Lookup.ObjectType()), nil
}
