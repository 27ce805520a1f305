package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"enrichd/enrich"
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
			cmd.SetContext(context.WithValue(ctx, programKey{}, p))
			return flagsFromEnv(cmd.Flags())
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().String("db", "./enrichd.db", "path of the SQLite database file")
	root.AddCommand(
		newServeCommand(),
		newOrgsCommand(),
		newKeysCommand(),
		newCreditsCommand(),
		newImportCommand(),
		newTasksCommand(),
		newLoopsCommand(),
		newDeliveriesCommand(),
		newBenchCommand(),
		newBackupCommand(),
		newVersionCommand(),
		newEnrichCommand(),
	)
	return root
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

// openDB opens the database named by --db.
func openDB(cmd *cobra.Command) (*store.DB, error) {
	path, _ := cmd.Flags().GetString("db")
	return store.Open(cmd.Context(), path, program(cmd).Schema)
}

// withDB runs fn with the database open, closing it afterwards.
func withDB(fn func(cmd *cobra.Command, args []string, db *store.DB) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		db, err := openDB(cmd)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, args, db)
	}
}

func requiredOrg(cmd *cobra.Command) {
	cmd.Flags().String("org", "", "organization name (required)")
	cmd.MarkFlagRequired("org")
}

func orgFlag(cmd *cobra.Command) string {
	org, _ := cmd.Flags().GetString("org")
	return org
}

func newOrgsCommand() *cobra.Command {
	orgs := &cobra.Command{Use: "orgs", Short: "Manage organizations"}
	orgs.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create an organization",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.CreateOrg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created organization %s (%s)\n", org.Name, org.ID)
			return nil
		}),
	}, &cobra.Command{
		Use:   "list",
		Short: "List organizations",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgs, err := db.ListOrgs(cmd.Context())
			if err != nil {
				return err
			}
			for _, o := range orgs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", o.Name, o.ID, o.CreatedAt.Format(timeFormat))
			}
			return nil
		}),
	})
	return orgs
}

const timeFormat = "2006-01-02T15:04:05Z"

func newKeysCommand() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage API keys"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print it; it is shown this once and stored only as a hash",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			name, _ := cmd.Flags().GetString("name")
			noCreate, _ := cmd.Flags().GetBool("no-create-org")
			plain, _, err := db.CreateKey(cmd.Context(), orgFlag(cmd), name, !noCreate)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), plain)
			return nil
		}),
	}
	requiredOrg(create)
	create.Flags().String("name", "", "a label for the key")
	create.Flags().Bool("no-create-org", false, "fail instead of creating a missing organization")

	list := &cobra.Command{
		Use:   "list",
		Short: "List an organization's keys by prefix",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			keys, err := db.ListKeys(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			for _, k := range keys {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked " + k.RevokedAt.Format(timeFormat)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s…\t%s\t%q\t%s\t%s\n", k.Prefix, k.ID, k.Name, k.CreatedAt.Format(timeFormat), state)
			}
			return nil
		}),
	}
	requiredOrg(list)

	revoke := &cobra.Command{
		Use:   "revoke ID|PREFIX",
		Short: "Revoke a key; requests with it are refused at once",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			if err := db.RevokeKey(cmd.Context(), orgFlag(cmd), strings.TrimSuffix(args[0], "…")); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "revoked")
			return nil
		}),
	}
	requiredOrg(revoke)
	keys.AddCommand(create, list, revoke)
	return keys
}

func newImportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import FILE.jsonl",
		Short: "Import companies and people into the dataset source (all lines or none); - reads standard input",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			host, _ := cmd.Flags().GetString("network-host")
			stats, err := db.Import(cmd.Context(), in, enrich.Normalizer{NetworkHost: host})
			if err != nil {
				return fmt.Errorf("%s: %w (nothing was imported)", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %d companies and %d people\n", stats.Companies, stats.People)
			return nil
		}),
	}
	cmd.Flags().String("network-host", enrich.DefaultNetworkHost, "host of the professional network whose URLs the file holds")
	return cmd
}

func newTasksCommand() *cobra.Command {
	tasks := &cobra.Command{Use: "tasks", Short: "Look at tasks"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List an organization's tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			status, _ := cmd.Flags().GetString("status")
			if status != "" && !store.IsStatus(status) {
				return fmt.Errorf("--status must be one of queued, running, succeeded, failed, canceled")
			}
			limit, _ := cmd.Flags().GetInt("limit")
			list, total, err := db.ListTasks(cmd.Context(), org.ID, status, 0, max(1, limit))
			if err != nil {
				return err
			}
			for _, t := range list {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\t%s\t%s\n", t.ID, t.CreatedAt.Format(timeFormat), t.ObjectType, t.Status, t.Target)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d of %d tasks\n", len(list), total)
			return nil
		}),
	}
	requiredOrg(list)
	list.Flags().String("status", "", "only tasks of this status")
	list.Flags().Int("limit", 25, "how many tasks to show")
	tasks.AddCommand(list)
	return tasks
}
