package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"

	"github.com/spf13/cobra"
)

func newSuppressionsCommand() *cobra.Command {
	suppressions := &cobra.Command{Use: "suppressions", Short: "Manage suppressions: people and companies never to enrich",
		Long: "A suppression (an objection, a do-not-contact request) makes every enrichment of its subject fail not_found,\n" +
			"refunded, before the store and any source: an address, a profile, or a domain (its company and every address\n" +
			"at it). It is kept as a keyed hash under the secret key file with a masked hint, never the value.\n" +
			"An organization's entries are its own (also POST /v1/suppressions); --all-orgs ones hold for every organization\n" +
			"of the installation and only the CLI adds, lists and lifts them."}

	add := &cobra.Command{
		Use:   "add (--org ORG | --all-orgs) (--email ADDRESS | --network-url PROFILE | --domain DOMAIN | --csv FILE)",
		Short: "Suppress a person or a company, or a CSV of them; prints the entry as JSON",
		Long: "Suppress one subject, or every row of a CSV file (a header with any of email, networkUrl, domain, reason; every\n" +
			"row checked first, as POST /v1/suppressions checks it; - reads standard input). A subject already suppressed\n" +
			"is an error alone, passed over in a file. Watches of it are paused.",
		Args: cobra.NoArgs,
		RunE: withPersonalDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			f := cmd.Flags()
			orgID, err := suppressionScope(cmd, db)
			if err != nil {
				return err
			}
			host, _ := f.GetString("network-host")
			by := store.AddedBy{Kind: store.AddedByCLI}
			if file, _ := f.GetString("csv"); file != "" {
				if f.Changed("email") || f.Changed("network-url") || f.Changed("domain") || f.Changed("reason") {
					return errors.New("--csv holds the subjects and their reasons: give it alone")
				}
				body, err := readFileArg(cmd, file)
				if err != nil {
					return err
				}
				list, err := server.ReadSuppressionsCSV(host, orgID, body, by)
				if err != nil {
					return rowsError(file, err)
				}
				added, existing, err := db.ImportSuppressions(cmd.Context(), store.ByOperator, list)
				if err != nil {
					return err
				}
				return printJSON(cmd, server.SuppressionImport{Added: added, Existing: existing})
			}
			var req server.SuppressionRequest
			for flag, field := range map[string]**string{"email": &req.Email, "network-url": &req.NetworkURL, "domain": &req.Domain, "reason": &req.Reason} {
				if f.Changed(flag) {
					v, _ := f.GetString(flag)
					*field = &v
				}
			}
			ns, err := server.CheckSuppression(host, orgID, req, by)
			if err != nil {
				return err
			}
			s, err := db.AddSuppression(cmd.Context(), store.ByOperator, ns)
			if err != nil {
				return err
			}
			return printJSON(cmd, s)
		}),
	}
	af := add.Flags()
	af.String("email", "", "a person's address")
	af.String("network-url", "", "a person's profile URL")
	af.String("domain", "", "a company: its record and every address at it")
	af.String("reason", "", "why, at most 500 characters")
	af.String("csv", "", "a CSV file of subjects (columns email, networkUrl, domain, reason); - reads standard input")
	af.String("network-host", server.DefaultConfig().NetworkHost, "host of the professional network whose URLs are accepted (as serve's)")
	addSecretKeyFlag(af)
	scopeFlags(add)

	list := listCommand(&cobra.Command{
		Use:   "list (--org ORG | --all-orgs)",
		Short: "List an organization's suppressions, or the installation's, newest first",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgID, err := suppressionScope(cmd, db)
			if err != nil {
				return err
			}
			page, err := pageOf(cmd, store.MaxSuppressionPage)
			if err != nil {
				return err
			}
			all, total, err := db.ListSuppressions(cmd.Context(), orgID, page, store.MaxSuppressionPage)
			if err != nil {
				return err
			}
			err = printList(cmd, all, []string{"ID", "KIND", "HINT", "ADDED_BY", "CREATED", "REASON"}, func(s *store.Suppression) []string {
				by := addedByText(s.AddedBy)
				reason := ""
				if s.Reason != nil {
					reason = *s.Reason
				}
				return []string{s.ID, s.Kind, s.Hint, by, s.CreatedAt.Format(timeFormat), reason}
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d suppressions\n", len(all), total)
			return err
		}),
	})
	list.Flags().Int("page", 0, fmt.Sprintf("the page, from 0, of %d", store.MaxSuppressionPage))
	scopeFlags(list)

	remove := &cobra.Command{
		Use:   "remove ID (--org ORG | --all-orgs)",
		Short: "Lift a suppression: its subject may be enriched again (watches it paused stay paused)",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgID, err := suppressionScope(cmd, db)
			if err != nil {
				return err
			}
			s, err := db.DeleteSuppression(cmd.Context(), store.ByOperator, orgID, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lifted the suppression of %s (%s)\n", s.Hint, s.Kind)
			return nil
		}),
	}
	scopeFlags(remove)

	suppressions.AddCommand(add, list, remove)
	return suppressions
}

// scopeFlags gives a suppressions command --org and --all-orgs, one of which it needs.
func scopeFlags(cmd *cobra.Command) {
	orgScopeFlags(cmd, "the organization whose suppressions these are", "the installation's suppressions, which hold for every organization")
}

// orgScopeFlags gives a command --org and --all-orgs, one of which it needs.
func orgScopeFlags(cmd *cobra.Command, org, allOrgs string) {
	cmd.Flags().String("org", "", org)
	cmd.Flags().Bool("all-orgs", false, allOrgs)
	cmd.MarkFlagsMutuallyExclusive("org", "all-orgs")
	cmd.MarkFlagsOneRequired("org", "all-orgs")
}

// suppressionScope is the organization's id of --org, or "" for --all-orgs.
func suppressionScope(cmd *cobra.Command, db *store.DB) (string, error) {
	if all, _ := cmd.Flags().GetBool("all-orgs"); all {
		return "", nil
	}
	org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
	if err != nil {
		return "", err
	}
	return org.ID, nil
}

// readFileArg reads the file a flag names, - for standard input, at most the size an
// upload may have.
func readFileArg(cmd *cobra.Command, name string) ([]byte, error) {
	var in io.Reader = cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	body, err := io.ReadAll(io.LimitReader(in, store.MaxBatchBytes+1))
	if err != nil {
		return nil, err
	}
	return body, nil
}

// rowsError is an upload's refusal as the CLI prints it: the message, then each
// refused row with its number and line.
func rowsError(file string, err error) error {
	var e *enrich.Error
	if !errors.As(err, &e) || len(e.Rows) == 0 {
		return fmt.Errorf("%s: %w", file, err)
	}
	var b strings.Builder
	b.WriteString(file + ": " + e.Message)
	for _, r := range e.Rows {
		fmt.Fprintf(&b, "\n  row %d (line %d): %s", r.Row, r.Line, r.Message)
	}
	return errors.New(b.String())
}
