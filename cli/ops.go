package cli

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"enrichd/server"
	"enrichd/store"
	"enrichd/store/sqlite"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Annotations: map[string]string{noDB: "yes"},
		Short:       "Print the version and the Go version it was built with",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "enrichd %s %s %s/%s\n", program(cmd).Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

func newBackupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write a consistent copy of the database to FILE, also while serve runs",
		Long: `Write a consistent copy of the database to FILE (VACUUM INTO), readable by its
owner only, while serve keeps running on the same file. An existing FILE is refused
unless --force. The copy is checked with PRAGMA integrity_check before the command
reports success.

To restore: stop serve, replace the database file with the copy, delete the
database's -wal and -shm files, and start serve again.`,
		Args: cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			to, _ := cmd.Flags().GetString("to")
			force, _ := cmd.Flags().GetBool("force")
			start := time.Now()
			if err := db.Backup(cmd.Context(), to, force); err != nil {
				return err
			}
			if err := sqlite.CheckIntegrity(cmd.Context(), to); err != nil {
				return fmt.Errorf("the backup at %s is damaged: %w", to, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up to %s in %s; integrity check ok\n", to, time.Since(start).Round(time.Millisecond))
			return nil
		}),
	}
	cmd.Flags().String("to", "", "file to write the copy to (required)")
	cmd.Flags().Bool("force", false, "replace FILE if it exists")
	cmd.MarkFlagRequired("to")
	return cmd
}

// addOpsFlags adds the serve flags of operating the service: shutdown, retention and
// the admin listener.
func addOpsFlags(f *pflag.FlagSet, def server.Config) {
	f.String("admin-addr", "", "serve /healthz, /readyz and /metrics on this address instead of --addr (e.g. 127.0.0.1:9090)")
	f.Duration("shutdown-grace", server.DefaultShutdownGrace, "on SIGTERM, how long requests in flight and tasks already claimed may take to finish; tasks still running then go back to the queue")
	addRetentionFlags(f, def)
}

// addRetentionFlags adds serve's retention settings: serve and `privacy report` read
// them alike.
func addRetentionFlags(f *pflag.FlagSet, def server.Config) {
	retain, records, candidates, audit := days(def.Retain), days(def.RetainRecords), days(def.RetainCandidates), days(def.RetainAudit)
	f.Var(&retain, "retain", "delete settled tasks, delivery history and batches this much older than now (e.g. 90d, 36h); 0 keeps them")
	f.Var(&records, "retain-records", "delete the stored records no source has refreshed for this long, with their keys and positions; 0 keeps them")
	f.Var(&candidates, "retain-candidates", "delete the profiles an ambiguous email lookup gathered for a retry with a hint (other people's) this long after, "+
		"at most the freshness window (30d); 0: the freshness window")
	f.Var(&audit, "retain-audit", "delete the audit log's entries (who enriched, exported, erased and suppressed whom; keys, users, sign-ins) "+
		"this much older than now, whatever --retain says, leaving a checkpoint the chain is verified from; 0 keeps them")
}

// retentionFlags reads the retention settings into cfg.
func retentionFlags(f *pflag.FlagSet, cfg *server.Config) {
	cfg.Retain = time.Duration(*f.Lookup("retain").Value.(*days))
	cfg.RetainRecords = time.Duration(*f.Lookup("retain-records").Value.(*days))
	cfg.RetainCandidates = time.Duration(*f.Lookup("retain-candidates").Value.(*days))
	cfg.RetainAudit = time.Duration(*f.Lookup("retain-audit").Value.(*days))
}

// days is a duration flag that also takes whole days, "90d", since retention is
// counted in days.
type days time.Duration

func (d *days) String() string {
	v := time.Duration(*d)
	if v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

func (d *days) Set(s string) error {
	s = strings.TrimSpace(s)
	var v time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		i, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			return fmt.Errorf("want a number of days such as 90d, or a duration such as 36h")
		}
		v = time.Duration(i) * 24 * time.Hour
	} else {
		var err error
		if v, err = time.ParseDuration(s); err != nil {
			return fmt.Errorf("want a number of days such as 90d, or a duration such as 36h")
		}
	}
	if v < 0 {
		return fmt.Errorf("cannot be negative; 0 keeps everything")
	}
	*d = days(v)
	return nil
}

func (d *days) Type() string { return "days" }
