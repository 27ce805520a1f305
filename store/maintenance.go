package store

import (
	"errors"
)

// ErrBackupExists is returned by Backup when the destination exists and overwriting
// it was not asked for.
var ErrBackupExists = errors.New("the backup file already exists")

// Purged is what one PurgeSettled batch deleted.
type Purged struct {
	Tasks      int
	Deliveries int
	Batches    int // batches uploaded before the cutoff, with their rows
}

// BatchesPerPurge is how many batches one PurgeSettled of limit rows deletes: a batch
// has up to MaxBatchRows rows, deleted with it in the same short transaction.
func BatchesPerPurge(limit int) int { return max(1, limit/500) }
