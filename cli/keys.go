package cli

import (
	"fmt"
	"strings"

	"enrichd/store"

	"github.com/spf13/cobra"
)

func newKeysCommand() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage API keys"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print it; it is shown this once and stored only as a hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := cmd.Flags().GetString("name")
			noCreate, _ := cmd.Flags().GetBool("no-create-org")
			open := openDB
			if noCreate {
				// No organization can exist in a database that does not: refuse
				// before creating an empty one.
				open = openExistingDB
			}
			db, err := open(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			plain, _, err := db.CreateKey(cmd.Context(), store.ByOperator, orgFlag(cmd), name, !noCreate)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), plain)
			return nil
		},
	}
	requiredOrg(create)
	create.Flags().String("name", "", "a label for the key")
	create.Flags().Bool("no-create-org", false, "fail instead of creating a missing organization")

	list := listCommand(&cobra.Command{
		Use:   "list",
		Short: "List an organization's keys by prefix",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			keys, err := db.ListKeys(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			return printList(cmd, keys, []string{"PREFIX", "ID", "NAME", "CREATED", "STATE"}, func(k store.APIKey) []string {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked " + k.RevokedAt.Format(timeFormat)
				}
				return []string{k.Prefix + "…", k.ID, fmt.Sprintf("%q", k.Name), k.CreatedAt.Format(timeFormat), state}
			})
		}),
	})
	requiredOrg(list)

	revoke := &cobra.Command{
		Use:   "revoke ID|PREFIX",
		Short: "Revoke a key; requests with it are refused at once",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			if err := db.RevokeKey(cmd.Context(), store.ByOperator, orgFlag(cmd), strings.TrimSuffix(args[0], "…")); err != nil {
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
