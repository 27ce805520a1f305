package cli

import (
	"context"
	"encoding/json"
	_ "enrichd/store/postgres" // the engine several replicas share
	_ "enrichd/store/sqlite"   // the default engine
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"enrichd/store"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Program is what the binary brings to its commands from outside this package: the
// schema embedded beside main and the release it was built as.
type Program struct {
	Schema  string
	Version string
}

type programKey struct{}

// program is the Program the root command was built with; every command runs under it.
func program(cmd *cobra.Command) Program {
	p, _ := cmd.Context().Value(programKey{}).(Program)
	return p
}

// NewRootCommand builds the CLI. Every flag can also be set from the environment as
// ENRICHD_<FLAG> (--db: ENRICHD_DB, --rate-ip: ENRICHD_RATE_IP); a flag on the command
// line wins.
func NewRootCommand(p Program, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "enrichd",
		Short:         "Self-hosted company and person enrichment: one binary, one SQLite file",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx = context.WithValue(ctx, programKey{}, p)
			cmd.SetContext(ctx)
			return flagsFromEnv(cmd.Flags())
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newServeCommand(),
		newWaitReadyCommand(),
		newOrgsCommand(),
		newKeysCommand(),
		newUsersCommand(),
		newCreditsCommand(),
		newImportCommand(),
		newTasksCommand(),
		newLoopsCommand(),
		newDeliveriesCommand(),
		newWatchesCommand(),
		newSuppressionsCommand(),
		newAuditCommand(),
		newEraseCommand(),
		newErasuresCommand(),
		newExportCommand(),
		newBenchCommand(),
		newBackupCommand(),
		newMigrateCommand(),
		newVersionCommand(),
		newEnrichCommand(),
		newSourcesCommand(),
		newPrivacyCommand(),
		newSimCommand(),
	)
	addDBFlag(root)
	return root
}

// noDB marks, in a command's Annotations, a command that opens no database: it gets
// no --db flag, so its help lists no flag it would ignore.
const noDB = "enrichd-no-db"

// addDBFlag gives every runnable command under c, but those marked noDB, the --db flag.
func addDBFlag(c *cobra.Command) {
	if c.Runnable() && c.Annotations[noDB] == "" {
		c.Flags().String("db", "./enrichd.db", "path of the SQLite database file, or a postgres:// URL")
	}
	for _, sub := range c.Commands() {
		addDBFlag(sub)
	}
}

func flagsFromEnv(flags *pflag.FlagSet) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		env := "ENRICHD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !f.Changed && err == nil {
			if serr := flags.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, serr)
			}
		}
	})
	return err
}

// openDB opens the database named by --db, creating it when missing. Only the
// commands that set a deployment up use it: serve, orgs create, keys create, import.
func openDB(cmd *cobra.Command) (*store.DB, error) {
	path, _ := cmd.Flags().GetString("db")
	return store.Open(cmd.Context(), path, program(cmd).Schema)
}

// openExistingDB opens the database named by --db and refuses a missing one, so a
// mistyped path is an error naming it rather than a fresh empty database that reads as
// zeros. A file removed between the check and the open is created empty as before,
// which only costs that one command its answer.
func openExistingDB(cmd *cobra.Command) (*store.DB, error) {
	if err := checkDBExists(cmd); err != nil {
		return nil, err
	}
	return openDB(cmd)
}

// checkDBExists fails unless --db names an existing regular file. A PostgreSQL
// database exists if it can be connected to, which opening it finds out.
func checkDBExists(cmd *cobra.Command) error {
	path, _ := cmd.Flags().GetString("db")
	if store.Engine(path) != "sqlite" {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no database at %s (give --db the path serve uses; `enrichd orgs create` or `enrichd serve` creates one)", path)
	case err != nil:
		return fmt.Errorf("database %s: %w", path, store.StripPath(err))
	case !fi.Mode().IsRegular():
		return fmt.Errorf("database %s is not a file", path)
	}
	return nil
}

// withDB runs fn with an existing database open, closing it afterwards.
func withDB(fn func(cmd *cobra.Command, args []string, db *store.DB) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		db, err := openExistingDB(cmd)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, args, db)
	}
}

// withNewDB is withDB for a command that may set a deployment up: it creates the
// database when missing.
func withNewDB(fn func(cmd *cobra.Command, args []string, db *store.DB) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		db, err := openDB(cmd)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, args, db)
	}
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// listCommand gives a list command its --json flag.
func listCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Flags().Bool("json", false, "print a JSON array of objects instead of a table")
	return cmd
}

// maxListedRows bounds how deep --page reaches into a paged list (as the API's offsets).
const maxListedRows = 10_000

// pageOf is a paged list command's --page, refused past maxListedRows at perPage rows
// a page.
func pageOf(cmd *cobra.Command, perPage int) (int, error) {
	page, _ := cmd.Flags().GetInt("page")
	if page < 0 || page*perPage > maxListedRows {
		return 0, fmt.Errorf("--page must be from 0 to %d", maxListedRows/perPage)
	}
	return page, nil
}

// addedByText is who added a suppression or asked an erasure, as a list shows it:
// the kind, and the name where there is one.
func addedByText(by store.AddedBy) string {
	if by.Name == nil {
		return by.Kind
	}
	return by.Kind + " " + *by.Name
}

// printList prints a list command's rows: tab-separated under a header row, or with
// --json the items as a JSON array ([] when there are none).
func printList[T any](cmd *cobra.Command, items []T, header []string, row func(T) []string) error {
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		if items == nil {
			items = []T{}
		}
		return printJSON(cmd, items)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, it := range items {
		fmt.Fprintln(w, strings.Join(row(it), "\t"))
	}
	return nil
}

func requiredOrg(cmd *cobra.Command) {
	cmd.Flags().String("org", "", "organization name (required)")
	cmd.MarkFlagRequired("org")
}

func orgFlag(cmd *cobra.Command) string {
	org, _ := cmd.Flags().GetString("org")
	return org
}

const timeFormat = "2006-01-02T15:04:05Z"
