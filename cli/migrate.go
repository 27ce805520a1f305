package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"enrichd/store"
	"enrichd/store/postgres"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // the SQLite file is read with database/sql, not through the store
)

func newMigrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate --from enrichd.db --to postgres://...",
		Short: "Copy a SQLite deployment into an empty PostgreSQL database, and verify the copy",
		Long: `migrate copies every table of a SQLite deployment into a PostgreSQL database:
organizations, keys, users and sessions, credit grants and the ledger, tasks and their
results, idempotency keys, stored and imported records, Loops and deliveries.

The SQLite file is opened read-only and read in one transaction, so serve may keep
running on it: the copy is the state at the moment migrate started, and what serve
writes after that is not copied. Stop serve first for a final move.

The PostgreSQL database must be empty: migrate creates enrichd's tables there (as
serve --db postgres://... would), copies every row in one transaction, and checks,
before it commits, that every table has as many rows as in SQLite and that each
organization's ledger and balance add up to the same. A target that already holds
enrichd rows is refused, and a failed copy leaves nothing behind.

The SQLite file must be at this release's schema: if it is older, start this
release's serve on it once (it upgrades the file as it starts), then migrate.`,
		Annotations: map[string]string{noDB: "yes"},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			from, _ := cmd.Flags().GetString("from")
			to, _ := cmd.Flags().GetString("to")
			if !isPostgresURL(to) {
				return fmt.Errorf("--to must be a PostgreSQL URL, postgres://user:password@host/database, not %q", redactURL(to))
			}
			rep, err := migrateToPostgres(cmd.Context(), from, to, program(cmd).Schema)
			if rep != nil {
				rep.write(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "migrated %s to %s\n", from, redactURL(to))
			return nil
		},
	}
	cmd.Flags().String("from", "./enrichd.db", "the SQLite database file to copy")
	cmd.Flags().String("to", "", "the PostgreSQL database to copy into, as a URL: postgres://user:password@host:5432/database (required)")
	cmd.MarkFlagRequired("to")
	return cmd
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL is a database URL fit for a message: its password replaced.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// errTargetNotEmpty is returned, changing nothing, for a target that already has rows.
var errTargetNotEmpty = errors.New("the PostgreSQL database is not empty")

// migrateTable is one table copied: its SQLite columns, and its rows on each side.
type migrateTable struct {
	name     string
	columns  []string // SQLite's, which the PostgreSQL table has under the same names
	pgTypes  []string // the PostgreSQL data type of each column
	sqlite   int64    // rows in the SQLite snapshot
	postgres int64    // rows in PostgreSQL after the copy
}

// creditSums is an organization's credits on one side: the signed sum of its ledger,
// and its balance as the store reads it (the daily sums the ledger's trigger keeps).
type creditSums struct{ ledger, balance int64 }

// migrateReport is what migrate did, printed whether or not it succeeded.
type migrateReport struct {
	tables             []*migrateTable
	sqliteOrgs, pgOrgs map[string]creditSums
	verified           bool
}

func (r *migrateReport) write(w io.Writer) {
	if len(r.tables) == 0 {
		return
	}
	width := len("TABLE")
	for _, t := range r.tables {
		width = max(width, len(t.name))
	}
	fmt.Fprintf(w, "%-*s  %10s  %10s\n", width, "TABLE", "SQLITE", "POSTGRESQL")
	for _, t := range r.tables {
		mark := ""
		if t.sqlite != t.postgres {
			mark = "  DIFFERS"
		}
		fmt.Fprintf(w, "%-*s  %10d  %10d%s\n", width, t.name, t.sqlite, t.postgres, mark)
	}
	if r.sqliteOrgs == nil {
		return
	}
	var total int64
	for _, s := range r.sqliteOrgs {
		total += s.balance
	}
	if r.verified {
		fmt.Fprintf(w, "verified: %d tables have the same rows on both sides; the ledger and the balance of each of the %d organizations are equal on both sides (%d credits in all)\n",
			len(r.tables), len(r.sqliteOrgs), total)
		return
	}
	for _, org := range slices.Sorted(maps.Keys(r.sqliteOrgs)) {
		if s, p := r.sqliteOrgs[org], r.pgOrgs[org]; s != p {
			fmt.Fprintf(w, "organization %s: SQLite ledger %d balance %d, PostgreSQL ledger %d balance %d\n", org, s.ledger, s.balance, p.ledger, p.balance)
		}
	}
}

// migrateToPostgres copies the SQLite database at from into the empty PostgreSQL
// database at to, creating enrichd's schema there first, and verifies the copy before
// committing it. The report is nil when nothing was read yet.
func migrateToPostgres(ctx context.Context, from, to, schema string) (*migrateReport, error) {
	src, err := openSQLiteSnapshot(ctx, from, schema)
	if err != nil {
		return nil, err
	}
	defer src.close()
	tables, err := src.tables(ctx)
	if err != nil {
		return nil, err
	}
	rep := &migrateReport{tables: tables}

	// Refused before the schema is created, so a target with rows is left as it was;
	// checked again inside the copy's transaction, against a writer in between.
	if err := checkTargetEmpty(ctx, to, tables); err != nil {
		return nil, err
	}
	// The postgres driver creates, or brings up to date, enrichd's schema.
	pgdb, err := postgres.Open(ctx, to, nil)
	if err != nil {
		return nil, fmt.Errorf("creating enrichd's tables in %s: %w", redactURL(to), err)
	}
	if err := pgdb.Close(); err != nil {
		return nil, err
	}

	conn, err := pgx.Connect(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", redactURL(to), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := copyTables(ctx, src, tx, tables); err != nil {
		return rep, err
	}
	if rep.sqliteOrgs, err = sumCredits(ctx, src.tx.QueryContext); err != nil {
		return rep, fmt.Errorf("summing the SQLite ledger: %w", err)
	}
	if rep.pgOrgs, err = sumCredits(ctx, func(ctx context.Context, q string, args ...any) (rowsScanner, error) {
		rows, err := tx.Query(ctx, q, args...)
		return pgxRows{rows}, err
	}); err != nil {
		return rep, fmt.Errorf("summing the PostgreSQL ledger: %w", err)
	}
	for _, t := range tables {
		if t.sqlite != t.postgres {
			return rep, fmt.Errorf("table %s has %d rows in SQLite but %d in PostgreSQL: nothing was committed", t.name, t.sqlite, t.postgres)
		}
	}
	if !maps.Equal(rep.sqliteOrgs, rep.pgOrgs) {
		return rep, errors.New("the ledger or the balance of an organization differs between SQLite and PostgreSQL: nothing was committed")
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, fmt.Errorf("committing the copy: %w", err)
	}
	rep.verified = true
	return rep, nil
}

// sqliteSnapshot is the SQLite database read-only, in one read transaction: every
// table is read as of the same moment, while serve may go on writing.
type sqliteSnapshot struct {
	db *sql.DB
	tx *sql.Tx
}

func openSQLiteSnapshot(ctx context.Context, path, schema string) (*sqliteSnapshot, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no database at %s (give --from the path serve uses)", path)
	case err != nil:
		return nil, fmt.Errorf("database %s: %w", path, store.StripPath(err))
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("database %s is not a file", path)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	s := &sqliteSnapshot{db: db, tx: tx}
	if err := s.checkVersion(ctx, path, schema); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *sqliteSnapshot) close() {
	s.tx.Rollback()
	s.db.Close()
}

var migrationLine = regexp.MustCompile(`(?m)^-- migration \d+: `)

// checkVersion refuses a file whose schema is not the one this binary writes: its
// tables would not be those of the PostgreSQL schema. migrate does not upgrade it
// itself: a serve of an older release may be running on it, and would then run on a
// schema it does not know.
func (s *sqliteSnapshot) checkVersion(ctx context.Context, path, schema string) error {
	known := len(migrationLine.FindAllStringIndex(schema, -1))
	var applied int
	if err := s.tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return fmt.Errorf("%s is not an enrichd database, or cannot be read: %w", path, err)
	}
	switch {
	case applied < known:
		return fmt.Errorf("%s is at schema migration %d and this enrichd at %d: migrate copies only a database at its own schema. "+
			"Start this release's enrichd serve on it once (it upgrades the file as it starts), stop it, and run migrate again; the file was not changed", path, applied, known)
	case applied > known:
		return fmt.Errorf("%s is at schema migration %d, newer than this enrichd (%d): run migrate with the release that serves it", path, applied, known)
	}
	return nil
}

// tables lists the tables to copy, each after the tables it refers to, with their
// columns and row counts.
func (s *sqliteSnapshot) tables(ctx context.Context) ([]*migrateTable, error) {
	rows, err := s.tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'
		AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> 'schema_migrations' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	refers := map[string][]string{}
	byName := map[string]*migrateTable{}
	for _, n := range names {
		t := &migrateTable{name: n}
		if t.columns, err = s.strings(ctx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, n); err != nil {
			return nil, err
		}
		if refers[n], err = s.strings(ctx, `SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)`, n); err != nil {
			return nil, err
		}
		if err := s.tx.QueryRowContext(ctx, `SELECT count(*) FROM `+sqliteIdent(n)).Scan(&t.sqlite); err != nil {
			return nil, err
		}
		byName[n] = t
	}
	var ordered []*migrateTable
	state := map[string]int{} // 1 being placed, 2 placed
	var place func(n string) error
	place = func(n string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("the SQLite tables refer to each other in a cycle through %s", n)
		case 2:
			return nil
		}
		state[n] = 1
		for _, r := range refers[n] {
			if r != n && byName[r] != nil {
				if err := place(r); err != nil {
					return err
				}
			}
		}
		state[n] = 2
		ordered = append(ordered, byName[n])
		return nil
	}
	for _, n := range names {
		if err := place(n); err != nil {
			return nil, err
		}
	}
	return ordered, nil
}

func (s *sqliteSnapshot) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func sqliteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// checkTargetEmpty refuses a target where any of the tables exists and has a row.
func checkTargetEmpty(ctx context.Context, dsn string, tables []*migrateTable) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", redactURL(dsn), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	full, err := nonEmptyTables(ctx, conn, tables, false)
	if err != nil {
		return err
	}
	return targetNotEmpty(dsn, full)
}

func targetNotEmpty(dsn string, full []string) error {
	if len(full) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s already has enrichd rows (in %s); migrate copies into an empty database only, and changed nothing",
		errTargetNotEmpty, redactURL(dsn), strings.Join(full, ", "))
}

// pgQuerier is what a pgx connection and a pgx transaction both have.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// nonEmptyTables names the tables that exist in the target and have a row. Those
// missing are an error when mustExist.
func nonEmptyTables(ctx context.Context, q pgQuerier, tables []*migrateTable, mustExist bool) ([]string, error) {
	var full []string
	for _, t := range tables {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{t.name}.Sanitize()).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			if mustExist {
				return nil, fmt.Errorf("the PostgreSQL schema has no table %s, which SQLite has: this enrichd cannot copy it", t.name)
			}
			continue
		}
		var hasRows bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{t.name}.Sanitize()+`)`).Scan(&hasRows); err != nil {
			return nil, err
		}
		if hasRows {
			full = append(full, t.name)
		}
	}
	return full, nil
}

// copyTables copies every table, in order, within tx, then sets every sequence past
// the ids copied and counts the rows PostgreSQL has.
//
// The tables' triggers are off during the copy: the tables they keep (task counts,
// daily credit sums, result reference counts) are copied as SQLite has them, and the
// triggers would add every copied row to them a second time. ALTER TABLE also locks
// each table against other writers until the commit.
func copyTables(ctx context.Context, src *sqliteSnapshot, tx pgx.Tx, tables []*migrateTable) error {
	if _, err := nonEmptyTables(ctx, tx, tables, true); err != nil {
		return err // a table missing
	}
	for _, t := range tables {
		if _, err := tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{t.name}.Sanitize()+` DISABLE TRIGGER USER`); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	// Again, now that the tables are locked: a writer may have come in since the check
	// before the schema was created.
	full, err := nonEmptyTables(ctx, tx, tables, true)
	if err != nil {
		return err
	}
	if err := targetNotEmpty(tx.Conn().Config().ConnString(), full); err != nil {
		return err
	}
	for _, t := range tables {
		if err := pgColumnTypes(ctx, tx, t); err != nil {
			return err
		}
		if err := copyTable(ctx, src, tx, t); err != nil {
			return fmt.Errorf("copying table %s: %w", t.name, err)
		}
	}
	for _, t := range tables {
		if _, err := tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{t.name}.Sanitize()+` ENABLE TRIGGER USER`); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{t.name}.Sanitize()).Scan(&t.postgres); err != nil {
			return err
		}
	}
	return resetSequences(ctx, tx)
}

// pgColumnTypes reads the PostgreSQL type of each of t's columns, and refuses a table
// that lacks one: its values would be lost.
func pgColumnTypes(ctx context.Context, tx pgx.Tx, t *migrateTable) error {
	rows, err := tx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, t.name)
	if err != nil {
		return err
	}
	types, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		err := r.Scan(&c[0], &c[1])
		return c, err
	})
	if err != nil {
		return err
	}
	byName := map[string]string{}
	for _, c := range types {
		byName[c[0]] = c[1]
	}
	t.pgTypes = make([]string, len(t.columns))
	for i, c := range t.columns {
		typ, ok := byName[c]
		if !ok {
			return fmt.Errorf("the PostgreSQL table %s has no column %s, which SQLite's has: this enrichd cannot copy it", t.name, c)
		}
		t.pgTypes[i] = typ
	}
	return nil
}

// copyTable streams t's rows from the SQLite snapshot into PostgreSQL with COPY.
func copyTable(ctx context.Context, src *sqliteSnapshot, tx pgx.Tx, t *migrateTable) error {
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = sqliteIdent(c)
	}
	rows, err := src.tx.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+sqliteIdent(t.name))
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]any, len(t.columns))
	ptrs := make([]any, len(t.columns))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	next := func() ([]any, error) {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		n++
		out := make([]any, len(vals))
		for i, v := range vals {
			c, err := pgValue(v, t.pgTypes[i])
			if err != nil {
				return nil, fmt.Errorf("row %d, column %s: %w", n, t.columns[i], err)
			}
			out[i] = c
		}
		return out, nil
	}
	from := pgx.CopyFromFunc(func() ([]any, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		return next()
	})
	copied, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.columns, from)
	if err != nil {
		return err
	}
	if copied != t.sqlite {
		return fmt.Errorf("copied %d rows of the %d SQLite has", copied, t.sqlite)
	}
	return nil
}

// pgValue is a value SQLite gave, in the form the PostgreSQL column takes. SQLite keeps
// whatever type a value came in; the columns say what it is meant to be.
func pgValue(v any, pgType string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch pgType {
	case "bytea":
		switch x := v.(type) {
		case []byte:
			if x == nil {
				return []byte{}, nil // SQLite's empty blob, which pgx would send as NULL
			}
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "text", "character varying", "json", "jsonb":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case "bigint", "integer", "smallint":
		if x, ok := v.(int64); ok {
			return x, nil
		}
	case "boolean":
		if x, ok := v.(int64); ok {
			return x != 0, nil
		}
	case "double precision", "real":
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	}
	return nil, fmt.Errorf("a %T value for a %s column", v, pgType)
}

// sequenceColumns names, for each sequence that numbers no column of its own (neither
// an identity nor a serial's, nor a column's DEFAULT), the column whose values it hands
// out. A sequence found in neither way fails the migration rather than go unset.
var sequenceColumns = map[string][2]string{
	"queue_turns_seq": {"queue_turns", "seq"}, // fair-queue positions, taken by nextval
}

// sequencesQuery finds, for each sequence of the schema, the column it belongs to (an
// identity or a serial, through pg_depend) or else the first whose DEFAULT calls it.
const sequencesQuery = `SELECT s.relname::text,
		coalesce(owner.relname, dflt.table_name), coalesce(owner.attname, dflt.column_name)
	FROM pg_class s
	JOIN pg_namespace n ON n.oid = s.relnamespace AND n.nspname = current_schema()
	LEFT JOIN LATERAL (SELECT t.relname::text AS relname, a.attname::text AS attname FROM pg_depend d
		JOIN pg_class t ON t.oid = d.refobjid
		JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype IN ('a', 'i') LIMIT 1) owner ON true
	LEFT JOIN LATERAL (SELECT c.table_name::text AS table_name, c.column_name::text AS column_name FROM information_schema.columns c
		WHERE c.table_schema = current_schema() AND c.column_default LIKE '%nextval(''' || s.relname || '''%' LIMIT 1) dflt ON true
	WHERE s.relkind = 'S'`

// resetSequences sets every sequence of the schema past the largest value copied into
// the column it numbers, so that the next row PostgreSQL numbers collides with none.
func resetSequences(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, sequencesQuery)
	if err != nil {
		return err
	}
	type numbered struct{ seq, table, column string }
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (numbered, error) {
		var n numbered
		var table, column *string
		err := r.Scan(&n.seq, &table, &column)
		if table != nil && column != nil {
			n.table, n.column = *table, *column
		}
		return n, err
	})
	if err != nil {
		return err
	}
	for _, n := range found {
		if n.table == "" {
			tc, ok := sequenceColumns[n.seq]
			if !ok {
				return fmt.Errorf("the PostgreSQL sequence %s numbers no column migrate knows of: it cannot be set past the rows copied", n.seq)
			}
			n.table, n.column = tc[0], tc[1]
		}
		if _, err := tx.Exec(ctx, `SELECT setval($1::regclass, coalesce((SELECT max(`+pgx.Identifier{n.column}.Sanitize()+`) FROM `+
			pgx.Identifier{n.table}.Sanitize()+`), 0) + 1, false)`, pgx.Identifier{n.seq}.Sanitize()); err != nil {
			return fmt.Errorf("setting the sequence %s past %s.%s: %w", n.seq, n.table, n.column, err)
		}
	}
	return nil
}

// rowsScanner is what sumCredits reads from either side.
type rowsScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// creditSumsQuery is plain SQL both engines run: an organization's signed ledger sum
// from the ledger itself and from its daily sums (the balance the store reports).
const creditSumsQuery = `SELECT org_id, CAST(sum(amount) AS BIGINT), CAST(sum(daily) AS BIGINT) FROM (
	SELECT org_id, CASE WHEN kind IN ('grant', 'refund') THEN amount ELSE -amount END AS amount, 0 AS daily FROM credit_ledger
	UNION ALL
	SELECT org_id, 0, CASE WHEN kind IN ('grant', 'refund') THEN amount ELSE -amount END FROM credit_days
) AS credits GROUP BY org_id`

func sumCredits[R rowsScanner](ctx context.Context, query func(ctx context.Context, q string, args ...any) (R, error)) (map[string]creditSums, error) {
	rows, err := query(ctx, creditSumsQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]creditSums{}
	for rows.Next() {
		var org string
		var s creditSums
		if err := rows.Scan(&org, &s.ledger, &s.balance); err != nil {
			return nil, err
		}
		out[org] = s
	}
	return out, rows.Err()
}

// pgxRows gives pgx.Rows the Close() error of database/sql's rows.
type pgxRows struct {
	pgx.Rows
}

func (r pgxRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}
