package store

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Migration is one "-- migration N: title" section of an engine's schema: the root
// schema.sql for SQLite, store/postgres/schema.sql for PostgreSQL. A driver applies,
// in order, those its database's schema_migrations table does not list, each in a
// transaction that also records it there.
type Migration struct {
	Version int
	Title   string
	SQL     string
}

var migrationHeader = regexp.MustCompile(`(?m)^-- migration (\d+): (.*)$`)

// ParseMigrations splits schema into its migrations, which must be numbered 1, 2, 3...
// with no gap: a gap would be a migration one binary applies and another skips.
func ParseMigrations(schema string) ([]Migration, error) {
	heads := migrationHeader.FindAllStringSubmatchIndex(schema, -1)
	if len(heads) == 0 {
		return nil, fmt.Errorf("the schema has no \"-- migration N: title\" sections")
	}
	var out []Migration
	for i, h := range heads {
		end := len(schema)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		v, _ := strconv.Atoi(schema[h[2]:h[3]])
		if v != i+1 {
			return nil, fmt.Errorf("schema: migration %d found where %d was expected", v, i+1)
		}
		out = append(out, Migration{Version: v, Title: strings.TrimSpace(schema[h[4]:h[5]]), SQL: schema[h[1]:end]})
	}
	return out, nil
}
