package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"enrichd/store"

	"github.com/spf13/cobra"
)

func newAuditCommand() *cobra.Command {
	audit := &cobra.Command{Use: "audit", Short: "The audit log: who looked up, exported, erased and suppressed whom, and who may"}
	verify := &cobra.Command{
		Use:   "verify [--org ORG]",
		Short: "Walk the audit log's hash chains and fail, naming the first bad entry, if any entry was changed or removed",
		Long: `Walk each organization's audit chain (with --org, that organization's alone; without, every
organization's and the installation's own) from its checkpoint to its head, and check each
entry: that its hash is that of what it holds, that it follows the entry before, that no
place in the chain is missing, that the chain's head is its last entry, that each subject
shown is the one the entry was written with (under the secret key file), that a subject
blanked is followed by an erasure, and that a cut of the oldest entries was made by
retention. It prints each chain's head (its last entry's number and hash): kept somewhere
else, a later verify that still passes through it shows the chain was not written again
from there. It exits with an error, naming the first bad entry of each chain that fails,
if any does. See docs/privacy.md.`,
		Args: cobra.NoArgs,
		RunE: withPersonalDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			ctx := cmd.Context()
			orgs, err := db.ListOrgs(ctx)
			if err != nil {
				return err
			}
			names := map[string]string{"": "(installation)"}
			for _, o := range orgs {
				names[o.ID] = o.Name
			}
			orgID, all := "", true
			if name := orgFlag(cmd); name != "" {
				org, err := db.FindOrg(ctx, name)
				if err != nil {
					return err
				}
				orgID, all = org.ID, false
			}
			chains, err := db.VerifyAudit(ctx, orgID, all)
			if err != nil {
				return err
			}
			bad := 0
			for _, c := range chains {
				if c.Bad != nil {
					bad++
				}
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				type shown struct {
					Org string `json:"org"`
					store.AuditChain
				}
				out := []shown{}
				for _, c := range chains {
					out = append(out, shown{Org: names[c.OrgID], AuditChain: c})
				}
				if err := printJSON(cmd, out); err != nil {
					return err
				}
			} else {
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				if len(chains) == 0 {
					fmt.Fprintln(w, "no audit entries")
				}
				for _, c := range chains {
					name := names[c.OrgID]
					if name == "" {
						name = c.OrgID // an organization deleted behind enrichd's back
					}
					if c.Bad != nil {
						fmt.Fprintf(w, "%s\tFAILED at entry %d: %s\n", name, c.Bad.Seq, c.Bad.Problem)
						continue
					}
					from := ""
					if c.Head.BaseSeq > 0 {
						from = fmt.Sprintf(", from the checkpoint at entry %d", c.Head.BaseSeq)
					}
					fmt.Fprintf(w, "%s\tok: %d entries%s; head: entry %d, %s", name, c.Entries, from, c.Head.Seq, c.Head.Hash)
					if c.Erased > 0 {
						fmt.Fprintf(w, "; %d subjects erased", c.Erased)
					}
					fmt.Fprintln(w)
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			switch {
			case bad == 1:
				return errors.New("an audit chain does not verify: an entry was changed or removed behind enrichd's back")
			case bad > 1:
				return fmt.Errorf("%d audit chains do not verify: entries were changed or removed behind enrichd's back", bad)
			}
			return nil
		}),
	}
	verify.Flags().String("org", "", "verify this organization's chain alone")
	verify.Flags().Bool("json", false, "print each chain as a JSON object")
	addSecretKeyFlag(verify.Flags())
	audit.AddCommand(verify)
	return audit
}
