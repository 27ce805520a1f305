package cli

import (
	"fmt"
	"time"

	"enrichd/store"

	"github.com/spf13/cobra"
)

func newCreditsCommand() *cobra.Command {
	credits := &cobra.Command{Use: "credits", Short: "Grant credits and read the ledger"}
	grant := &cobra.Command{
		Use:   "grant",
		Short: "Grant credits to an organization",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			amount, _ := cmd.Flags().GetInt64("amount")
			var expires *time.Time
			if raw, _ := cmd.Flags().GetString("expires"); raw != "" {
				t, err := parseExpiry(raw)
				if err != nil {
					return err
				}
				// A grant that expired before it was made gives nothing but two ledger
				// rows: a typo in the year, most likely.
				if now := time.Now(); !t.After(now) {
					return fmt.Errorf("--expires %s is in the past (%s, now is %s): a grant must expire later than now; omit --expires for credits that never expire",
						raw, t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
				}
				expires = &t
			}
			id, err := db.GrantCredits(cmd.Context(), orgFlag(cmd), amount, expires)
			if err != nil {
				return err
			}
			b, err := db.CreditBalance(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "granted %d credits (grant %d); balance %d\n", amount, id, b.Balance)
			return nil
		}),
	}
	requiredOrg(grant)
	grant.Flags().Int64("amount", 0, "number of credits (required)")
	grant.MarkFlagRequired("amount")
	grant.Flags().String("expires", "", "when the grant expires, later than now: YYYY-MM-DD (start of that day, UTC) or RFC 3339; never when empty")

	balance := &cobra.Command{
		Use:   "balance",
		Short: "Print an organization's credit balance",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			b, err := db.CreditBalance(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d\n", b.Balance)
			fmt.Fprintf(cmd.ErrOrStderr(), "granted %d - charged %d + refunded %d - expired %d = %d\n",
				b.Granted, b.Charged, b.Refund, b.Expired, b.Balance)
			return nil
		}),
	}
	requiredOrg(balance)

	ledger := listCommand(&cobra.Command{
		Use:   "ledger",
		Short: "Print an organization's credit ledger, oldest first",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			entries, err := db.CreditLedger(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			return printList(cmd, entries, []string{"ID", "CREATED", "KIND", "AMOUNT", "GRANT", "TASK"}, func(e store.LedgerEntry) []string {
				task := "-"
				if e.TaskID != nil {
					task = *e.TaskID
				}
				return []string{fmt.Sprint(e.ID), e.CreatedAt.Format(timeFormat), e.Kind, fmt.Sprint(e.Amount), fmt.Sprint(e.GrantID), task}
			})
		}),
	})
	requiredOrg(ledger)
	credits.AddCommand(grant, balance, ledger)
	return credits
}

func parseExpiry(raw string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, raw); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires %q: use YYYY-MM-DD or RFC 3339 (2027-01-31T00:00:00Z)", raw)
	}
	return t, nil
}
