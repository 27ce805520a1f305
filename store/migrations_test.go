package store_test

import (
	"strings"
	"testing"

	"enrichd/store"

	"github.com/matryer/is"
)

func TestParseMigrations(t *testing.T) {
	is := is.New(t)
	ms, err := store.ParseMigrations("-- migration 1: first\nCREATE TABLE a (x);\n-- migration 2: second one \nCREATE TABLE b (y);\n")
	is.NoErr(err)
	is.Equal(len(ms), 2)
	is.Equal(ms[0], store.Migration{Version: 1, Title: "first", SQL: "\nCREATE TABLE a (x);\n"})
	is.Equal(ms[1].Title, "second one")
	is.Equal(ms[1].SQL, "\nCREATE TABLE b (y);\n")

	_, err = store.ParseMigrations("-- migration 1: a\nSELECT 1;\n-- migration 3: c\nSELECT 3;\n")
	is.True(err != nil && strings.Contains(err.Error(), "migration 3 found where 2 was expected"))

	_, err = store.ParseMigrations("CREATE TABLE a (x);")
	is.True(err != nil)
}
