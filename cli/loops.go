package cli

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/netguard"
	"enrichd/store"

	"github.com/spf13/cobra"
)

const allowPrivateHelp = "accept plain http and non-public webhook addresses (loopback, private networks): for local development and tests only"

func webhookPolicy(cmd *cobra.Command) netguard.Policy {
	allow, _ := cmd.Flags().GetBool("allow-private-webhooks")
	return netguard.Policy{AllowPrivate: allow}
}

// findLoopArg finds the organization's Loop named by id or slug.
func findLoopArg(cmd *cobra.Command, db *store.DB, arg string) (*store.Loop, error) {
	org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
	if err != nil {
		return nil, err
	}
	loops, err := db.ListLoops(cmd.Context(), org.ID)
	if err != nil {
		return nil, err
	}
	for _, l := range loops {
		if l.ID == arg || l.Slug == arg {
			return l, nil
		}
	}
	return nil, fmt.Errorf("organization %s has no Loop %q (give its id or slug; `enrichd loops list --org %s` lists them)", org.Name, arg, org.Name)
}

func newLoopsCommand() *cobra.Command {
	loops := &cobra.Command{Use: "loops", Short: "Manage Loops: destinations of enrichment results (webhooks, HubSpot)"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a Loop; prints it as JSON with its signing secret, shown this once",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			f := cmd.Flags()
			name, _ := f.GetString("name")
			url, _ := f.GetString("url")
			objectType, _ := f.GetString("object-type")
			disabled, _ := f.GetBool("disabled")
			if objectType != enrich.ObjectCompany && objectType != enrich.ObjectPerson {
				return fmt.Errorf("--object-type must be company or person")
			}
			if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > 200 {
				return fmt.Errorf("--name must be 1 to 200 characters, not blank")
			}
			if toHubSpot, _ := f.GetBool("hubspot"); toHubSpot {
				if url != "" {
					return errors.New("--url is a webhook's; a Loop created with --hubspot writes into HubSpot")
				}
				return createHubSpotLoop(cmd, db, store.NewLoop{Name: name, ObjectType: objectType, Enabled: !disabled})
			}
			if url == "" {
				return errors.New("--url is required: the https webhook URL (or --hubspot, with the token on standard input)")
			}
			if _, err := webhookPolicy(cmd).CheckURL(cmd.Context(), url); err != nil {
				if errors.Is(err, netguard.ErrPlainHTTP) || errors.Is(err, netguard.ErrNotPublic) {
					return fmt.Errorf("--url: %w (for local testing only, add --allow-private-webhooks, and start serve with it too so that events reach the URL)", err)
				}
				return fmt.Errorf("--url: %w", err)
			}
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			l, err := db.CreateLoop(cmd.Context(), store.NewLoop{OrgID: org.ID, Name: name, ObjectType: objectType, WebhookURL: url, Enabled: !disabled})
			if err != nil {
				return err
			}
			return printJSON(cmd, l)
		}),
	}
	requiredOrg(create)
	create.Flags().String("name", "", "name of the Loop (required)")
	create.Flags().String("url", "", "https webhook URL, publicly reachable (required, unless --hubspot)")
	create.Flags().String("object-type", enrich.ObjectCompany, "company or person")
	create.Flags().Bool("disabled", false, "create it disabled")
	create.Flags().Bool("allow-private-webhooks", false, allowPrivateHelp)
	addHubSpotFlags(create)
	create.MarkFlagRequired("name")

	list := listCommand(&cobra.Command{
		Use:   "list",
		Short: "List an organization's Loops",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			loops, err := db.ListLoops(cmd.Context(), org.ID)
			if err != nil {
				return err
			}
			return printList(cmd, loops, []string{"ID", "SLUG", "OBJECT_TYPE", "STATE", "URL"}, func(l *store.Loop) []string {
				state := "enabled"
				if !l.Enabled {
					state = "disabled"
				}
				where := l.Destination.URL
				if l.Destination.Kind == store.KindHubSpot {
					where = "hubspot (token " + l.Destination.TokenLast4 + ")"
				}
				return []string{l.ID, l.Slug, l.ObjectType, state, where}
			})
		}),
	})
	requiredOrg(list)

	get := &cobra.Command{
		Use:   "get ID|SLUG",
		Short: "Print a Loop as JSON (without its secret)",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			l, err := findLoopArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd, l)
		}),
	}
	requiredOrg(get)

	setEnabled := func(use, short string, enabled bool) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " ID|SLUG",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				l, err := findLoopArg(cmd, db, args[0])
				if err != nil {
					return err
				}
				if _, err := db.UpdateLoop(cmd.Context(), l.OrgID, l.ID, store.LoopPatch{Enabled: &enabled}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%sd loop %s (%s)\n", use, l.Slug, l.ID)
				return nil
			}),
		}
		requiredOrg(c)
		return c
	}

	del := &cobra.Command{
		Use:   "delete ID|SLUG",
		Short: "Delete a Loop and its deliveries (how a lost signing secret is replaced)",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			l, err := findLoopArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			if err := db.DeleteLoop(cmd.Context(), l.OrgID, l.ID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted loop %s (%s)\n", l.Slug, l.ID)
			return nil
		}),
	}
	requiredOrg(del)

	test := &cobra.Command{
		Use:   "test ID|SLUG",
		Short: "Queue a test event to a Loop's webhook; a running serve sends it",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			l, err := findLoopArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			d, err := db.CreateTestDelivery(cmd.Context(), l.OrgID, l.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", d.ID)
			return nil
		}),
	}
	requiredOrg(test)

	rotate := &cobra.Command{
		Use:   "rotate ID|SLUG",
		Short: "Give a Loop a new signing secret; prints the Loop as JSON with it, shown this once",
		Long: "Give a Loop a new signing secret; prints the Loop as JSON with it, shown this once.\n\n" +
			"For the grace period (--grace, 24h unless given, at most 168h) every delivery is signed with both the new\n" +
			"secret and the old one, so a receiver keeps verifying until it is given the new one. --grace 0 replaces\n" +
			"the secret at once (a leaked secret). A Loop created before the Standard Webhooks headers rotates once to\n" +
			"get a secret the Standard Webhooks libraries decode.",
		Args: cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			grace, _ := cmd.Flags().GetDuration("grace")
			if grace < 0 || grace > store.MaxSecretGrace {
				return fmt.Errorf("--grace must be from 0 to %s", store.MaxSecretGrace)
			}
			l, err := findLoopArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			rotated, err := db.RotateLoopSecret(cmd.Context(), l.OrgID, l.ID, grace)
			if err != nil {
				return err
			}
			return printJSON(cmd, rotated)
		}),
	}
	requiredOrg(rotate)
	rotate.Flags().Duration("grace", store.DefaultSecretGrace, "how long the old secret keeps signing beside the new one (0 to 168h)")

	setDestination := func(use, short string, enabled bool) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " ID|SLUG",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				l, err := findLoopArg(cmd, db, args[0])
				if err != nil {
					return err
				}
				if _, err := db.UpdateLoop(cmd.Context(), l.OrgID, l.ID, store.LoopPatch{DestinationEnabled: &enabled}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%sd the destination of loop %s (%s)\n", strings.TrimSuffix(use, "-destination"), l.Slug, l.ID)
				return nil
			}),
		}
		requiredOrg(c)
		return c
	}

	loops.AddCommand(create, list, get,
		setEnabled("enable", "Enable a Loop: it takes new runs again", true),
		setEnabled("disable", "Disable a Loop: it takes no new runs; tasks in flight still deliver", false),
		setDestination("enable-destination", "Send a Loop's deliveries again after its receiver answered 410 Gone", true),
		setDestination("disable-destination", "Stop sending a Loop's deliveries: pending ones fail, new ones fail at once", false),
		rotate, del, test, newSetHubSpotTokenCommand())
	return loops
}

func newDeliveriesCommand() *cobra.Command {
	deliveries := &cobra.Command{Use: "deliveries", Short: "Read and retry webhook deliveries"}
	list := listCommand(&cobra.Command{
		Use:   "list",
		Short: "List a Loop's deliveries, newest first",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			loopArg, _ := cmd.Flags().GetString("loop")
			limit, _ := cmd.Flags().GetInt("limit")
			if limit < 1 || limit > 100 {
				return fmt.Errorf("--limit must be from 1 to 100")
			}
			l, err := findLoopArg(cmd, db, loopArg)
			if err != nil {
				return err
			}
			ds, total, err := db.ListDeliveries(cmd.Context(), l.OrgID, l.ID, 0, limit)
			if err != nil {
				return err
			}
			err = printList(cmd, ds, []string{"ID", "EVENT", "STATUS", "ATTEMPTS", "NEXT_ATTEMPT", "LAST_STATUS_CODE", "LAST_ERROR"}, func(d *store.Delivery) []string {
				next, code, lastErr := "-", "-", ""
				if d.NextAttemptAt != nil {
					next = d.NextAttemptAt.Format(timeFormat)
				}
				if d.LastStatusCode != nil {
					code = fmt.Sprint(*d.LastStatusCode)
				}
				if d.LastError != nil {
					lastErr = *d.LastError
				}
				return []string{d.ID, d.Event, d.Status, fmt.Sprint(d.Attempts), next, code, lastErr}
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d deliveries\n", len(ds), total)
			return err
		}),
	})
	requiredOrg(list)
	list.Flags().String("loop", "", "the Loop's id or slug (required)")
	list.Flags().Int("limit", 25, "how many to list, newest first (at most 100)")
	list.MarkFlagRequired("loop")

	retry := &cobra.Command{
		Use:   "retry DELIVERY_ID",
		Short: "Send a failed or pending delivery now, with the same delivery id; a running serve sends it",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			d, err := db.RetryDelivery(cmd.Context(), org.ID, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "delivery %s is due now (attempt %d)\n", d.ID, d.Attempts+1)
			return nil
		}),
	}
	requiredOrg(retry)
	deliveries.AddCommand(list, retry)
	return deliveries
}
