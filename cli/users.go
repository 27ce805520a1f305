package cli

import (
	"fmt"
	"net/url"
	"strings"

	"enrichd/server"
	"enrichd/store"

	"github.com/spf13/cobra"
)

// publicURLFlag gives a command that prints a dashboard link the address to build it
// on. Like every flag it reads its variable, ENRICHD_PUBLIC_URL: set where serve runs,
// a link printed on that host points at the dashboard as people reach it.
func publicURLFlag(cmd *cobra.Command) {
	cmd.Flags().String("public-url", "http://"+server.DefaultConfig().Addr,
		"the address people open enrichd at (behind a proxy, the proxy's), for the link (or ENRICHD_PUBLIC_URL)")
}

// publicURL is --public-url checked, without its trailing slash.
func publicURL(cmd *cobra.Command) (string, error) {
	raw, _ := cmd.Flags().GetString("public-url")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--public-url %q must be an http or https URL such as https://enrichd.example.com, without query or fragment", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// printSetupLink prints the one-time link to the dashboard's set-password page.
func printSetupLink(cmd *cobra.Command, base, token string) {
	fmt.Fprintf(cmd.OutOrStdout(), "Set-password link, valid %d h and for a single use (`enrichd users reset-password` makes a new one):\n%s/dashboard/setup?token=%s\n",
		int(store.SetupLinkTTL.Hours()), base, url.QueryEscape(token))
}

func emailFlag(cmd *cobra.Command) {
	cmd.Flags().String("email", "", "the user's email address (required)")
	cmd.MarkFlagRequired("email")
}

func newUsersCommand() *cobra.Command {
	users := &cobra.Command{Use: "users", Short: "Manage the people who sign in to the dashboard"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Add a user to an organization and print a one-time link to set a password",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := publicURL(cmd)
			if err != nil {
				return err
			}
			return withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				email, _ := cmd.Flags().GetString("email")
				role, _ := cmd.Flags().GetString("role")
				u, token, err := db.CreateUser(cmd.Context(), store.ByOperator, orgFlag(cmd), email, role)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created user %s (%s) in organization %s\n", u.Email, u.Role, u.OrgName)
				printSetupLink(cmd, base, token)
				return nil
			})(cmd, args)
		},
	}
	requiredOrg(create)
	emailFlag(create)
	create.Flags().String("role", store.RoleViewer, "admin (may create and revoke keys, edit Loops, retry, run) or viewer (reads)")
	publicURLFlag(create)

	list := listCommand(&cobra.Command{
		Use:   "list",
		Short: "List users, of one organization or of all",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			users, err := db.ListUsers(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			return printList(cmd, users, []string{"EMAIL", "ORG", "ROLE", "STATE", "CREATED", "LAST_LOGIN"}, func(u store.User) []string {
				state, lastLogin := "active", "never"
				switch {
				case u.DisabledAt != nil:
					state = "disabled " + u.DisabledAt.Format(timeFormat)
				case !u.PasswordSet:
					state = "no password yet"
				}
				if u.LastLoginAt != nil {
					lastLogin = u.LastLoginAt.Format(timeFormat)
				}
				return []string{u.Email, u.OrgName, u.Role, state, u.CreatedAt.Format(timeFormat), lastLogin}
			})
		}),
	})
	list.Flags().String("org", "", "organization name (all organizations when omitted)")

	disable := &cobra.Command{
		Use:   "disable",
		Short: "Disable a user for good: its sessions end and its links stop working at once",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			email, _ := cmd.Flags().GetString("email")
			u, err := db.DisableUser(cmd.Context(), email)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "disabled %s; its sessions have ended\n", u.Email)
			return nil
		}),
	}
	emailFlag(disable)

	reset := &cobra.Command{
		Use:   "reset-password",
		Short: "Print a new one-time link to set a user's password; earlier links stop working",
		Long: "Print a new one-time link to set a user's password; earlier links stop working. " +
			"The current password works until the link is used; setting the new one ends the user's sessions.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := publicURL(cmd)
			if err != nil {
				return err
			}
			return withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				email, _ := cmd.Flags().GetString("email")
				token, err := db.NewSetupLink(cmd.Context(), email)
				if err != nil {
					return err
				}
				printSetupLink(cmd, base, token)
				return nil
			})(cmd, args)
		},
	}
	emailFlag(reset)
	publicURLFlag(reset)

	users.AddCommand(create, list, disable, reset)
	return users
}
