package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/secret"
	"enrichd/server"
	"enrichd/store"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// keyedSources are the sources an organization can set its own key for, with how each
// key is checked before it is stored.
var keyedSources = map[string]struct {
	title string
	def   source.VendorConfig
	build func(source.VendorConfig) (source.KeyChecker, error)
}{
	"enrichlayer": {"Enrich Layer", source.EnrichLayerDefaults,
		func(c source.VendorConfig) (source.KeyChecker, error) { return source.NewEnrichLayer(c) }},
	"pdl": {"People Data Labs", source.PDLDefaults,
		func(c source.VendorConfig) (source.KeyChecker, error) { return source.NewPDL(c) }},
	"apollo": {"Apollo", source.ApolloDefaults,
		func(c source.VendorConfig) (source.KeyChecker, error) { return source.NewApollo(c) }},
}

const keyedSourceNames = "enrichlayer, pdl, apollo"

// maxVendorKey bounds what set-key reads from standard input.
const maxVendorKey = 4 << 10

// addSecretKeyFlag adds --secret-key-file, the installation's key file: it seals the
// organizations' own vendor keys and names the people enrichd holds data about by
// keyed hashes.
func addSecretKeyFlag(f *pflag.FlagSet) {
	f.String("secret-key-file", "", "file holding the installation's secret key, mode 0600: it seals organizations' own vendor keys (AES-256-GCM) "+
		"and names the people enrichd holds data about by keyed hashes (HMAC-SHA256; suppressions are kept that way); "+
		"created on first use when missing; default: the SQLite database's path with .secret-key appended (required with PostgreSQL, "+
		"where every replica and every command that writes or checks data about people needs the same file)")
}

// errSecretKeyRequired is a command on PostgreSQL without --secret-key-file that needs
// the key: serve, and every command that writes or checks data about people.
var errSecretKeyRequired = errors.New("--secret-key-file is required with PostgreSQL: give serve on every replica, and every enrichd command " +
	"that writes or checks data about people (import, watches create, suppressions add), the same key file; it seals organizations' " +
	"own vendor keys and names the people enrichd holds data about by keyed hashes, so a process with another file would not find them " +
	"(docs/privacy.md)")

// secretKeyPath is the key file --secret-key-file names, or its default beside a
// SQLite database; "" for PostgreSQL without one.
func secretKeyPath(cmd *cobra.Command) string {
	path, _ := cmd.Flags().GetString("secret-key-file")
	if path != "" {
		return path
	}
	db, _ := cmd.Flags().GetString("db")
	if store.Engine(db) != "sqlite" {
		return ""
	}
	return db + ".secret-key"
}

// openSecrets reads the key file, creating it when missing. With PostgreSQL and no
// --secret-key-file it fails (errSecretKeyRequired).
func openSecrets(cmd *cobra.Command, log *slog.Logger) (*secret.Box, error) {
	path := secretKeyPath(cmd)
	if path == "" {
		return nil, errSecretKeyRequired
	}
	box, created, err := secret.LoadOrCreate(path)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	if created {
		abs, _ := filepath.Abs(path)
		log.Warn("created the secret key file (mode 0600): back it up with the database; without it the organizations' own vendor keys "+
			"cannot be read, nor the suppressions and the rows about people found", "path", abs)
	}
	return box, nil
}

// withPersonalDB is withDB for a command that writes or checks data about people: the
// database is opened with the subject key of the secret key file (openSecrets), and
// refused without one on PostgreSQL.
func withPersonalDB(fn func(cmd *cobra.Command, args []string, db *store.DB) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := checkDBExists(cmd); err != nil {
			return err
		}
		db, err := openPersonalDB(cmd)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, args, db)
	}
}

// openPersonalDB opens the database named by --db, creating it when missing, with the
// subject key of the secret key file.
func openPersonalDB(cmd *cobra.Command) (*store.DB, error) {
	box, err := openSecrets(cmd, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
	if err != nil {
		return nil, err
	}
	path, _ := cmd.Flags().GetString("db")
	return store.Open(cmd.Context(), path, program(cmd).Schema, store.WithSubjectKey(box.SubjectKey()))
}

// warnSealedElsewhere logs the organizations' keys the key file in use cannot open.
func warnSealedElsewhere(ctx context.Context, db *store.DB, box *secret.Box, log *slog.Logger) {
	n, err := db.SourceKeysSealedElsewhere(ctx, box.ID())
	if err != nil || n == 0 {
		return
	}
	log.Warn("organizations' own vendor keys were sealed under another secret key file and cannot be read: put that file back, or set the keys again (enrichd sources set-key)", "keys", n)
}

// addSourceKeyCommands adds set-key, clear-key and keys to the sources command.
func addSourceKeyCommands(sources *cobra.Command) {

	setKey := &cobra.Command{
		Use:   "set-key SOURCE",
		Short: "Set an organization's own API key for a vendor source, read from standard input",
		Long: `Set an organization's own API key for a vendor source (` + keyedSourceNames + `). The key is read
from standard input, never from an argument, so it stays out of the shell's history.
It is checked with one cheap call to the vendor first, then stored sealed with
AES-256-GCM under the secret key file, and shown from then on by its last 4
characters only. The organization's tasks then ask that source with its own key,
and the records so fetched are served to that organization alone.`,
		Args: cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			name := args[0]
			vendor, ok := keyedSources[name]
			if !ok {
				return fmt.Errorf("%q takes no API key: an organization can set its own key for %s", name, keyedSourceNames)
			}
			ctx := cmd.Context()
			org, err := db.FindOrg(ctx, orgFlag(cmd))
			if err != nil {
				return err
			}
			if secretKeyPath(cmd) == "" {
				return errors.New("--secret-key-file is required with PostgreSQL: give every replica the same file")
			}
			key, err := readVendorKey(cmd)
			if err != nil {
				return err
			}
			base, _ := cmd.Flags().GetString(name + "-url")
			host, _ := cmd.Flags().GetString("network-host")
			chk, err := vendor.build(source.VendorConfig{APIKey: key, BaseURL: base, NetworkHost: host, OwnKey: true, Attempts: 1,
				Logger: discardLogger()})
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			// The key file is opened (or made) once the vendor accepted the key.
			openBox := func() (*secret.Box, error) {
				return openSecrets(cmd, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
			}
			fallback, _ := cmd.Flags().GetBool("allow-fallback")
			if err := server.StoreSourceKey(ctx, db, openBox, chk, org.ID, name, key, fallback); err != nil {
				return err
			}
			when := "never: its tasks skip " + name + " while its key is failing"
			if fallback {
				when = "while its own key is failing"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: organization %s now uses its own key %s (checked: %s accepted it)\nthe installation's key is used for it %s\n",
				name, org.Name, secret.Last4(key), vendor.title, when)
			return nil
		}),
	}
	requiredOrg(setKey)
	setKey.Flags().Bool("allow-fallback", false, "while the vendor refuses the organization's key, its tasks use the installation's key for this source instead of skipping it")
	addSecretKeyFlag(setKey.Flags())
	setKey.Flags().String("network-host", server.DefaultConfig().NetworkHost, "host of the professional network whose URLs are accepted (as serve's)")
	for _, name := range []string{"enrichlayer", "pdl", "apollo"} {
		v := keyedSources[name]
		setKey.Flags().String(name+"-url", v.def.BaseURL, "base URL of the "+v.title+" API the key is checked against (as serve's)")
	}

	clearKey := &cobra.Command{
		Use:   "clear-key SOURCE",
		Short: "Forget an organization's own API key for a source: its tasks use the installation's key again",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			cleared, err := db.ClearSourceKey(cmd.Context(), org.ID, args[0])
			if err != nil {
				return err
			}
			if !cleared {
				return enrich.Errorf(enrich.KindNotFound, "organization %s has no key of its own for %s", org.Name, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: organization %s uses the installation's key again\n", args[0], org.Name)
			return nil
		}),
	}
	requiredOrg(clearKey)

	keys := listCommand(&cobra.Command{
		Use:   "keys",
		Short: "List an organization's own vendor keys: last 4 characters, fallback, failing or not",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			list, err := db.OrgSourceKeys(cmd.Context(), org.ID)
			if err != nil {
				return err
			}
			type shown struct {
				Source        string     `json:"source"`
				Key           string     `json:"key"`
				AllowFallback bool       `json:"allow_fallback"`
				Failing       bool       `json:"failing"`
				FailingReason string     `json:"failing_reason,omitempty"`
				FailingSince  *time.Time `json:"failing_since,omitempty"`
				UpdatedAt     time.Time  `json:"updated_at"`
			}
			out := make([]shown, 0, len(list))
			for _, k := range list {
				out = append(out, shown{k.Source, k.Last4, k.AllowFallback, k.Failing(), k.FailingReason, k.FailingAt, k.UpdatedAt})
			}
			return printList(cmd, out, []string{"SOURCE", "KEY", "FALLBACK", "STATUS", "UPDATED"}, func(s shown) []string {
				status := "ok"
				if s.Failing {
					status = "failing since " + s.FailingSince.Format(timeFormat) + ": " + s.FailingReason
				}
				return []string{s.Source, s.Key, map[bool]string{true: "yes", false: "no"}[s.AllowFallback], status, s.UpdatedAt.Format(timeFormat)}
			})
		}),
	})
	requiredOrg(keys)

	sources.AddCommand(setKey, clearKey, keys)
}

// readVendorKey reads one key from standard input: one line, no spaces in it. From a
// terminal it is read without echo.
func readVendorKey(cmd *cobra.Command) (string, error) {
	in := cmd.InOrStdin()
	var raw []byte
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(cmd.ErrOrStderr(), "API key (not shown): ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return "", err
		}
		raw = b
	} else {
		line, err := bufio.NewReader(io.LimitReader(in, maxVendorKey+1)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		raw = []byte(line)
	}
	if len(raw) > maxVendorKey {
		return "", fmt.Errorf("the key read from standard input is longer than %d bytes", maxVendorKey)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" {
		return "", errors.New("no key on standard input: pipe it in, e.g. enrichd sources set-key --org NAME pdl < key.txt")
	}
	if strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", errors.New("the key read from standard input has spaces or control characters in it: give the key alone, on one line")
	}
	return key, nil
}

// discardLogger is a logger for a one-off vendor call whose outcome the command
// reports itself.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
