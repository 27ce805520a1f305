package pgcluster_test

import (
	"context"
	"testing"

	"enrichd/store/storetest/pgcluster"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// Each test gets its own empty database, and it is gone once the test ends.
func TestURLGivesEachTestAFreshDatabase(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var names []string
	for range 2 {
		t.Run("", func(t *testing.T) {
			is := is.New(t)
			conn, err := pgx.Connect(ctx, pgcluster.URL(t))
			is.NoErr(err)
			defer conn.Close(ctx)
			var name string
			var tables int
			is.NoErr(conn.QueryRow(ctx, `SELECT current_database(),
				(SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public')`).Scan(&name, &tables))
			is.Equal(tables, 0) // a fresh database
			_, err = conn.Exec(ctx, `CREATE TABLE t (id int)`)
			is.NoErr(err)
			names = append(names, name)
		})
	}
	is.Equal(len(names), 2)
	is.True(names[0] != names[1])

	conn, err := pgx.Connect(ctx, pgcluster.ServerURL(t))
	is.NoErr(err)
	defer conn.Close(ctx)
	var left int
	is.NoErr(conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left))
	is.Equal(left, 0) // dropped at cleanup
}
