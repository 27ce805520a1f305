package sqlite

import (
	"context"
)

// The credit steps are package store's (store/credits.go).

// LockTaskGrants locks nothing: the single writer keeps a refund alone.
func (txExec) LockTaskGrants(context.Context, string) error { return nil }
