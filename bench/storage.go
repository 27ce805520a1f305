package bench

import (
	"fmt"
	"strings"

	"enrichd/store"
)

// Storage is what the database file holds per stored task.
type Storage struct {
	Tasks   int64           `json:"tasks"`
	Bytes   int64           `json:"bytes"` // the whole file's pages
	Objects []StorageObject `json:"objects"`
}

// StorageObject is one table or index, the biggest first.
type StorageObject struct {
	Name         string  `json:"name"`
	Bytes        int64   `json:"bytes"`
	Unused       int64   `json:"unused"` // bytes of its pages holding nothing
	BytesPerTask float64 `json:"bytes_per_task"`
}

// storageRow is the storage row: the file's bytes per stored task, and the objects
// they go to.
func storageRow(sp *store.Space) Result {
	st := &Storage{Tasks: sp.Tasks, Bytes: sp.Bytes}
	perTask := func(b int64) float64 { return ratio(float64(b), float64(sp.Tasks)) }
	var biggest []string
	for _, o := range sp.Objects {
		st.Objects = append(st.Objects, StorageObject{Name: o.Name, Bytes: o.Bytes, Unused: o.Unused, BytesPerTask: perTask(o.Bytes)})
		if len(biggest) < 5 {
			biggest = append(biggest, fmt.Sprintf("%s %.0f", o.Name, perTask(o.Bytes)))
		}
	}
	return Result{Scenario: "storage", Unit: "B/task", Rate: perTask(sp.Bytes), Count: sp.Tasks, Storage: st,
		Note: fmt.Sprintf("the whole file (%.1f MB, dbstat) over the %d tasks it holds after the mixed run; the biggest objects, in bytes per task: %s",
			float64(sp.Bytes)/(1<<20), sp.Tasks, strings.Join(biggest, ", "))}
}
