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
		RunE: withNewDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
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
