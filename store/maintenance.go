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
}
