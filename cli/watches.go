package cli

import (
	"encoding/json"
	"fmt"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
	"enrichd/watch"

	"github.com/spf13/cobra"
)

// findWatchArg finds the organization's watch by id.
func findWatchArg(cmd *cobra.Command, db *store.DB, id string) (*store.Watch, error) {
	org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
	if err != nil {
		return nil, err
	}
	return db.GetWatch(cmd.Context(), org.ID, id)
}

func watchState(w *store.Watch) string {
	switch {
	case w.PausedReason != nil:
		return "paused: " + *w.PausedReason
	case !w.Enabled:
		return "disabled"
	}
	return "enabled"
}

func newWatchesCommand() *cobra.Command {
	watches := &cobra.Command{Use: "watches", Short: "Manage watches: companies and people checked on a schedule, their changes sent to a Loop",
		Long: "A watch re-enriches one company or person every --every-days days and sends what changed to a Loop.\n" +
			"Checking a watch now (POST /v1/watches/{id}/run) needs serve's workers, so it is the API's alone."}

	create := &cobra.Command{
		Use:   "create",
		Short: "Create a watch; prints it as JSON",
		Long: "Create a watch of a company (--domain or --network-url) or a person (--network-url, or --email with hints).\n" +
			"It is checked as POST /v1/watches checks a body; its first check is due within the hour and sets the baseline.",
		Args: cobra.NoArgs,
		RunE: withPersonalDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			f := cmd.Flags()
			body := map[string]any{}
			for flag, field := range map[string]string{"object-type": "object_type", "domain": "domain", "network-url": "networkUrl",
				"email": "email", "full-name": "fullName", "title": "title", "location": "location"} {
				if f.Changed(flag) || flag == "object-type" {
					body[field], _ = f.GetString(flag)
				}
			}
			if f.Changed("every-days") {
				body["every_days"], _ = f.GetInt("every-days")
			}
			if f.Changed("fields") {
				fields, _ := f.GetStringSlice("fields")
				body["fields"] = fields
			}
			if notify, _ := f.GetBool("notify-unchanged"); notify {
				body["notify_unchanged"] = true
			}
			if disabled, _ := f.GetBool("disabled"); disabled {
				body["enabled"] = false
			}
			loopArg, _ := f.GetString("loop")
			l, err := findLoopArg(cmd, db, loopArg)
			if err != nil {
				return err
			}
			body["loop_id"] = l.ID
			raw, err := json.Marshal(body)
			if err != nil {
				return err
			}
			host, _ := f.GetString("network-host")
			nw, err := server.CheckWatch(host, l.OrgID, raw, db.Now())
			if err != nil {
				return err
			}
			w, err := db.CreateWatch(cmd.Context(), store.ByOperator, nw)
			if err != nil {
				return err
			}
			return printJSON(cmd, w)
		}),
	}
	requiredOrg(create)
	cf := create.Flags()
	cf.String("loop", "", "the Loop (id or slug) the watch's changes go to (required)")
	cf.String("object-type", enrich.ObjectCompany, "company or person")
	cf.String("domain", "", "a company's domain")
	cf.String("network-url", "", "a company page or a profile on the network")
	cf.String("email", "", "a person's work email")
	cf.String("full-name", "", "tie-break hint for --email")
	cf.String("title", "", "tie-break hint for --email")
	cf.String("location", "", "tie-break hint for --email")
	cf.Int("every-days", store.DefaultWatchDays, fmt.Sprintf("days between two checks, %d to %d", store.MinWatchDays, store.MaxWatchDays))
	cf.StringSlice("fields", nil, "the top-level fields compared, comma-separated (default: every field)")
	cf.Bool("notify-unchanged", false, "send record.unchanged when a check finds nothing changed")
	cf.Bool("disabled", false, "create it disabled")
	cf.String("network-host", enrich.DefaultNetworkHost, "host of the professional network, as serve's --network-host")
	addSecretKeyFlag(cf)
	create.MarkFlagRequired("loop")

	list := listCommand(&cobra.Command{
		Use:   "list",
		Short: "List an organization's watches, newest first, and the month's watch spend",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			ctx := cmd.Context()
			org, err := db.FindOrg(ctx, orgFlag(cmd))
			if err != nil {
				return err
			}
			filter := store.WatchFilter{PageSize: store.MaxWatchPage}
			if loopArg, _ := cmd.Flags().GetString("loop"); loopArg != "" {
				l, err := findLoopArg(cmd, db, loopArg)
				if err != nil {
					return err
				}
				filter.LoopID = l.ID
			}
			var all []*store.Watch
			for {
				page, total, err := db.ListWatches(ctx, org.ID, filter)
				if err != nil {
					return err
				}
				all = append(all, page...)
				if len(page) == 0 || int64(len(all)) >= total {
					break
				}
				filter.Page++
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); !asJSON {
				spent, limit, err := db.WatchSpend(ctx, org.ID, watch.MonthStart(db.Now()))
				if err != nil {
					return err
				}
				capText := "no cap"
				if limit != nil {
					capText = fmt.Sprintf("cap %d", *limit)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "watch credits this month: %d (%s)\n", spent, capText)
			}
			return printList(cmd, all, []string{"ID", "OBJECT_TYPE", "TARGET", "LOOP", "EVERY_DAYS", "STATE", "NEXT_RUN", "LAST_TASK"}, func(w *store.Watch) []string {
				next, last := "-", "-"
				if w.NextRunAt != nil {
					next = w.NextRunAt.UTC().Format(timeFormat)
				}
				if w.LastTaskID != nil {
					last = *w.LastTaskID
				}
				return []string{w.ID, w.ObjectType, w.Target, w.LoopID, fmt.Sprint(w.EveryDays), watchState(w), next, last}
			})
		}),
	})
	requiredOrg(list)
	list.Flags().String("loop", "", "only the watches of this Loop (id or slug)")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Print a watch as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			w, err := findWatchArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd, w)
		}),
	}
	requiredOrg(get)

	setEnabled := func(use, short string, enabled bool) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				w, err := findWatchArg(cmd, db, args[0])
				if err != nil {
					return err
				}
				p, err := server.CheckWatchChange(w, []byte(fmt.Sprintf(`{"enabled":%t}`, enabled)), db.Now())
				if err != nil {
					return err
				}
				if w, err = db.UpdateWatch(cmd.Context(), w.OrgID, w.ID, p); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%sd watch %s (%s)\n", use, w.ID, watchState(w))
				return nil
			}),
		}
		requiredOrg(c)
		return c
	}

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a watch; its tasks stay",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			w, err := findWatchArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			if err := db.DeleteWatch(cmd.Context(), w.OrgID, w.ID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted watch %s\n", w.ID)
			return nil
		}),
	}
	requiredOrg(del)

	capCmd := &cobra.Command{
		Use:   "cap",
		Short: "Set or remove an organization's monthly cap on the credits its scheduled watch checks take",
		Long: "Past the cap, a due watch waits for the first day of the next UTC month (nothing is charged); checks asked for\n" +
			"through POST /v1/watches/{id}/run still run, and count towards the month's spend.",
		Args: cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			f := cmd.Flags()
			none, _ := f.GetBool("none")
			var limit *int64
			switch {
			case none && f.Changed("monthly-credits"):
				return fmt.Errorf("give --monthly-credits N or --none, not both")
			case none:
			case !f.Changed("monthly-credits"):
				return fmt.Errorf("give --monthly-credits N, or --none to remove the cap")
			default:
				n, _ := f.GetInt64("monthly-credits")
				if n < 0 {
					return fmt.Errorf("--monthly-credits must be 0 or more")
				}
				limit = &n
			}
			if err := db.SetWatchCap(cmd.Context(), orgFlag(cmd), limit); err != nil {
				return err
			}
			if limit == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "organization %s: no monthly cap on watch credits\n", orgFlag(cmd))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "organization %s: watch checks take at most %d credits a month\n", orgFlag(cmd), *limit)
			}
			return nil
		}),
	}
	requiredOrg(capCmd)
	capCmd.Flags().Int64("monthly-credits", 0, "the most credits scheduled watch checks may take in a UTC month")
	capCmd.Flags().Bool("none", false, "remove the cap")

	watches.AddCommand(create, list, get,
		setEnabled("enable", "Enable a watch (a paused one too): due within the hour", true),
		setEnabled("disable", "Disable a watch: no more scheduled checks", false),
		del, capCmd)
	return watches
}
