package cli

import (
	"fmt"
	"strings"
	"time"

	"enrichd/server"
	"enrichd/store"

	"github.com/spf13/cobra"
)

// personFlags gives a command --email and --network-url, one of which names the person,
// and --org or --all-orgs, whose data it is about.
func personFlags(cmd *cobra.Command) {
	orgScopeFlags(cmd, "the organization whose data is erased or exported", "every organization of the installation")
	f := cmd.Flags()
	f.String("email", "", "the person's address")
	f.String("network-url", "", "the person's profile URL")
	f.String("network-host", server.DefaultConfig().NetworkHost, "host of the professional network whose URLs are accepted (as serve's)")
	addSecretKeyFlag(f)
}

// personRequest is the person --email or --network-url names, checked as the API
// checks them.
func personRequest(cmd *cobra.Command) server.ErasureRequest {
	f := cmd.Flags()
	var req server.ErasureRequest
	if f.Changed("email") {
		v, _ := f.GetString("email")
		req.Email = &v
	}
	if f.Changed("network-url") {
		v, _ := f.GetString("network-url")
		req.NetworkURL = &v
	}
	return req
}

func newEraseCommand() *cobra.Command {
	erase := &cobra.Command{
		Use:   "erase (--org ORG | --all-orgs) (--email ADDRESS | --network-url PROFILE)",
		Short: "Erase a person from everything an organization holds, or every organization; prints the erasure as JSON",
		Long: "Erase a person (GDPR Art. 17) as POST /v1/erasures does, for one organization or, with --all-orgs, every\n" +
			"organization of the installation: every identifier found for them is followed (the profile an address belongs\n" +
			"to, the addresses on record for a profile), their stored and imported records, gathered profiles, misses,\n" +
			"watches and unsent deliveries are deleted, their tasks, batch rows and sent deliveries kept without their data,\n" +
			"every Loop that was sent them is told by a person.erased event (sent by serve), and they are suppressed (for\n" +
			"the installation with --all-orgs). The erasure completes once serve has delivered its events and rid the\n" +
			"database's files of what was erased; enrichd erasures shows when.",
		Args: cobra.NoArgs,
		RunE: withPersonalDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgID, err := suppressionScope(cmd, db)
			if err != nil {
				return err
			}
			host, _ := cmd.Flags().GetString("network-host")
			ne, err := server.CheckErasure(host, orgID, personRequest(cmd), store.AddedBy{Kind: store.AddedByCLI})
			if err != nil {
				return err
			}
			er, err := db.Erase(cmd.Context(), store.ByOperator, ne)
			if err != nil {
				return err
			}
			// Without events to send, it completes now: the files are scrubbed here. A
			// reader of serve's in the way is tried again for a few seconds; past them, serve
			// completes it (docs/privacy.md).
			if len(er.Loops) == 0 {
				for deadline := time.Now().Add(cliScrubTries); ; time.Sleep(200 * time.Millisecond) {
					if _, err := db.CompleteErasures(cmd.Context()); err != nil {
						return err
					}
					if held, _ := db.ErasuresHeld(); held == "" || time.Now().After(deadline) {
						break
					}
				}
				if er, err = db.GetErasure(cmd.Context(), orgID, er.ID); err != nil {
					return err
				}
			}
			return printJSON(cmd, er)
		}),
	}
	personFlags(erase)
	return erase
}

func newErasuresCommand() *cobra.Command {
	list := listCommand(&cobra.Command{
		Use:   "erasures (--org ORG | --all-orgs)",
		Short: "List an organization's erasures, or the installation's, newest first",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgID, err := suppressionScope(cmd, db)
			if err != nil {
				return err
			}
			page, err := pageOf(cmd, store.MaxErasurePage)
			if err != nil {
				return err
			}
			all, total, err := db.ListErasures(cmd.Context(), orgID, page, store.MaxErasurePage)
			if err != nil {
				return err
			}
			err = printList(cmd, all, []string{"ID", "HINT", "REQUESTED_BY", "CREATED", "COMPLETED", "LOOPS_TOLD", "REMOVED"}, func(er *store.Erasure) []string {
				by := addedByText(er.RequestedBy)
				completed := "pending"
				if er.CompletedAt != nil {
					completed = er.CompletedAt.Format(timeFormat)
				}
				var removed []string
				for _, p := range store.PersonalTables() {
					if n := er.Removed[p.Name]; n > 0 {
						removed = append(removed, fmt.Sprintf("%s=%d", p.Name, n))
					}
				}
				return []string{er.ID, er.Hint, by, er.CreatedAt.Format(timeFormat), completed, fmt.Sprint(len(er.Loops)), strings.Join(removed, " ")}
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d erasures\n", len(all), total)
			return err
		}),
	})
	list.Flags().Int("page", 0, fmt.Sprintf("the page, from 0, of %d", store.MaxErasurePage))
	orgScopeFlags(list, "the organization whose erasures to list", "the installation's erasures, made with enrichd erase --all-orgs")
	return list
}

func newExportCommand() *cobra.Command {
	export := &cobra.Command{
		Use:   "export (--org ORG | --all-orgs) (--email ADDRESS | --network-url PROFILE)",
		Short: "Print everything an organization, or every organization, holds on a person as one JSON document",
		Long: "Export what is held on a person (GDPR Art. 15) as GET /v1/people/export does: the stored records with where and\n" +
			"when each field came from, every task about them, the Loops sent them, the batches that held them, the watches,\n" +
			"the suppressions and erasures. --all-orgs shows every organization's.",
		Args: cobra.NoArgs,
		RunE: withPersonalDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgID, err := suppressionScope(cmd, db)
			if err != nil {
				return err
			}
			host, _ := cmd.Flags().GetString("network-host")
			sub, err := server.CheckExport(host, personRequest(cmd))
			if err != nil {
				return err
			}
			x, err := db.ExportPerson(cmd.Context(), store.ByOperator, orgID, orgID == "", sub)
			if err != nil {
				return err
			}
			return printJSON(cmd, x)
		}),
	}
	personFlags(export)
	return export
}

// cliScrubTries is how long `enrichd erase` tries to scrub the files of an erasure with
// no events to send before it leaves that to serve's completer.
const cliScrubTries = 10 * time.Second
