package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"enrichd/store"

	"github.com/spf13/cobra"
)

// budgetRow is one budget as `sources budget` prints it.
type budgetRow struct {
	Scope          string `json:"scope"` // "installation" or the organization's name
	Source         string `json:"source"`
	MonthlyCredits int64  `json:"monthly_credits"`
}

func newSourcesBudgetCommand() *cobra.Command {
	cmd := listCommand(&cobra.Command{
		Use:   "budget [SOURCE CREDITS]",
		Short: "Set or show the monthly budgets of vendor credits per source",
		Long: `budget caps the vendor credits a source may cost a calendar month (UTC): with --org,
what that organization's tasks spend on it, whichever key they use; without, what every
organization's tasks spend with the installation's keys. CREDITS is a whole number;
0 or none clears the budget. A source whose month has reached a cap is skipped and the
next one asked; a task no source could answer because of budgets fails
provider_unavailable and is refunded. serve's --<vendor>-monthly-budget sets an
installation budget too: where both are set, the lower applies.

With no arguments it prints the budgets: the organization's and the installation's with
--org, the installation's without.

Sources with a price: sim, enrichlayer, pdl, apollo (dataset and web cost nothing).`,
		Args: cobra.MatchAll(func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return fmt.Errorf("give a source and its monthly credits (0 or none clears), or nothing to print the budgets")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The arguments are checked before the database is opened: a refused one
			// changes nothing and opens nothing.
			var source string
			var credits int64
			if len(args) == 2 {
				source = strings.TrimSpace(args[0])
				if !slices.Contains(pricedSources, source) {
					if slices.Contains(strings.Split(knownSources, ", "), source) {
						return fmt.Errorf("%s costs no vendor credits: a budget would never bind it (sources with a price: %s)", source, strings.Join(pricedSources, ", "))
					}
					return fmt.Errorf("unknown source %q (sources with a price: %s)", args[0], strings.Join(pricedSources, ", "))
				}
				if raw := strings.TrimSpace(args[1]); raw != "none" {
					n, err := strconv.ParseInt(raw, 10, 64)
					if err != nil || n < 0 || n > store.MaxBudget {
						return fmt.Errorf("CREDITS %q: want a whole number of vendor credits from 0 to %d, or none", args[1], store.MaxBudget)
					}
					credits = n
				}
			}
			return withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				ctx := cmd.Context()
				orgID, scope := "", "installation"
				if name := orgFlag(cmd); name != "" {
					org, err := db.FindOrg(ctx, name)
					if err != nil {
						return err
					}
					orgID, scope = org.ID, org.Name
				}
				if source != "" {
					if err := db.SetSourceBudget(ctx, orgID, source, credits); err != nil {
						return err
					}
				}
				own, inst, err := db.SourceBudgets(ctx, orgID)
				if err != nil {
					return err
				}
				var rows []budgetRow
				if orgID != "" {
					rows = appendBudgets(rows, scope, own)
				}
				rows = appendBudgets(rows, "installation", inst)
				return printList(cmd, rows, []string{"SCOPE", "SOURCE", "MONTHLY_CREDITS"}, func(r budgetRow) []string {
					return []string{r.Scope, r.Source, strconv.FormatInt(r.MonthlyCredits, 10)}
				})
			})(cmd, args)
		},
	})
	cmd.Flags().String("org", "", "organization name; left out, the installation's budget")
	return cmd
}

func appendBudgets(rows []budgetRow, scope string, budgets map[string]int64) []budgetRow {
	names := make([]string, 0, len(budgets))
	for n := range budgets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		rows = append(rows, budgetRow{Scope: scope, Source: n, MonthlyCredits: budgets[n]})
	}
	return rows
}
