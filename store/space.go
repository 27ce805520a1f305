package store

// Space is how the database file's pages are spent, for `enrichd bench` to report the
// bytes a stored task costs and where they go.
type Space struct {
	Tasks   int64         // rows of the tasks table
	Bytes   int64         // the whole database: every page, free ones included, times the page size
	Objects []ObjectSpace // each table and index, the biggest first
}

// ObjectSpace is one table's or index's pages.
type ObjectSpace struct {
	Name   string
	Bytes  int64 // its pages times the page size
	Unused int64 // of those, the bytes holding nothing
}
