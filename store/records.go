package store

// ImportStats counts what an import wrote.
type ImportStats struct {
	Companies int `json:"companies"`
	People    int `json:"people"`
}
