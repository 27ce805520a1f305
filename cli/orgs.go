package cli

import (
	"fmt"

	"enrichd/store"

	"github.com/spf13/cobra"
)

func newOrgsCommand() *cobra.Command {
	orgs := &cobra.Command{Use: "orgs", Short: "Manage organizations"}
	orgs.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create an organization",
		Args:  cobra.ExactArgs(1),
		RunE: withNewDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.CreateOrg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created organization %s (%s)\n", org.Name, org.ID)
			return nil
		}),
	}, listCommand(&cobra.Command{
		Use:   "list",
		Short: "List organizations",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			orgs, err := db.ListOrgs(cmd.Context())
			if err != nil {
				return err
			}
			return printList(cmd, orgs, []string{"NAME", "ID", "CREATED"}, func(o store.Org) []string {
				return []string{o.Name, o.ID, o.CreatedAt.Format(timeFormat)}
			})
		}),
	}))
	return orgs
}
